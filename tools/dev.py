# SPDX-License-Identifier: GPL-3.0-or-later
"""One entry point for a fresh machine: set up the environment, then run a job.

    python3 tools/dev.py build    # dist/fabrik_ik-<version>.zip (extension) and -legacy.zip: no setup, no download
    python3 tools/dev.py demo     # build, install into a throw-away profile, solve sample rigs
    python3 tools/dev.py test     # the whole test suite (what CI runs): Blender 5.0, the GUI, Blender 4.2
    python3 tools/dev.py bench    # every benchmark, printed and written into out/bench/ (--write: into the docs)
    python3 tools/dev.py pictures # the README's pictures: the GUI tests' screenshots and the demo's sheets

`python3 tools/dev.py COMMAND --help` says more about one. Only the standard library
is used here. `build` runs on any Python 3.9 or newer; the others need Python 3.11
and pip, and set up a virtual environment in `.venv/` (or `$FABRIK_VENV`) with
Blender as a Python module (about 370 MB the first time), reused while
`requirements.txt` and `pyproject.toml` are unchanged; the add-on is installed
into it, so `.venv/bin/python -m fabrik_addon bake ...` runs from any folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
#: The add-on as a Python package: installed into each environment (editable), so `python -m fabrik_addon` runs
#: from any folder.
PYPROJECT = ROOT / "pyproject.toml"
VENV = Path(os.environ.get("FABRIK_VENV", ROOT / ".venv"))
#: A second environment with Blender 4.2 LTS as a module, for the Blender-facing tests.
REQUIREMENTS_42 = ROOT / "requirements-bpy42.txt"
VENV_42 = Path(os.environ.get("FABRIK_VENV_42", ROOT / ".venv-bpy42"))
DEBIAN_PACKAGES = ("blender", "python3-numpy", "xvfb", "xauth", "nodejs")
#: What each command does and takes, for `COMMAND --help`.
HELP = {
    "build": "python3 tools/dev.py build [--out-dir DIR]\n"
             "    Make the extension zip (Blender 4.2+) and the legacy zip (Blender 3.4-4.1) in dist/ (or DIR),\n"
             "    with the standard library alone: any Python 3.9+, no download.",
    "demo": "python3 tools/dev.py demo [--samples A,B] [--jobs N] [--no-render] [--update-docs]\n"
            "    Set up, build the add-on, install it into a throw-away Blender profile and solve the sample rigs\n"
            "    live and baked; each sample's scene and contact sheet go to out/<sample>.blend and .png.",
    "test": "python3 tools/dev.py test [PYTEST ARGUMENTS]\n"
            "    The whole suite: tests/ on Blender 5.0 (bpy), the GUI tests in Debian's Blender under xvfb\n"
            "    (installed with apt-get when run as root; else they skip and say why), and tests/blender on\n"
            "    Blender 4.2 LTS (bpy). One line per pass at the end, then whether all passed.\n"
            "    With arguments (files, -k, -x...): that subset, on Blender 5.0 alone.",
    "bench": "python3 tools/dev.py bench [--write] [--quick] [--only SCRIPT]\n"
             "    Every benchmark (about 10 minutes); the tables go to out/bench/. --write puts them into the\n"
             "    tracked docs/benchmarks.md and the README's table instead.",
    "pictures": "python3 tools/dev.py pictures\n"
                "    Refresh the README's pictures: the GUI tests' screenshots and the demo's contact sheets.",
}


class SetupError(RuntimeError):
    """Setting up failed: the message says what failed and what to do, in a line or two."""


def log(message: str) -> None:
    """Print a progress line that stands out from tool output."""
    print(f"[dev] {message}", flush=True)


def venv_python(venv: Path = VENV) -> Path:
    """Path of a virtual environment's interpreter (Scripts\\python.exe on Windows)."""
    return venv / "Scripts" / "python.exe" if os.name == "nt" else venv / "bin" / "python"


