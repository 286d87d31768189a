# SPDX-License-Identifier: GPL-3.0-or-later
"""One entry point for a fresh machine: set up the environment, then run a job.

    python3 tools/dev.py demo     # build, install into a throw-away profile, solve sample rigs
    python3 tools/dev.py test     # the whole test suite (what CI runs), then the Blender tests on bpy 4.2
    python3 tools/dev.py build    # dist/fabrik_ik-<version>.zip (extension) and -legacy.zip
    python3 tools/dev.py bench    # every benchmark, written into docs/benchmarks.md and the README's table
    python3 tools/dev.py pictures # the README's pictures: the GUI tests' screenshots and the demo's sheets

Only the standard library is used here, so it runs with nothing but Python 3.11 and pip.
The virtual environment lives in `.venv/` (or `$FABRIK_VENV`) and is reused while
`requirements.txt` is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
VENV = Path(os.environ.get("FABRIK_VENV", ROOT / ".venv"))
#: A second environment with Blender 4.2 LTS as a module, for the Blender-facing tests.
REQUIREMENTS_42 = ROOT / "requirements-bpy42.txt"
VENV_42 = Path(os.environ.get("FABRIK_VENV_42", ROOT / ".venv-bpy42"))
DEBIAN_PACKAGES = ("blender", "python3-numpy", "xvfb", "xauth", "nodejs")


def log(message: str) -> None:
    """Print a progress line that stands out from tool output."""
    print(f"[dev] {message}", flush=True)


def venv_python(venv: Path = VENV) -> Path:
    """Path of a virtual environment's interpreter (Scripts\\python.exe on Windows)."""
    return venv / "Scripts" / "python.exe" if os.name == "nt" else venv / "bin" / "python"


def ensure_venv(venv: Path = VENV, requirements: Path = REQUIREMENTS) -> Path:
    """Create or refresh a virtual environment from a requirements file; return its interpreter."""
    if sys.version_info[:2] != (3, 11):
        sys.exit(
            f"Python 3.11 is required (the bpy wheel exists only for 3.11); this is {sys.version.split()[0]}.\n"
            "Run this script with python3.11."
        )
    wanted = hashlib.sha256(requirements.read_bytes()).hexdigest()
    stamp = venv / ".requirements-sha256"
    if venv_python(venv).exists() and stamp.exists() and stamp.read_text().strip() == wanted:
        return venv_python(venv)
    if not venv_python(venv).exists():
        log(f"creating virtual environment in {venv}")
        subprocess.check_call([sys.executable, "-m", "venv", str(venv)])
    log(f"installing {requirements.name} (a bpy wheel is ~370 MB the first time; pip caches it)")
    pip = [str(venv_python(venv)), "-m", "pip", "--disable-pip-version-check"]
    subprocess.check_call(pip + ["install", "--quiet", "--upgrade", "pip"])
    subprocess.check_call(pip + ["install", "--progress-bar", "off", "-r", str(requirements)])
    stamp.write_text(wanted + "\n")
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


def run(python: Path, *args: str) -> int:
    """Run the venv's Python from the repository root and return its exit code."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.call([str(python), *args], cwd=ROOT, env=env)


def main(argv: list[str]) -> int:
    """Dispatch the sub-command."""
    if not argv or argv[0] not in {"demo", "test", "build", "bench", "pictures"}:
        print(__doc__)
        return 2
    command, rest = argv[0], argv[1:]
    python = ensure_venv()
    if command == "build":
        return run(python, "tools/build.py", *rest)
    if command == "demo":
        return run(python, "tools/demo.py", *rest)
    if command == "bench":
        if rest:  # options for the live benchmark alone: print, write nothing
            return run(python, "benchmarks/run.py", *rest)
        return run(python, "tools/benchdocs.py")
    ensure_debian_blender()
    pytest = ["-m", "pytest", "-c", "tests/pytest.ini", "--rootdir", "tests"]
    if command == "pictures":
        gui_tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "gui").glob("test_*.py"))
        return (run(python, "tools/pictures.py", "--forget") or run(python, *pytest, *gui_tests)
                or run(python, "tools/pictures.py")
                or run(python, "tools/demo.py", "--update-docs", *rest))
    before = checkout_state()
    code = run(python, *pytest, *(rest or ["tests"]))
    code = code or checkout_unchanged(before)
    if rest:
        return code  # a chosen subset: run it on the main environment only
    log("the Blender-facing tests again on Blender 4.2 LTS (bpy 4.2 module)")
    python_42 = ensure_venv(VENV_42, REQUIREMENTS_42)
    blender_tests = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "blender").glob("test_*.py"))
    code_42 = run(python_42, *pytest, "-p", "no:cacheprovider", *blender_tests)
    return code or code_42 or checkout_unchanged(before)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
