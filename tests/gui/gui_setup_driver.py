# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver for Blender 3.4's real GUI: the one-click setup and the bake dialog, from simulated key and mouse events.

Run by tests/gui/test_setup.py as
`blender --enable-event-simulate --python gui_setup_driver.py -- RESULT.json SHOT_DIR CHECKOUT`.

A bent 4-bone chain is in Pose Mode with its tip bone active (the startup file's selection settings, Lock Object
Modes on) and live solving on, no effectors yet. Then, with events only where an animator would use the mouse or
keyboard:

- F3, typing "fabrik effector" and Return runs the Pose > Inverse Kinematics entry "FABRIK Effector with New
  Target" (fabrik.effector_add_with_target);
- a click on the sidebar's pole "+" button adds a pole (fabrik.pole_add); the script then moves the target and
  sees the chain follow;
- a click on the sidebar's Bake Keyframes button opens the bake dialog; Return starts the modal bake, which Esc
  cancels; a second dialog is captured and confirmed with Return and its bake runs to the end;
- a click opens the redo panel (Adjust Last Operation) and Ctrl+Wheel over its first field (Start Frame) re-runs
  the bake there, at once.

Buttons are found as a user's eye would: the mouse is moved down a column of the sidebar, and at each place
Blender is asked which operator the button under the mouse would run (ui.copy_python_command_button, the
button context menu's "Copy Python Command"). Steps run in `bpy.app.timers` callbacks, so the UI handles the
events, evaluates and redraws between them. Not a pytest module.
"""

from __future__ import annotations

import math
import os
import sys
import time

import bpy

ARGS = sys.argv[sys.argv.index("--") + 1:]
RESULT_PATH, SHOT_DIR, CHECKOUT = ARGS[0], ARGS[1], ARGS[2]
MODULE = "fabrik_ik"
TIP = "bone3"
BONES = ["bone0", "bone1", "bone2", "bone3"]
#: The animator's pose the setup must keep: (bone, Euler XYZ degrees).
BENT = [("bone1", (25.0, 0.0, 10.0)), ("bone2", (30.0, 0.0, 0.0)), ("bone3", (-20.0, 15.0, 0.0))]
#: Where the script moves the new target (reachable: the chain is 2 long, rooted at the origin).
MOVED = (0.6, 0.4, 1.3)
#: The scene's frame range for the bake that runs to the end (not Blender's default 1-250), and the long one
#: that Esc stops.
RANGE = (5, 36)
LONG_RANGE = (1, 4000)
SEARCH_TEXT = "fabrik effector"
POLL = 0.1
WAIT_TICKS = 60
WATCHDOG = 150.0
SCAN_STEP = 6  # pixels between the places the button scan looks at

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gui_driver_kit.py is copied beside it
import gui_driver_kit as kit  # noqa: E402

session = kit.Session(RESULT_PATH, WATCHDOG, POLL, WAIT_TICKS)
result, finish = session.result, session.finish
addon, view3d = kit.addon, kit.view3d


def load_rgb(path: str):
    """A screenshot's RGB, rows from the bottom (as window coordinates)."""
    return kit.load_rgba(path)[:, :, :3]


def viewport_centre() -> tuple[int, int]:
    _window, _screen, _area, region, _ui = view3d()
    return region.x + region.width // 2, region.y + region.height // 2


def press(key: str, x: int, y: int, **modifiers) -> None:
    window = view3d()[0]
    window.event_simulate(key, 'PRESS', x=x, y=y, **modifiers)
    window.event_simulate(key, 'RELEASE', x=x, y=y, **modifiers)


def type_text(text: str, x: int, y: int) -> None:
    """Key presses carrying their characters, as a keyboard sends them."""
    window = view3d()[0]
    for char in text:
        key = 'SPACE' if char == ' ' else char.upper()
        window.event_simulate(key, 'PRESS', unicode=char, x=x, y=y)
        window.event_simulate(key, 'RELEASE', x=x, y=y)


def click(x: int, y: int) -> None:
    window = view3d()[0]
    window.event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
    window.event_simulate('LEFTMOUSE', 'PRESS', x=x, y=y)
    window.event_simulate('LEFTMOUSE', 'RELEASE', x=x, y=y)


def screenshot(name: str) -> str:
    window, screen, area, _region, _ui = view3d()
    path = os.path.join(SHOT_DIR, name)
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        done = sorted(bpy.ops.screen.screenshot(filepath=path))
    if done != ['FINISHED']:
        raise RuntimeError(f"screen.screenshot gave {done}")
    return path


def rig():
    """The rig, looked up again (undo replaces Python objects)."""
    return bpy.data.objects["Rig"]


def pose_matrices() -> dict:
    """Armature-space matrices of every bone as shown (evaluated)."""
    obj = rig()
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return {name: [list(row) for row in evaluated.pose.bones[name].matrix] for name in BONES}


def largest_change(before: dict, after: dict) -> float:
    return max(abs(a - b) for name in before for row_a, row_b in zip(before[name], after[name])
               for a, b in zip(row_a, row_b))


def tip_world() -> list[float]:
    obj = rig()
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return list(evaluated.matrix_world @ evaluated.pose.bones[TIP].tail)


def distance(a, b) -> float:
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


def rig_status() -> dict:
    """The rig's last solve as the panel shows it."""
    status = addon().blender.rig.status.statuses.get("Rig")
    if status is None:
        return {"solved": False}
    return {"solved": True, "ok": status.ok, "missed": status.missed, "message": status.message,
            "effector0": addon().blender.ui.overlay_shapes.effector_status(status, 0), "id": id(status)}


def last_operator() -> str | None:
    operators = bpy.context.window_manager.operators
    return operators[-1].bl_idname if len(operators) else None


def keyed_frames() -> dict:
    """Per F-curve data path and index, the frames of its keys; {} without an action."""
    obj = rig()
    action = obj.animation_data.action if obj.animation_data else None
    if action is None:
        return {}
    return {f"{f.data_path}[{f.array_index}]": sorted({round(k.co.x) for k in f.keyframe_points})
            for f in action.fcurves}


# --- The scene ----------------------------------------------------------------------------------------------------

def step_setup() -> float:
    """The bent chain in Pose Mode, its tip bone active and selected, live solving on, no effector; sidebar open."""
    result["stage"] = "setup"
    result["addon_enabled"] = MODULE in bpy.context.preferences.addons
    if not result["addon_enabled"]:
        raise RuntimeError(f"{MODULE} is not enabled in the GUI session")
    sys.path.insert(0, CHECKOUT)
    from mathutils import Euler

    from samples import rigbuild

    kit.clear_startup_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = RANGE
    scene.frame_set(RANGE[0])
    obj = rigbuild.make_armature("Rig", rigbuild.chain_bones(4, 0.5))
    obj.show_in_front = True
    view_layer = bpy.context.view_layer
    for other in view_layer.objects:
        other.select_set(other == obj)
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode='POSE')
    for name, degrees in BENT:
        obj.pose.bones[name].rotation_quaternion = Euler([math.radians(d) for d in degrees]).to_quaternion()
    for bone in obj.data.bones:
        bone.select = bone.name == TIP
    obj.data.bones.active = obj.data.bones[TIP]
    tool_settings = scene.tool_settings
    result["sidebar"] = [view3d()[4].x, view3d()[4].y, view3d()[4].width, view3d()[4].height]
    result["defaults"] = {"lock_object_modes": tool_settings.lock_object_mode, "mode": obj.mode,
                          "frame_range": [scene.frame_start, scene.frame_end]}
    window, screen, area, region, _ui = view3d()
    area.spaces.active.show_region_ui = True
    bpy.types.VIEW3D_PT_fabrik.append(note_panel_draw)
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        bpy.ops.view3d.view_all(center=False)
        bpy.ops.ed.undo_push(message="scene built by the test")
    return 0.3


