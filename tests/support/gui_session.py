# SPDX-License-Identifier: GPL-3.0-or-later
"""Running a driver script in the real GUI of Debian's Blender 3.4 under Xvfb, for the GUI tests.

`prepare_profile` installs the legacy zip into a temporary profile in background mode; `run_driver` then runs
a driver (a script of timer-driven steps that writes its result as JSON) in the GUI with that profile, under
`timeout`, and returns what it wrote. `gui_tools` (a fixture in conftest.py) finds blender and xvfb-run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from debian_blender import fallback_numpy_site

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
SCREEN = "1280x800x24"
SETUP_TIMEOUT = 120

# Runs in `blender -b --factory-startup` with the temporary profile: installs and enables the zip
# and saves preferences, so the GUI run starts with the add-on on, without the splash screen and
# without a "save changes?" prompt at quit.
SETUP = r'''
import json
import os
import sys
import traceback

result = {"python": "%d.%d" % sys.version_info[:2]}
try:
    import bpy

    zip_path = sys.argv[sys.argv.index("--") + 1]
    try:
        import numpy
    except ImportError:
        # Debian's blender does not depend on python3-numpy. The user scripts' modules folder is on
        # sys.path in every later session, so the test venv's numpy (same Python minor only) goes there.
        fallback = os.environ.get("FABRIK_FALLBACK_SITE")
        if not fallback or os.environ.get("FABRIK_FALLBACK_PYTHON") != result["python"]:
            raise
        modules = bpy.utils.user_resource('SCRIPTS', path="modules", create=True)
        for name in os.listdir(fallback):
            os.symlink(os.path.join(fallback, name), os.path.join(modules, name))
        sys.path.insert(0, modules)
        import numpy
    result["install"] = sorted(bpy.ops.preferences.addon_install(filepath=zip_path))
    result["enable"] = sorted(bpy.ops.preferences.addon_enable(module="fabrik_ik"))
    prefs = bpy.context.preferences
    prefs.view.show_splash = False
    prefs.view.use_save_prompt = False
    prefs.view.smooth_view = 0  # view_all lands at once instead of animating
    prefs.use_preferences_save = True
    result["save"] = sorted(bpy.ops.wm.save_userpref())
except Exception:
    result["error"] = traceback.format_exc()
print(json.dumps(result), flush=True)
'''


def png_info(path: Path) -> tuple[int, int, int]:
    """(width, height, inflated size) of a PNG; raises if the signature, chunks or compressed data are broken."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG signature")
    pos, header, idat = 8, None, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if header is None or not idat:
        raise ValueError("no IHDR or IDAT chunk")
    return header[0], header[1], len(zlib.decompress(b"".join(idat)))


def run_process(command: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """Run a command in its own process group; on timeout kill that group (Xvfb included) and fail."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            pytest.fail(f"{command[0]} did not finish within {timeout} s:\n{out[-4000:]}\n{err[-4000:]}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def prepare_profile(name: str, blender: str, legacy_zip: Path, tmp_path_factory) -> tuple[Path, dict]:
    """A temporary Blender profile with the legacy zip installed and enabled: its folder and the environment
    that points Blender at it (a skip when Blender 3.4 has no numpy to give the add-on)."""
    tmp = tmp_path_factory.mktemp(name)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["BLENDER_USER_SCRIPTS"] = str(tmp / "scripts")
    env["BLENDER_USER_CONFIG"] = str(tmp / "config")
    env["BLENDER_USER_DATAFILES"] = str(tmp / "datafiles")
    # Blender writes quit.blend and autosaves to the temp folder; keep them out of the shared /tmp.
    (tmp / "tmp").mkdir()
    env["TMPDIR"] = str(tmp / "tmp")
    fallback = fallback_numpy_site(tmp)
    if fallback is not None:
        env["FABRIK_FALLBACK_SITE"] = str(fallback)
        env["FABRIK_FALLBACK_PYTHON"] = "%d.%d" % sys.version_info[:2]
    setup = tmp / "setup.py"
    setup.write_text(SETUP)
    run = run_process([blender, "-b", "--factory-startup", "--python", str(setup), "--", str(legacy_zip)],
                      env, SETUP_TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the setup run (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    prepared = json.loads(lines[-1])
    if "error" in prepared and "No module named 'numpy'" in prepared["error"]:
        pytest.skip(f"Blender 3.4 (Python {prepared['python']}) has no numpy and cannot borrow this venv's; "
                    "install Debian's python3-numpy")
    assert "error" not in prepared, f"setup failed:\n{prepared['error']}\n{run.stderr}"
    assert prepared["install"] == prepared["enable"] == prepared["save"] == ["FINISHED"], prepared
    return tmp, env


def run_driver(
    driver: Path, tmp: Path, env: dict, gui_tools: tuple[str, str], output: Path, timeout: float,
    screen: str = SCREEN, event_simulate: bool = True,
) -> tuple[dict, str]:
    """Run a driver in the GUI with the profile of `prepare_profile`; its result (with `wall_seconds`) and the
    run's log. The driver gets the result path, `output` (a screenshot path or folder) and the checkout (`samples.rigbuild` builds its rigs)."""
    blender, xvfb_run = gui_tools
    copied = tmp / "driver.py"
    shutil.copyfile(driver, copied)
    shutil.copyfile(Path(__file__).with_name("gui_driver_kit.py"), tmp / "gui_driver_kit.py")
    for helper in ("walk_clip.py", "mocap_clips.py"):
        shutil.copyfile(Path(__file__).with_name(helper), tmp / helper)
    result_path = tmp / "result.json"
    command = ["timeout", "-k", "10", str(timeout), xvfb_run, "-a", "-s", f"-screen 0 {screen}",
               blender, "-noaudio", *(["--enable-event-simulate"] if event_simulate else []),
               "--python-exit-code", "1",
               "--python", str(copied), "--", str(result_path), str(output), str(ROOT)]
    began = time.monotonic()
    run = run_process(command, env, timeout + 30)
    log = f"exit {run.returncode}\n--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode != 124, f"`timeout` stopped the GUI run after {timeout} s:\n{log}"
    assert result_path.is_file(), f"the driver wrote no result:\n{log}"
    result = json.loads(result_path.read_text())
    result["wall_seconds"] = round(time.monotonic() - began, 1)
    return result, log


def keep_screenshots(shots: Path) -> None:
    """Copy a run's screenshots into test-artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    for shot in sorted(shots.glob("*.png")):
        shutil.copyfile(shot, ARTIFACTS / shot.name)


def run_gui_once(
    name: str, driver: Path, gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory, timeout: float,
    **options,
) -> tuple[dict, Path]:
    """A module's GUI run: the profile of `prepare_profile`, the driver run once into a screenshot folder (kept
    in test-artifacts/), a driver error failing the test; the result (with its `log`) and that folder.
    `options` go to `run_driver`."""
    tmp, env = prepare_profile(name, gui_tools[0], legacy_zip, tmp_path_factory)
    shots = tmp / "shots"
    shots.mkdir()
    result, log = run_driver(driver, tmp, env, gui_tools, shots, timeout, **options)
    keep_screenshots(shots)
    assert "error" not in result, f"driver failed at stage '{result['stage']}':\n{result['error']}\n{log}"
    result["log"] = log
    return result, shots