def ensure_venv(venv: Path = VENV, requirements: Path = REQUIREMENTS) -> Path:
    """Create or refresh a virtual environment from a requirements file; return its interpreter (SetupError,
    saying what to do, where that fails)."""
    if sys.version_info[:2] != (3, 11):
        raise SetupError(
            f"Python 3.11 is needed here (Blender's Python module exists only for 3.11); this is "
            f"{sys.version.split()[0]}. Run the same command with python3.11 (`build` alone runs on any Python 3.9+)."
        )
    try:
        # (the checkout's own path too: the environment installs this checkout, and a copy elsewhere must not
        # reuse it)
        wanted = hashlib.sha256(requirements.read_bytes() + PYPROJECT.read_bytes() + str(ROOT).encode()).hexdigest()
        stamp = venv / ".requirements-sha256"
        if venv_python(venv).exists() and stamp.exists() and stamp.read_text().strip() == wanted:
            return venv_python(venv)
        if not venv_python(venv).exists():
            log(f"creating virtual environment in {venv}")
            if subprocess.call([sys.executable, "-m", "venv", str(venv)]) != 0:
                raise SetupError(
                    f"could not create a virtual environment in {venv} (see above). On Debian or Ubuntu, "
                    "install python3.11-venv; or set FABRIK_VENV to a folder you can write."
                )
        log(f"installing {requirements.name} (a bpy wheel is ~370 MB the first time; pip caches it)")
        pip = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check"]
        if (subprocess.call(pip + ["install", "--quiet", "--upgrade", "pip"]) != 0
                or subprocess.call(pip + ["install", "--progress-bar", "off", "-r", str(requirements)]) != 0):
            raise SetupError(
                f"pip could not install {requirements.name} into {venv} (see pip's lines above): check the network "
                "or proxy (pip needs pypi.org), then run the same command again."
            )
        if subprocess.call(pip + ["install", "--quiet", "--no-deps", "--no-build-isolation", "-e", str(ROOT)],
                           cwd=ROOT) != 0:
            raise SetupError(
                f"pip could not install the add-on from {ROOT} into {venv} (see pip's lines above): is "
                "pyproject.toml as the checkout has it?"
            )
        stamp.write_text(wanted + "\n")
    except OSError as exc:
        raise SetupError(
            f"could not set up {venv}: {exc.strerror or exc} ({getattr(exc, 'filename', None) or venv}). "
            "Set FABRIK_VENV to a folder you can write, or restore the checkout's files."
        ) from None
    return venv_python(venv)


def ensure_debian_blender() -> None:
    """Install Debian's blender and xvfb (GUI tests) and Node.js (the Flamenco job type's test) when we are root
    and they are missing."""
    numpy_for_blender = Path("/usr/lib/python3/dist-packages/numpy").exists()
    if shutil.which("blender") and shutil.which("xvfb-run") and shutil.which("node") and numpy_for_blender:
        return
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("apt-get"):
        log("Debian's blender/xvfb/nodejs are missing and this is not root with apt-get: their tests will skip")
        return
    log("installing Debian's blender, xvfb, xauth and nodejs for the GUI and farm tests (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.check_call(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        subprocess.check_call(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *DEBIAN_PACKAGES],
            env=env,
            stdout=subprocess.DEVNULL,
        )
    except subprocess.CalledProcessError as exc:
        log(f"apt-get failed ({exc}); GUI tests will skip")


def checkout_state() -> dict[str, str] | None:
    """What the checkout holds besides its commit: each changed or untracked (not ignored) file with a hash of
    its content; None outside a git checkout."""
    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, check=True).stdout

    try:
        changed = git("diff", "HEAD", "--name-only", "-z").split(b"\0")
        untracked = git("ls-files", "--others", "--exclude-standard", "-z").split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return None
    state = {}
    for name in filter(None, changed + untracked):
        path = ROOT / name.decode()
        state[name.decode()] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "gone"
    return state


def checkout_unchanged(before: dict[str, str] | None) -> int:
    """0 if the tests left the checkout as they found it; else name what changed and return 1."""
    after = checkout_state()
    if before is None or after is None or after == before:
        return 0
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    log(f"the tests changed the checkout (they must write to test-artifacts/ or a temporary folder): {changed}")
    return 1