panel = {"drawn": False, "presses": 0, "phase": "check"}


def note_panel_draw(self, context) -> None:
    """Appended to the add-on's panel: its draw only runs while the FABRIK tab is the active one."""
    panel["drawn"] = True


def step_fabrik_tab():
    """Ctrl+Tab over the sidebar until the FABRIK panel draws (press, then a forced redraw, then a look)."""
    result["stage"] = "sidebar tab"
    window, _screen, _area, _region, ui = view3d()
    if ui.width <= 1:
        return None
    if panel["phase"] == "check":
        if panel["drawn"]:
            result["tab_presses"] = panel["presses"]
            return 0.3
        if panel["presses"] >= 8:
            raise RuntimeError("the FABRIK tab never drew after 8 Ctrl+Tab presses")
        x, y = ui.x + ui.width // 2, ui.y + ui.height - 15
        window.event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
        press('TAB', x, y, ctrl=True)
        panel["presses"] += 1
        panel["phase"] = "redraw"
    else:
        panel["drawn"] = False
        ui.tag_redraw()
        panel["phase"] = "check"
    return None


# --- Finding a sidebar button by its operator --------------------------------------------------------------------

def make_find_button(key: str, command: str, from_right: int):
    """A step that moves the mouse down the sidebar, from_right pixels left of its right edge (the tabs are
    there), until the button under it runs
    `command` (asked through ui.copy_python_command_button, which copies the hovered button's call); the place
    goes to buttons[key]."""
    scan: dict = {}

    def find():
        result["stage"] = f"find the {key} button"
        window, screen, area, _region, ui = view3d()
        wm = bpy.context.window_manager
        if "y" in scan:
            with bpy.context.temp_override(window=window, screen=screen, area=area, region=ui):
                if bpy.ops.ui.copy_python_command_button.poll():
                    wm.clipboard = ""
                    bpy.ops.ui.copy_python_command_button()
                    scan["seen"].add(wm.clipboard)
                    if wm.clipboard.startswith(command):
                        buttons[key] = (scan["x"], scan["y"])
                        result.setdefault("buttons", {})[key] = list(buttons[key])
                        scan.clear()
                        return POLL
            scan["y"] -= SCAN_STEP
            if scan["y"] < ui.y + 5:
                raise RuntimeError(f"no '{command}' button in the sidebar; buttons seen: {sorted(scan['seen'])}")
        else:
            scan.update(x=ui.x + ui.width - from_right, y=ui.y + ui.height - 20, seen=set())
            result.setdefault("sidebar_at_scan", {})[key] = [ui.x, ui.y, ui.width, ui.height]
        window.event_simulate('MOUSEMOVE', 'NOTHING', x=scan["x"], y=scan["y"])
        session.waits = 0  # a scan takes many ticks by design
        return None

    return find


