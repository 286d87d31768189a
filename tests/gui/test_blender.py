# SPDX-License-Identifier: GPL-3.0-or-later
"""The legacy add-on in the real GUI of Debian's Blender 3.4 under Xvfb: live solving while the UI runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gui_session import png_info, prepare_profile, run_driver

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "gui_blender_driver.py"
ARTIFACT = ROOT / "test-artifacts" / "gui_blender34.png"
GUI_TIMEOUT = 240  # seconds for `timeout` around xvfb-run; the driver's own watchdog stops a hang at 150 s
TOLERANCE = 1e-3


@pytest.fixture(scope="module")
def gui_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:
    """Prepare a temporary profile in background mode, then run the driver in the GUI once."""
    tmp, env = prepare_profile("gui34", gui_tools[0], legacy_zip, tmp_path_factory)
    shot = tmp / "screenshot.png"
    result, log = run_driver(DRIVER, tmp, env, gui_tools, shot, GUI_TIMEOUT)
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
    width, height, inflated = png_info(shot)
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