def run(python: Path, *args: str, command: str = "") -> int:
    """Run the venv's Python from the repository root and return its exit code; `command` is the dev.py command
    the script's usage lines name (FABRIK_PROG)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if command:
        env["FABRIK_PROG"] = f"python3 tools/dev.py {command}"
    return subprocess.call([str(python), *args], cwd=ROOT, env=env)


#: Colour codes a terminal-aware pytest may print, taken out before its last line is read.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Pytest's closing line: the counts and the time ("=== 12 passed, 3 skipped in 4.5s ===", or bare with -q).
SUMMARY = re.compile(r"=* ?(\d+ (?:passed|failed|errors?|skipped|deselected|xfailed|xpassed)\b.* in [\d.]+s.*?) ?=*")


def run_pass(python: Path, *args: str) -> tuple[int, str]:
    """Run one pytest pass, its output passed through as it comes; return its exit code and its summary (the
    counts of pytest's last line)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    summary = "no summary (pytest stopped before the end)"
    with subprocess.Popen([str(python), *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace", bufsize=1) as process:
        for line in process.stdout:
            sys.stdout.write(line)
            found = SUMMARY.fullmatch(ANSI.sub("", line).strip())
            if found:
                summary = found.group(1)
    sys.stdout.flush()
    return process.returncode, summary


def verdict(code: int, summary: str) -> str:
    """A pass's word: passed, FAILED, or SKIPPED where it passed without running a test (its tools missing)."""
    if code != 0:
        return "FAILED"
    return "SKIPPED" if "skipped" in summary and not re.search(r"\d+ passed", summary) else "passed"


def test(rest: list[str]) -> int:
    """The test command: each pass, then one line per pass and whether all passed."""
    python = ensure_venv()
    ensure_debian_blender()
    pytest = ["-m", "pytest", "-c", "tests/pytest.ini", "--rootdir", "tests"]
    before = checkout_state()
    if rest:  # a chosen subset: on the main environment only
        code = run(python, *pytest, *rest)
        return code or checkout_unchanged(before)
    gui = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "gui").glob("test_*.py"))
    blender = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "blender").glob("test_*.py"))
    passes = [("Blender 5.0 (bpy module): tests/core, blender, package", python,
               [*pytest, "tests", *(f"--ignore={path}" for path in gui)])]
    passes.append(("the GUI (Debian's Blender under xvfb): tests/gui", python, [*pytest, "-p", "no:cacheprovider", *gui]))
    results = []
    for name, interpreter, args in passes:
        log(f"pass: {name}")
        results.append((name, *run_pass(interpreter, *args)))
    name = "Blender 4.2 LTS (bpy module): tests/blender"
    log(f"pass: {name}")
    try:
        python_42 = ensure_venv(VENV_42, REQUIREMENTS_42)
        results.append((name, *run_pass(python_42, *pytest, "-p", "no:cacheprovider", *blender)))
    except SetupError as exc:
        results.append((name, 1, f"not run: {exc}"))
    unchanged = checkout_unchanged(before)
    print()
    for name, code, summary in results:
        log(f"{verdict(code, summary)}  {name}: {summary}")
    log(f"{'passed' if unchanged == 0 else 'FAILED'}  the checkout: {'as the tests found it' if unchanged == 0 else 'changed'}")
    failed = [name for name, code, _ in results if code] + (["the checkout"] if unchanged else [])
    skipped = [name.split(":")[0] for name, code, summary in results if verdict(code, summary) == "SKIPPED"]
    if failed:
        log(f"FAILED: {'; '.join(failed)} (their output is above)")
    else:
        log("ALL PASSED" + (f" (skipped whole: {'; '.join(skipped)}; the lines above say why)" if skipped else ""))
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    """Dispatch the sub-command."""
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in HELP:
        print(f"unknown command {command!r}: use one of {', '.join(HELP)} (--help says more)", file=sys.stderr)
        return 2
    if {"-h", "--help"} & set(rest):
        print(HELP[command])
        return 0
    if command == "build":  # (the standard library alone: no environment to set up)
        return run(Path(sys.executable), "tools/build.py", *rest, command="build")
    try:
        if command == "test":
            return test(rest)
        python = ensure_venv()
        if command == "demo":
            return run(python, "tools/demo.py", *rest, command="demo")
        if command == "bench":
            return run(python, "tools/benchdocs.py", *rest, command="bench")
        if rest:
            print(f"pictures takes no options: {' '.join(rest)}", file=sys.stderr)
            return 2
        ensure_debian_blender()
        pytest = ["-m", "pytest", "-c", "tests/pytest.ini", "--rootdir", "tests"]
        gui_tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "gui").glob("test_*.py"))
        return (run(python, "tools/pictures.py", "--forget") or run(python, *pytest, *gui_tests)
                or run(python, "tools/pictures.py")
                or run(python, "tools/demo.py", "--update-docs"))
    except SetupError as exc:
        log(f"setup failed: {exc}")
        return 1
    except KeyboardInterrupt:
        log("stopped (Ctrl+C)")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