buttons: dict = {}


# --- One-click setup from the F3 menu search ---------------------------------------------------------------------

setup: dict = {}


def step_search_open() -> float:
    """The mouse over the viewport, F3 (menu search), the operator's menu label typed in."""
    result["stage"] = "menu search"
    setup["before"] = pose_matrices()
    setup["tip_before"] = tip_world()
    setup["objects_before"] = sorted(bpy.data.objects.keys())
    x, y = viewport_centre()
    view3d()[0].event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
    press('F3', x, y)
    return 0.3


def step_search_type() -> float:
    x, y = viewport_centre()
    type_text(SEARCH_TEXT, x, y)
    return 0.5


def step_search_run() -> float:
    result["stage"] = "menu search: Return"
    result["search_shot"] = screenshot("setup_search.png")
    x, y = viewport_centre()
    press('RET', x, y)
    return 0.3


def step_setup_check():
    """The effector, its new target at the tip, nothing moved, live solving reaches, still in Pose Mode."""
    result["stage"] = "one-click setup: check"
    obj = rig()
    if len(obj.fabrik.effectors) == 0:
        return None  # the menu entry has not run yet
    status = rig_status()
    if not status.get("solved") or status.get("effector0") == 'NONE':
        return None
    new_objects = sorted(set(bpy.data.objects.keys()) - set(setup["objects_before"]))
    effector = obj.fabrik.effectors[0]
    target = effector.target
    after = pose_matrices()
    result["setup"] = {
        "effectors": [[e.name, e.bone, e.target.name if e.target else None, e.chain_length]
                      for e in obj.fabrik.effectors],
        "new_objects": new_objects,
        "target_type": target.type if target else None,
        "target_to_tip": distance(target.matrix_world.translation, tip_world()) if target else None,
        "pose_change": largest_change(setup["before"], after),
        "tip_change": distance(setup["tip_before"], tip_world()),
        "status": status,
        "mode": obj.mode,
        "active_object": bpy.context.view_layer.objects.active.name,
        "active_bone": obj.data.bones.active.name if obj.data.bones.active else None,
        "last_operator": last_operator(),
        "live": obj.fabrik.live,
    }
    return 0.5


