# SPDX-License-Identifier: GPL-3.0-or-later
"""One-click setup and the bake dialog in the real GUI of Debian's Blender 3.4 under Xvfb, driven by simulated
key presses and mouse clicks (tests/gui/gui_setup_driver.py says what it does).

The captures are kept in test-artifacts/: setup_search.png (F3 with the operator found), setup_blender34.png (the
rig right after the one-click setup), bake_before_dialog.png and bake_dialog_blender34.png (the dialog open),
bake_redo_panel.png (the redo panel after it re-ran the bake).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gui_session import ARTIFACTS, png_info, run_gui_once

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "gui_setup_driver.py"
#: Taller than the other GUI tests' screen, so the whole FABRIK sidebar (down to Bake Keyframes) fits.
SCREEN = "1280x1100x24"
GUI_TIMEOUT = 240  # seconds for `timeout` around xvfb-run; the driver's own watchdog stops a hang at 150 s
RANGE = [5, 36]  # the scene's frame range the driver sets (gui_setup_driver.RANGE)
BONES = ["bone0", "bone1", "bone2", "bone3"]
SHOTS = ["setup_search.png", "setup_blender34.png", "bake_before_dialog.png", "bake_dialog_blender34.png"]


@pytest.fixture(scope="module")
def setup_run(gui_tools: tuple[str, str], legacy_zip: Path, tmp_path_factory) -> dict:
    """Install the legacy zip in a temporary profile (background), then run the driver in the GUI once."""
    result, _shots = run_gui_once(
        "gui34_setup", DRIVER, gui_tools, legacy_zip, tmp_path_factory, GUI_TIMEOUT, screen=SCREEN
    )
    return result


def test_the_session_is_blender_34s_gui_with_default_selection_settings(setup_run: dict) -> None:
    r = setup_run
    assert r["background"] is False and r["blender"].startswith("3.4"), (r["background"], r["blender"])
    assert r["addon_enabled"]
    assert r["defaults"] == {"lock_object_modes": True, "mode": "POSE", "frame_range": RANGE}, r["defaults"]


def test_one_click_setup_from_the_f3_menu_search(setup_run: dict) -> None:
    """F3, "fabrik effector", Return (the Pose > Inverse Kinematics entry): an effector named after the active
    bone on it, one new empty exactly at its tip, the bent pose untouched, live solving reaching, and the rig
    still the active object in Pose Mode with its bone active."""
    s = setup_run["setup"]
    assert s["last_operator"] == "FABRIK_OT_effector_add_with_target", s
    assert s["effectors"] == [["bone3", "bone3", "IK-bone3", 0]], s["effectors"]
    assert s["new_objects"] == ["IK-bone3"] and s["target_type"] == 'EMPTY', s
    assert s["target_to_tip"] < 1e-5, f"the new target is {s['target_to_tip']:.3g} from the tip"
    assert s["pose_change"] < 1e-5 and s["tip_change"] < 1e-5, f"the chain moved: {s}"
    status = s["status"]
    assert status["ok"] and not status["missed"] and status["effector0"] == "REACHED", status
    assert (s["mode"], s["active_object"], s["active_bone"], s["live"]) == ("POSE", "Rig", "bone3", True), s
    for name in ("setup_search.png", "setup_blender34.png"):
        width, height, _ = png_info(ARTIFACTS / name)
        assert (width, height) == (1280, 1100), (name, width, height)


def test_a_pole_from_the_sidebar_button_moves_nothing(setup_run: dict) -> None:
    """A click on the pole "+" (fabrik.pole_add): a new pole empty, and the re-solve leaves every bone where it was."""
    p = setup_run["pole"]
    assert p["last_operator"] == "FABRIK_OT_pole_add" and p["pole"] == "Pole-bone3", p
    assert p["resolved"], "live solving did not run after the pole was added"
    assert p["pose_change"] < 1e-4, f"adding the pole moved the chain by {p['pose_change']:.3g}"
    assert p["status"]["effector0"] == "REACHED" and p["mode"] == "POSE", p


def test_dragging_the_new_target_as_the_quick_start_says_moves_the_chain(setup_run: dict) -> None:
    """Ctrl+Tab to Object Mode, a click on the empty, G and a mouse move: real events, as the README says."""
    m = setup_run["move"]
    assert m["target_moved"] > 0.05, f"the drag moved the empty only {m['target_moved']:.3g}"
    assert m["tip_moved"] > 0.05, f"the tip moved only {m['tip_moved']:.3g}"
    assert m["error"] < 1e-3, f"the tip stopped {m['error']:.3g} from the moved target"
    assert m["status"]["effector0"] == "REACHED" and m["mode"] == "OBJECT", m
    # The FABRIK tab stays on the rig while its target is the active object.
    assert m["active"] == "IK-bone3" and m["panel_rig"] == "Rig", m


def test_esc_during_the_modal_bake_leaves_no_keys(setup_run: dict) -> None:
    """Button, dialog (nothing baked while it is open), Return starts the modal bake, Esc stops it: no keys, the
    frame and live solving as before."""
    c = setup_run["bake_cancel"]
    assert c["dialog_waited"], "the button baked at once instead of opening the dialog"
    assert c["keys"] == {}, f"the cancelled bake left keys: {sorted(c['keys'])}"
    assert c["frame"] == c["frame_before"] and c["live"], c


def test_the_bake_dialog_opens_on_the_button_and_bakes_the_scenes_range(setup_run: dict) -> None:
    """The click opens a dialog (the capture changes round the button, hardly anywhere else, and nothing is baked
    yet); Return bakes the chain's rotations at every frame of the scene's range and no other."""
    d = setup_run["bake_dialog"]
    assert not d["keys_while_open"] and d["live_while_open"], d
    assert d["changed_round_button"] > 0.3, f"only {d['changed_round_button']:.0%} changed round the button: {d}"
    assert (ARTIFACTS / "bake_dialog_blender34.png").is_file()
    b = setup_run["bake_done"]
    assert b["last_operator"] == "FABRIK_OT_bake" and b["mode"] == "POSE" and not b["live"], b
    expected = {f'pose.bones["{bone}"].rotation_quaternion[{i}]' for bone in BONES for i in range(4)}
    assert set(b["keys"]) == expected, sorted(b["keys"])
    for path, frames in b["keys"].items():
        assert frames == list(range(RANGE[0], RANGE[1] + 1)), (path, frames)
    # What the redo panel would re-run: the scene's range, baked at once (not modal).
    assert b["redo_properties"] == {"frame_start": RANGE[0], "frame_end": RANGE[1], "use_modal": False}


def test_the_redo_panel_re_runs_the_bake_at_once(setup_run: dict) -> None:
    """A click opens the redo panel; Ctrl+Wheel down over its Start Frame re-runs the bake with the start a frame
    earlier: the keys now cover that range, baked by execute (not modal, so nothing for Esc to stop)."""
    r = setup_run["redo"]
    collapsed, expanded = r["heights"]
    assert expanded > collapsed + 40, r["heights"]
    assert r["before"] == [RANGE[0], RANGE[1], 1] and r["after"] == [RANGE[0] - 1, RANGE[1], 1], r
    assert r["keyed"] == [RANGE[0] - 1, RANGE[1], RANGE[1] - RANGE[0] + 2], r["keyed"]
    assert r["last_operator"] == "FABRIK_OT_bake" and not r["use_modal"] and not r["live"], r


def test_the_sidebar_button_adds_an_effector_with_a_new_target_from_a_real_click(setup_run: dict) -> None:
    # The sidebar's button beside the effector list, found by hovering and clicked with simulated mouse events,
    # with bone1 the active bone: an effector named after it, a new empty at its tip, nothing moved.
    r = setup_run["button_setup"]
    assert r["last_operator"] == "FABRIK_OT_effector_add_with_target", r
    assert r["effector"] == ["bone1", "bone1", "IK-bone1"], r
    assert r["new_objects"] == ["IK-bone1"], r
    assert r["target_to_tip"] < 1e-5 and r["pose_change"] < 1e-5, r
    assert r["mode"] == "POSE"


def test_the_quick_starts_keys_go_from_edit_mode_to_pose_mode(setup_run: dict) -> None:
    """Step 1 as the README says it, real key presses in Blender 3.4: Tab leaves Edit Mode for Object Mode, and
    Ctrl+Tab there goes to Pose Mode (Ctrl+Tab in Edit Mode would open the mode pie menu instead)."""
    assert setup_run["quick_start_modes"] == ["OBJECT", "POSE"], setup_run.get("quick_start_modes")
