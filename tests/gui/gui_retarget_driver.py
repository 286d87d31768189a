# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver for Blender 3.4's real GUI: Retarget as a user runs it, from its button: a walk of CLIP_FRAMES frames
(`mocap_clips.key_clip`: Debian's 3.4 cannot run its BVH importer) onto the stocky rig of other proportions.

Retarget is started as the button starts it (INVOKE: modal, progress in the status bar) and Esc pressed at once,
while the clip is still being read (nothing may have changed); started again, the driver notes the work's
progress on each tick and lets it finish, takes a screenshot of the clip beside the rig halfway through the walk (the
README's before/after picture) and presses Ctrl+Z once (the whole retarget must go). Steps run in
`bpy.app.timers` callbacks, so the UI evaluates and redraws between them. Not a pytest module.

Run by tests/gui/test_retarget.py as
`blender --enable-event-simulate --python gui_retarget_driver.py -- RESULT.json SHOT_DIR CHECKOUT`.
"""

from __future__ import annotations

import os
import sys
import time

import bpy

ARGS = sys.argv[sys.argv.index("--") + 1:]
RESULT_PATH, SHOT_DIR, CHECKOUT = ARGS[0], ARGS[1], ARGS[2]
CLIP_FRAMES = 360
POLL = 0.05
WAIT_TICKS = 1200
WATCHDOG = 150.0

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the kit, walk_clip and mocap_clips beside it
sys.path.insert(0, CHECKOUT)
import gui_driver_kit as kit  # noqa: E402

session = kit.Session(RESULT_PATH, WATCHDOG, POLL, WAIT_TICKS, progress=[])
result = session.result
addon, view3d = kit.addon, kit.view3d
state: dict = {}


def rig():
    """The rig, looked up again (undo replaces the Python objects)."""
    return bpy.data.objects["Stocky"]


def running():
    """The retarget under way (the add-on keeps its long work while it runs, the bake inside it too), or None."""
    works = sys.modules[kit.MODULE + ".fabrik_addon.blender.long_work"].running
    return next((work for work in works if type(work).__name__ == "Retargeting"), None)


def invoke() -> list:
    """Press Retarget as its button does (INVOKE)."""
    window, screen, area, region, _ui = view3d()
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        return sorted(bpy.ops.fabrik.retarget('INVOKE_DEFAULT'))


def press(key: str, **modifiers) -> None:
    """A key pressed and let go over the viewport."""
    window, _screen, _area, region, _ui = view3d()
    x, y = region.x + region.width // 2, region.y + region.height // 2
    window.event_simulate('MOUSEMOVE', 'NOTHING', x=x, y=y)
    window.event_simulate(key, 'PRESS', x=x, y=y, **modifiers)
    window.event_simulate(key, 'RELEASE', x=x, y=y, **modifiers)


def step_set_up():
    result["stage"] = "set up"
    kit.clear_startup_scene()
    import mocap_clips
    import walk_clip

    began = time.monotonic()
    clip = mocap_clips.key_clip(name="Clip", location=(-1.0, 0.0, 0.0), frames=CLIP_FRAMES)
    result["clip_seconds"] = round(time.monotonic() - began, 2)
    stocky = walk_clip.stocky_rig()
    stocky.location = (0.0, 0.0, 0.0)
    stocky.fabrik.live = True  # (so that undo must give it back: the bake leaves it off)
    view_layer = bpy.context.view_layer
    for obj in view_layer.objects:
        obj.select_set(obj == stocky)
    view_layer.objects.active = stocky
    stocky.fabrik.retarget_source = clip
    window, screen, area, region, _ui = view3d()
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        result["map"] = sorted(bpy.ops.fabrik.retarget_map())
        bpy.ops.ed.undo_push(message="before retarget")
    return 0.5


def step_start_and_cancel():
    """Start and press Esc at once, while the clip is still being read."""
    result["stage"] = "retarget: cancel"
    if "began" not in state:
        state["began"] = time.monotonic()
        result["first_invoke"] = invoke()
        press('ESC')
        return None
    if running() is not None:
        return None
    stocky = rig()
    result["cancelled"] = {
        "effectors": len(stocky.fabrik.effectors), "live": stocky.fabrik.live,
        "action": stocky.animation_data is not None and stocky.animation_data.action is not None,
        "collection": bpy.data.collections.get("Stocky Retarget") is not None,
        "frames": [bpy.context.scene.frame_start, bpy.context.scene.frame_end],
    }
    return 0.2


def step_run():
    """Start again, note the progress on each tick, and let it finish."""
    result["stage"] = "retarget: run"
    if "again" not in state:
        state["again"] = time.monotonic()
        result["second_invoke"] = invoke()
        return None
    work = running()
    if work is not None:
        done, total = work.progress
        result["progress"].append([round(time.monotonic() - state["again"], 2), done, total])
        return None
    stocky = rig()
    if not stocky.fabrik.effectors:
        return None  # (not started yet)
    result["finished"] = {
        "seconds": round(time.monotonic() - state["again"], 2), "effectors": len(stocky.fabrik.effectors),
        "live": stocky.fabrik.live, "frames": [bpy.context.scene.frame_start, bpy.context.scene.frame_end],
        "action": stocky.animation_data.action is not None,
    }
    return 0.2


def step_picture():
    """The clip (grey) beside the rig it was put on (selected), a step into the walk, seen from the side."""
    result["stage"] = "retarget: picture"
    scene = bpy.context.scene
    scene.frame_set(40)
    scene.fabrik_overlay.show = False  # (the picture is of the two skeletons)
    for obj in bpy.data.collections["Stocky Retarget"].objects:
        obj.hide_set(True)
    window, screen, area, region, _ui = view3d()
    space = area.spaces.active
    space.show_region_ui = False
    space.region_3d.view_perspective = 'ORTHO'
    space.region_3d.view_rotation = (0.5, 0.5, -0.5, -0.5)  # (looking along +X: the walk goes left to right)
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj.name in ("Clip", "Stocky"))
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        bpy.ops.view3d.view_selected()
    for obj in bpy.context.view_layer.objects:
        obj.select_set(obj.name == "Stocky")
    path = os.path.join(SHOT_DIR, "retarget_walk.png")
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        result["screenshot"] = sorted(bpy.ops.screen.screenshot(filepath=path))
    return 0.2


def step_undo():
    """Ctrl+Z once: the whole retarget goes."""
    result["stage"] = "retarget: undo"
    if "undone" not in state:
        state["undone"] = True
        press('Z', ctrl=True)
        return None
    stocky = rig()
    if stocky.fabrik.effectors:
        return None
    result["undone"] = {
        "effectors": len(stocky.fabrik.effectors), "live": stocky.fabrik.live,
        "action": stocky.animation_data is not None and stocky.animation_data.action is not None,
        "collection": bpy.data.collections.get("Stocky Retarget") is not None,
    }
    return 0.1


def step_finish():
    session.finish()
    return None


session.run([step_set_up, step_start_and_cancel, step_run, step_picture, step_undo, step_finish], first_interval=1.0)