def step_setup_shot() -> float:
    result["setup_shot"] = screenshot("setup_blender34.png")
    return POLL


drag: dict = {"phase": "object mode"}


def step_move_target():
    """As the README's quick start says: Ctrl+Tab to Object Mode, click the new empty, G, move the mouse, click.
    Real events throughout; runs again (None) until the drag is done."""
    from bpy_extras.view3d_utils import location_3d_to_region_2d

    result["stage"] = f"move the target: {drag['phase']}"
    window, _screen, _area, region, _ui = view3d()
    target = rig().fabrik.effectors[0].target
    if drag["phase"] == "object mode":
        setup["tip_before_move"] = tip_world()
        setup["target_before_move"] = list(target.matrix_world.translation)
        x, y = viewport_centre()
        press('TAB', x, y, ctrl=True)
        drag["phase"] = "select"
        return None
    if drag["phase"] == "select":
        if rig().mode != 'OBJECT':
            return None
        # On the empty's sphere, to the side of the chain's tip it sits on (a click there picks the bone).
        from mathutils import Vector

        right = region.data.view_rotation @ Vector((1.0, 0.0, 0.0))
        edge = target.matrix_world.translation + right * target.empty_display_size * 0.97
        point = location_3d_to_region_2d(region, region.data, edge)
        drag["at"] = (region.x + int(round(point.x)), region.y + int(round(point.y)))
        click(*drag["at"])
        drag["phase"] = "grab"
        drag["tries"] = drag.get("tries", 0) + 1
        return None
    if drag["phase"] == "grab":
        if bpy.context.view_layer.objects.active != target:
            if drag["tries"] < 3:
                drag["phase"] = "select"  # (click again: Blender cycles through what lies under the mouse)
            return None
        x, y = drag["at"]
        press('G', x, y)
        for step in range(1, 9):  # the mouse moves in small steps, as a hand does
            window.event_simulate('MOUSEMOVE', 'NOTHING', x=x - 5 * step, y=y - 5 * step)
        window.event_simulate('LEFTMOUSE', 'PRESS', x=x - 40, y=y - 40)
        window.event_simulate('LEFTMOUSE', 'RELEASE', x=x - 40, y=y - 40)
        drag["phase"] = "done"
        return None
    return POLL


def step_move_check():
    result["stage"] = "move the target: check"
    target = rig().fabrik.effectors[0].target
    moved = distance(target.matrix_world.translation, setup["target_before_move"])
    error = distance(tip_world(), target.matrix_world.translation)
    if (moved < 0.05 or error > 1e-4) and session.waits < 20:
        return None
    result["move"] = {"error": error, "tip_moved": distance(tip_world(), setup["tip_before_move"]),
                      "target_moved": moved, "status": rig_status(), "mode": rig().mode,
                      "active": bpy.context.view_layer.objects.active.name,
                      "panel_rig": getattr(addon().blender.ui.setup_ops.rig_for_panel(bpy.context), "name", None)}
    # Back to the rig in Pose Mode for the steps after (by script, an undo step of its own: they test other things).
    view_layer = bpy.context.view_layer
    target.select_set(False)
    rig().select_set(True)
    view_layer.objects.active = rig()
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.ed.undo_push(message="Back to the rig")  # (the bake's Ctrl+Z later must not undo this too)
    return 0.3


