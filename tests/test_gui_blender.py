# SPDX-License-Identifier: GPL-3.0-or-later
"""The legacy add-on in the real GUI of Debian's Blender 3.4 under Xvfb: live solving while the UI runs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from debian_blender import fallback_numpy_site

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "gui_blender_driver.py"
ARTIFACT = ROOT / "test-artifacts" / "gui_blender34.png"
SCREEN = "1280x800x24"
GUI_TIMEOUT = 180  # seconds for `timeout` around xvfb-run; the run normally takes about 10 s
SETUP_TIMEOUT = 120
TOLERANCE = 1e-3

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


def _png_info(path: Path) -> tuple[int, int, int]:
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


def _run(command: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
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


@pytest.fixture(scope="module")
def gui_tools() -> tuple[str, str]:
    """Debian's blender and xvfb-run, or a skip naming what is missing."""
    blender, xvfb_run = shutil.which("blender"), shutil.which("xvfb-run")
    missing = [name for name, path in (("blender", blender), ("xvfb-run", xvfb_run)) if path is None]
    if shutil.which("xauth") is None:
        missing.append("xauth")  # xvfb-run needs it
    if missing:
        pytest.skip(f"GUI test needs {', '.join(missing)} on PATH (apt-get install -y blender xvfb xauth)")
    return blender, xvfb_run


@pytest.fixture(scope="module")
def gui_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:
    """Prepare a temporary profile in background mode, then run the driver in the GUI once."""
    blender, xvfb_run = gui_tools
    tmp = tmp_path_factory.mktemp("gui34")
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
    run = _run([blender, "-b", "--factory-startup", "--python", str(setup), "--", str(legacy_zip)],
               env, SETUP_TIMEOUT)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON from the setup run (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    prepared = json.loads(lines[-1])
    if "error" in prepared and "No module named 'numpy'" in prepared["error"]:
        pytest.skip(f"Blender 3.4 (Python {prepared['python']}) has no numpy and cannot borrow this venv's; "
                    "install Debian's python3-numpy")
    assert "error" not in prepared, f"setup failed:\n{prepared['error']}\n{run.stderr}"
    assert prepared["install"] == prepared["enable"] == prepared["save"] == ["FINISHED"], prepared

    driver = tmp / "driver.py"
    shutil.copyfile(DRIVER, driver)
    result_path, shot = tmp / "result.json", tmp / "screenshot.png"
    command = ["timeout", "-k", "10", str(GUI_TIMEOUT), xvfb_run, "-a", "-s", f"-screen 0 {SCREEN}",
               blender, "-noaudio", "--enable-event-simulate", "--python-exit-code", "1",
               "--python", str(driver), "--", str(result_path), str(shot), str(ROOT / "samples")]
    run = _run(command, env, GUI_TIMEOUT + 30)
    log = f"exit {run.returncode}\n--- stdout\n{run.stdout[-6000:]}\n--- stderr\n{run.stderr[-6000:]}"
    assert run.returncode != 124, f"`timeout` stopped the GUI run after {GUI_TIMEOUT} s:\n{log}"
    assert result_path.is_file(), f"the driver wrote no result:\n{log}"
    result = json.loads(result_path.read_text())
    assert "error" not in result, f"driver failed at stage '{result['stage']}':\n{result['error']}\n{log}"
    if shot.is_file():
        ARTIFACT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, ARTIFACT)
    result["screenshot_path"] = str(shot)
    result["profile_scripts"] = env["BLENDER_USER_SCRIPTS"]
    result["log"] = log
    return result


def test_gui_session_has_the_addon_enabled(gui_run: dict) -> None:
    """The GUI starts (no splash, not background) with the zip's add-on enabled from the saved preferences."""
    r = gui_run
    assert r["background"] is False, "the driver ran in background mode, not in the GUI"
    assert r["blender"].startswith("3.4"), f"expected Debian's Blender 3.4, got {r['blender']}"
    assert r["show_splash"] is False, "the saved preferences did not reach the GUI session: the splash is on"
    assert r["addon_enabled"], "'fabrik_ik' is not in preferences.addons in the GUI session"
    assert r["addon_check"] == [True, True], f"addon_utils.check('fabrik_ik') gave {r['addon_check']}"
    assert r["object_property"] and r["panel_registered"], "Object.fabrik or VIEW3D_PT_fabrik is missing"
    scripts = r["profile_scripts"]
    assert r["addon_file"] and r["addon_file"].startswith(scripts), \
        f"the add-on was loaded from {r['addon_file']}, not from the temporary profile {scripts}"
    assert r.get("tab_presses") is not None, "the FABRIK panel never drew after cycling the sidebar tabs 8 times"
    assert r["panel_drawn_while_moving"], "the FABRIK panel was not redrawn while the target moved"


def test_dragging_the_target_in_the_gui_moves_the_tip(gui_run: dict) -> None:
    """Each target move, evaluated by the running UI, leaves the tip on the target; the screenshot shows it."""
    r = gui_run
    assert len(r["moves"]) == 3, f"expected 3 recorded moves, got {r['moves']}"
    for i, move in enumerate(r["moves"]):
        assert move["moved"] > 0.3, f"move {i}: the tip moved only {move['moved']:.3g}"
        assert move["error"] < TOLERANCE, f"move {i}: tip {move['tip']} is {move['error']:.3g} from {move['target']}"
    shot = Path(r["screenshot_path"])
    assert r["screenshot"] == ["FINISHED"], f"screen.screenshot returned {r['screenshot']}"
    assert shot.is_file(), "no screenshot file"
    assert shot.stat().st_size > 10_000, f"the screenshot is only {shot.stat().st_size} bytes"
    width, height, inflated = _png_info(shot)
    assert [width, height] == r["window_size"] == r["image_size"], \
        f"PNG {width}x{height}, window {r['window_size']}, loaded image {r['image_size']}"
    assert inflated > width * height * 3, f"the PNG inflates to only {inflated} bytes"
    assert r["distinct_colours"] > 50, f"the screenshot has only {r['distinct_colours']} colours"
    assert ARTIFACT.is_file(), f"the screenshot was not copied to {ARTIFACT}"


def test_the_modal_bake_cancels_with_esc_and_undoes_with_ctrl_z(gui_run: dict) -> None:
    """In the running GUI: the bake button's operator runs modal; Esc mid-bake leaves no keys, the frame and
    live solving as they were; a finished bake keys every chain channel at every frame and switches live
    solving off; Ctrl+Z takes the whole bake back in one step."""
    r = gui_run
    assert r["bake_invoke"] == ["RUNNING_MODAL"], r["bake_invoke"]
    cancel = r["bake_cancel"]
    assert not cancel["action"], "the cancelled bake left an action on the rig"
    assert cancel["frame"] == cancel["frame_before"] and cancel["live"], cancel
    assert r["bake_run"] == ["RUNNING_MODAL"], r["bake_run"]
    assert r["bake_done"] == {"fcurves": 16, "keys": [60], "live": False}, r["bake_done"]
    assert r["bake_undo"] == {"action": False, "live": True, "effectors": 1}, r["bake_undo"]