# --- A pole from the sidebar's "+" --------------------------------------------------------------------------------

def step_pole_click() -> float:
    result["stage"] = "pole: click"
    setup["before_pole"] = pose_matrices()
    setup["status_before_pole"] = rig_status().get("id")
    click(*buttons["pole"])
    return POLL


def step_pole_check():
    result["stage"] = "pole: check"
    effector = rig().fabrik.effectors[0]
    if effector.pole_target is None:
        return None
    status = rig_status()
    if status.get("id") == setup["status_before_pole"] and session.waits < 10:
        return None  # live solving has not run since the pole came
    result["pole"] = {
        "pole": effector.pole_target.name, "pole_angle": math.degrees(effector.pole_angle),
        "pose_change": largest_change(setup["before_pole"], pose_matrices()),
        "status": status, "resolved": status.get("id") != setup["status_before_pole"],
        "mode": rig().mode, "last_operator": last_operator(),
    }
    return 0.3


# --- The bake dialog ----------------------------------------------------------------------------------------------

bake: dict = {}


def step_long_range() -> float:
    """A long range and continuous solving, so the bake Esc stops is still running when Esc arrives."""
    result["stage"] = "bake cancel: prepare"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = LONG_RANGE
    target = rig().fabrik.effectors[0].target
    for frame, place in ((1, MOVED), (RANGE[1] + 20, (-0.5, 0.6, 1.2)), (LONG_RANGE[1], (0.4, -0.6, 1.4))):
        target.location = place
        target.keyframe_insert("location", frame=frame)
    rig().fabrik.start = 'PREVIOUS'
    scene.frame_set(7)
    bake["frame"] = scene.frame_current
    return 0.3


def step_cancel_open() -> float:
    result["stage"] = "bake cancel: open the dialog"
    click(*buttons["bake"])
    return 0.5


def step_cancel_confirm() -> float:
    result["stage"] = "bake cancel: Return"
    bake["dialog_live"] = rig().fabrik.live
    bake["dialog_action"] = bool(keyed_frames())
    press('RET', *buttons["bake"])
    bake["began"] = time.monotonic()
    return POLL


def step_cancel_escape():
    result["stage"] = "bake cancel: wait for the modal bake"
    if rig().fabrik.live:
        return None  # the modal bake switches live solving off while it runs
    press('ESC', *viewport_centre())
    bake["escaped_after"] = round(time.monotonic() - bake["began"], 2)
    return POLL


def step_cancel_check():
    result["stage"] = "bake cancel: check"
    obj = rig()
    if not obj.fabrik.live:
        return None
    result["bake_cancel"] = {
        "dialog_waited": bake["dialog_live"] and not bake["dialog_action"],
        "escaped_after": bake["escaped_after"],
        "keys": keyed_frames(), "frame": bpy.context.scene.frame_current, "frame_before": bake["frame"],
        "live": obj.fabrik.live,
    }
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = RANGE
    obj.fabrik.start = 'FK'
    return 0.3


def step_bake_before() -> float:
    """The window just before the click, to compare the dialog's capture against."""
    result["stage"] = "bake: before"
    x, y = buttons["bake"]
    view3d()[0].event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
    bake["before_shot"] = screenshot("bake_before_dialog.png")
    return 0.3


def step_bake_open() -> float:
    result["stage"] = "bake: open the dialog"
    click(*buttons["bake"])
    return 0.6


def step_bake_dialog() -> float:
    """Capture the dialog and compare it with the capture before it, round the button."""
    import numpy

    result["stage"] = "bake: the dialog"
    shot = screenshot("bake_dialog_blender34.png")
    before, during = load_rgb(bake["before_shot"]), load_rgb(shot)
    x, y = buttons["bake"]
    height, width = during.shape[:2]
    box = (slice(max(0, y - 200), min(height, y + 100)), slice(max(0, x - 150), min(width, x + 150)))
    changed = numpy.abs(during[box] - before[box]).max(axis=2) > 0.03
    elsewhere = numpy.abs(during - before).max(axis=2) > 0.03
    elsewhere[box] = False
    result["bake_dialog"] = {
        "shot": shot, "changed_round_button": round(float(changed.mean()), 3),
        "changed_elsewhere": int(elsewhere.sum()),
        "keys_while_open": bool(keyed_frames()), "live_while_open": rig().fabrik.live,
    }
    press('RET', x, y)
    bake["began"] = time.monotonic()
    bake["seen_running"] = False
    return POLL


def step_bake_wait():
    result["stage"] = "bake: wait for the keys"
    obj = rig()
    if not obj.fabrik.live:
        bake["seen_running"] = True
    frames = keyed_frames()
    if not frames:
        return None
    result["bake_done"] = {
        "seconds": round(time.monotonic() - bake["began"], 2), "keys": frames, "live": obj.fabrik.live,
        "frame": bpy.context.scene.frame_current, "frame_before": bake["frame"],
        "last_operator": last_operator(), "mode": obj.mode,
    }
    operators = bpy.context.window_manager.operators
    if len(operators) and operators[-1].bl_idname == "FABRIK_OT_bake":
        props = operators[-1].properties
        result["bake_done"]["redo_properties"] = {"frame_start": props.frame_start, "frame_end": props.frame_end,
                                                  "use_modal": props.use_modal}
    return POLL


redo: dict = {}


def hud_region():
    """The viewport's redo panel (Adjust Last Operation) region, or None."""
    _window, _screen, area, _region, _ui = view3d()
    return next((r for r in area.regions if r.type == 'HUD' and r.width > 1 and r.height > 1), None)


def last_bake_range() -> list | None:
    operators = bpy.context.window_manager.operators
    if not len(operators) or operators[-1].bl_idname != "FABRIK_OT_bake":
        return None
    props = operators[-1].properties
    return [props.frame_start, props.frame_end, props.step]


def step_redo_expand():
    """Click the redo panel's header (collapsed: only its title shows) to open it."""
    result["stage"] = "redo panel: open"
    hud = hud_region()
    if hud is None:
        return None
    if "collapsed_height" not in redo:
        redo["collapsed_height"] = hud.height
        redo["range"] = last_bake_range()
        click(hud.x + 30, hud.y + hud.height - 12)
        return None
    if hud.height <= redo["collapsed_height"] + 40:
        return None
    redo["expanded_height"] = hud.height
    return 0.3


def step_redo_change():
    """Ctrl+Wheel down the first number field of the redo panel, found from the top: the panel re-runs the bake
    (execute, at once) with the changed range."""
    result["stage"] = "redo panel: change a field"
    hud = hud_region()
    if "y" in redo:
        now = last_bake_range()
        if now is not None and now != redo["range"]:
            frames = sorted({frame for keys in keyed_frames().values() for frame in keys})
            result["redo"] = {
                "before": redo["range"], "after": now, "keyed": [frames[0], frames[-1], len(frames)] if frames else [],
                "live": rig().fabrik.live, "use_modal": bpy.context.window_manager.operators[-1].properties.use_modal,
                "heights": [redo["collapsed_height"], redo["expanded_height"]], "last_operator": last_operator(),
                "frame": bpy.context.scene.frame_current, "frame_before": bake["frame"],
                "shot": screenshot("bake_redo_panel.png"),
            }
            return 0.3
        redo["y"] -= SCAN_STEP
        if redo["y"] < hud.y + 5:
            raise RuntimeError("no field in the redo panel changed the bake's range")
    else:
        redo["y"] = hud.y + hud.height - 30
    x = hud.x + int(hud.width * 0.75)
    window = view3d()[0]
    window.event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=redo["y"])
    window.event_simulate('WHEELDOWNMOUSE', 'PRESS', x=x, y=redo["y"], ctrl=True)
    session.waits = 0
    return None


# --- The sidebar's Add Effector with New Target button, clicked ------------------------------------------------

def step_button_setup_click() -> float:
    """bone1 made the active bone (the click is what is tested), then a real click on the sidebar's button."""
    result["stage"] = "setup button: click"
    obj = rig()
    obj.data.bones.active = obj.data.bones["bone1"]
    setup["objects_before_click"] = sorted(bpy.data.objects.keys())
    setup["effectors_before_click"] = len(obj.fabrik.effectors)
    setup["before_click"] = pose_matrices()
    click(*buttons["setup"])
    return POLL


def step_button_setup_check():
    result["stage"] = "setup button: check"
    obj = rig()
    if len(obj.fabrik.effectors) == setup["effectors_before_click"]:
        result["button_debug"] = {"mode": obj.mode, "active": bpy.context.view_layer.objects.active.name,
                                  "bone": obj.data.bones.active.name if obj.data.bones.active else None,
                                  "last": last_operator()}
        return None
    effector = obj.fabrik.effectors[-1]
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    tip = evaluated.matrix_world @ evaluated.pose.bones["bone1"].tail
    result["button_setup"] = {
        "effector": [effector.name, effector.bone, effector.target.name if effector.target else None],
        "new_objects": sorted(set(bpy.data.objects.keys()) - set(setup["objects_before_click"])),
        "target_to_tip": distance(effector.target.matrix_world.translation, tip) if effector.target else None,
        "pose_change": largest_change(setup["before_click"], pose_matrices()),
        "mode": obj.mode, "last_operator": last_operator(),
    }
    result["button_setup_shot"] = screenshot("setup_button_blender34.png")
    return 0.3


modes: dict = {"phase": "edit"}


def step_quick_start_modes():
    """The README's quick start, step 1, with real keys: from Edit Mode, Tab (Object Mode), then Ctrl+Tab (Pose
    Mode). Runs again (None) until both took."""
    result["stage"] = f"quick start modes: {modes['phase']}"
    x, y = viewport_centre()
    if modes["phase"] == "edit":
        bpy.context.view_layer.objects.active = rig()
        bpy.ops.object.mode_set(mode='EDIT')
        modes["phase"] = "tab"
        return None
    if modes["phase"] == "tab":
        press('TAB', x, y)
        modes["phase"] = "ctrl tab"
        return None
    if modes["phase"] == "ctrl tab":
        if rig().mode == 'EDIT' and session.waits < 20:
            return None
        modes["after_tab"] = rig().mode
        press('TAB', x, y, ctrl=True)
        modes["phase"] = "check"
        return None
    if rig().mode != 'POSE' and session.waits < 20:
        return None
    result["quick_start_modes"] = [modes["after_tab"], rig().mode]
    return 0.3


def step_finish() -> float:
    result["stage"] = "done"
    finish()
    return POLL


steps = [
    step_setup, step_fabrik_tab,
    step_search_open, step_search_type, step_search_run, step_setup_check, step_setup_shot,
    make_find_button("pole", "bpy.ops.fabrik.pole_add(", 40), step_pole_click, step_pole_check,
    step_move_target, step_move_check,
    make_find_button("bake", "bpy.ops.fabrik.bake(", 75),
    step_long_range, step_cancel_open, step_cancel_confirm, step_cancel_escape, step_cancel_check,
    step_bake_before, step_bake_open, step_bake_dialog, step_bake_wait, step_redo_expand, step_redo_change,
    make_find_button("setup", "bpy.ops.fabrik.effector_add_with_target(", 48),
    step_button_setup_click, step_button_setup_check,
    step_quick_start_modes, step_finish,
]
session.run(steps)
