# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver for Blender 3.4's real GUI: builds a live FABRIK rig, drags its target, takes a screenshot, bakes
(cancelling one bake with Esc, undoing another with Ctrl+Z), quits.

Run by tests/gui/test_blender.py as
`blender --enable-event-simulate --python driver.py -- RESULT.json SHOT.png CHECKOUT`.
Everything happens in `bpy.app.timers` callbacks so the window manager evaluates the
depsgraph and redraws between steps, as it does for a user. Not a pytest module.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

import bpy

ARGS = sys.argv[sys.argv.index("--") + 1:]
RESULT_PATH, SHOT_PATH, CHECKOUT = ARGS[0], ARGS[1], ARGS[2]
TIP = "bone3"
# Reachable spots (the chain is 2 long, rooted at the origin) on different sides of the rig.
START = (0.0, 0.7, 1.5)
TARGETS = [(0.9, 0.3, 1.2), (-0.8, -0.4, 1.3), (0.6, -0.5, 1.5)]
POLL = 0.1  # seconds between checks while waiting for the GUI to catch up
WAIT_TICKS = 40  # checks before giving up on a solve or a tab switch
WATCHDOG = 150.0  # seconds: it stops a hang, so a loaded machine has room

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gui_driver_kit.py is copied beside it
import gui_driver_kit as kit  # noqa: E402

MODULE = kit.MODULE
session = kit.Session(RESULT_PATH, WATCHDOG, POLL, WAIT_TICKS, moves=[], panel_drawn=False)
result, finish, view3d = session.result, session.finish, kit.view3d


def note_panel_draw(self: bpy.types.Panel, context: bpy.types.Context) -> None:
    """Appended to the add-on's panel: its draw only runs while the FABRIK tab is the active one."""
    result["panel_drawn"] = True


def tip_world(rig: bpy.types.Object) -> list[float]:
    """World position of the tip bone's tail in the evaluated pose."""
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    return list(evaluated.matrix_world @ evaluated.pose.bones[TIP].tail)


def addon_state() -> None:
    """Whether the add-on came up enabled in this GUI session (from the saved preferences)."""
    import addon_utils

    module = sys.modules.get(MODULE)
    result["addon_enabled"] = MODULE in bpy.context.preferences.addons
    result["addon_check"] = list(addon_utils.check(MODULE))
    result["addon_file"] = getattr(module, "__file__", None)
    result["object_property"] = "fabrik" in bpy.types.Object.bl_rna.properties
    result["panel_registered"] = hasattr(bpy.types, "VIEW3D_PT_fabrik")
    result["show_splash"] = bpy.context.preferences.view.show_splash


def build_scene() -> None:
    """The 4-bone rig along +Z, its target, one live effector; sidebar open, view framed."""
    sys.path.insert(0, CHECKOUT)
    from samples import rigbuild

    kit.clear_startup_scene()
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(4, 0.5))
    target = rigbuild.make_target("Target", START, size=0.15)
    rigbuild.add_effector(rig, TIP, target)
    rig.fabrik.live = True
    rig.show_in_front = True
    view_layer = bpy.context.view_layer
    for obj in view_layer.objects:
        obj.select_set(obj == rig)
    view_layer.objects.active = rig

    window, screen, area, region, ui_region = view3d()
    area.spaces.active.show_region_ui = True
    # 3.4 has no Region.active_panel_category (newer Blender only); the tab is switched by events later.
    result["active_panel_category_api"] = hasattr(ui_region, "active_panel_category")
    if result["active_panel_category_api"]:
        ui_region.active_panel_category = "FABRIK"
    bpy.types.VIEW3D_PT_fabrik.append(note_panel_draw)
    # Context.temp_override exists since 3.2; the old dict-as-first-argument style warns in 3.4.
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        result["view_all"] = sorted(bpy.ops.view3d.view_all(center=False))


def step_setup() -> float:
    """Check the add-on, build the scene."""
    result["stage"] = "setup"
    addon_state()
    if not result["addon_enabled"]:
        raise RuntimeError(f"{MODULE} is not enabled in the GUI session")
    build_scene()
    return 0.3


tab = {"presses": 0, "phase": "check"}


def step_fabrik_tab() -> Optional[float]:
    """Cycle the sidebar tabs with Ctrl+Tab until the FABRIK panel draws.

    Each press takes three ticks (press, then a forced redraw, then a look at the flag): in 3.4 the
    redraw that follows a simulated event can still show the previous tab, so a flag set right after
    a press may describe the tab before it.
    """
    result["stage"] = "sidebar tab"
    window, _screen, _area, _region, ui_region = view3d()
    if ui_region.width <= 1:
        return None  # the sidebar has not been laid out yet
    if tab["phase"] == "check":
        if result["panel_drawn"]:
            result["tab_presses"] = tab["presses"]
            return POLL
        if tab["presses"] >= 8:
            # Not fatal: the solving checks still run; the test reports the missing tab on its own.
            result["tab_presses"] = None
            return POLL
        kit.next_sidebar_tab(window, ui_region)
        tab["presses"] += 1
        tab["phase"] = "redraw"
    else:
        result["panel_drawn"] = False
        ui_region.tag_redraw()
        tab["phase"] = "check"
    return None


tip_before: list = []


def make_move(index: int) -> Callable[[], Optional[float]]:
    """A step that puts the target at TARGETS[index]; the GUI's own depsgraph update re-solves."""
    def move() -> float:
        result["stage"] = f"move {index}"
        tip_before[:] = tip_world(bpy.data.objects["Rig"])
        if index == 0:
            result["panel_drawn"] = False  # from here on it tells whether the tab stayed on screen
        bpy.data.objects["Target"].location = TARGETS[index]
        return POLL
    return move


def make_check(index: int) -> Callable[[], Optional[float]]:
    """A step that waits until the tip reaches the target (or the wait runs out) and records it."""
    def check() -> Optional[float]:
        result["stage"] = f"check {index}"
        tip = tip_world(bpy.data.objects["Rig"])
        goal = list(bpy.data.objects["Target"].matrix_world.translation)
        error = sum((a - b) ** 2 for a, b in zip(tip, goal)) ** 0.5
        if error > 1e-4 and session.waits < 10:
            return None
        moved = sum((a - b) ** 2 for a, b in zip(tip, tip_before)) ** 0.5
        result["moves"].append({"target": goal, "tip": tip, "error": error, "moved": moved,
                                "polls": session.waits})
        return 0.2
    return check


def step_screenshot() -> float:
    """Screenshot the whole window, then let Blender's image loader read it back."""
    result["stage"] = "screenshot"
    window, screen, area, _region, ui_region = view3d()
    result["window_size"] = [window.width, window.height]
    result["sidebar_width"] = ui_region.width
    result["panel_drawn_while_moving"] = result["panel_drawn"]
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        result["screenshot"] = sorted(bpy.ops.screen.screenshot(filepath=SHOT_PATH))
    import numpy

    image = bpy.data.images.load(SHOT_PATH)
    result["image_size"] = list(image.size)
    pixels = numpy.empty(image.size[0] * image.size[1] * image.channels, dtype=numpy.float32)
    image.pixels.foreach_get(pixels)
    rgb = numpy.round(pixels.reshape(-1, image.channels)[:, :3] * 255).astype(numpy.uint8)
    # A blank or single-colour capture has one or two colours; Blender's UI has hundreds.
    result["distinct_colours"] = int(len(numpy.unique(rgb, axis=0)))
    bpy.data.images.remove(image)
    return POLL


#: Frames of the bake that Esc stops (continuous solving, so it is still running when Esc arrives) and of
#: the bake that runs to the end; what the bake steps saw.
LONG_BAKE, SHORT_BAKE = 4000, 60
bake: dict = {"phase": "start"}


def bake_rig() -> bpy.types.Object:
    """The rig, looked up again (undo replaces the Python objects)."""
    return bpy.data.objects["Rig"]


def invoke_bake(last: int) -> list:
    """Start `fabrik.bake` as a click on its button does (INVOKE: modal, with progress), frames 1 to last."""
    window, screen, area, region, _ui = view3d()
    with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
        return sorted(bpy.ops.fabrik.bake('INVOKE_DEFAULT', frame_start=1, frame_end=last))


def step_bake_cancel() -> Optional[float]:
    """Animate the target, start a long bake, press Esc while it runs, and see that nothing changed."""
    result["stage"] = f"bake cancel ({bake['phase']})"
    rig = bake_rig()
    scene = bpy.context.scene
    if bake["phase"] == "start":
        from samples import rigbuild

        rigbuild.key_circle(bpy.data.objects["Target"], (0.0, 0.0, 1.4), 0.6, range(1, LONG_BAKE + 1), axis="XZ")
        rig.fabrik.start = 'PREVIOUS'
        scene.frame_set(7)
        bake["frame"] = scene.frame_current
        bake["began"] = time.monotonic()
        result["bake_invoke"] = invoke_bake(LONG_BAKE)
        bake["phase"] = "running"
        return None
    if bake["phase"] == "running":
        if rig.fabrik.live:
            return None  # the modal bake switches live solving off while it runs; not started yet
        window, _screen, _area, region, _ui = view3d()
        x, y = region.x + region.width // 2, region.y + region.height // 2
        window.event_simulate('ESC', 'PRESS', x=x, y=y)
        window.event_simulate('ESC', 'RELEASE', x=x, y=y)
        bake["phase"] = "escaped"
        return None
    if not rig.fabrik.live:
        return None  # Esc not handled yet
    result["bake_cancel"] = {
        "seconds": round(time.monotonic() - bake["began"], 2),
        "action": rig.animation_data is not None and rig.animation_data.action is not None,
        "frame": scene.frame_current, "frame_before": bake["frame"], "live": rig.fabrik.live,
    }
    return POLL


def step_bake_and_undo() -> Optional[float]:
    """A short bake run to the end through the modal operator, then Ctrl+Z (the GUI's own undo stack)."""
    result["stage"] = f"bake and undo ({bake['phase']})"
    window, screen, area, region, _ui = view3d()
    if bake["phase"] == "escaped":
        # What undo should come back to; the scene was built by script, which pushes no undo step itself.
        with bpy.context.temp_override(window=window, screen=screen, area=area, region=region):
            bpy.ops.ed.undo_push(message="before bake")
        result["bake_run"] = invoke_bake(SHORT_BAKE)
        bake["phase"] = "baking"
        return None
    rig = bake_rig()
    action = rig.animation_data.action if rig.animation_data else None
    if bake["phase"] == "baking":
        if action is None:
            return None  # keys are written only when the bake finishes
        result["bake_done"] = {
            "fcurves": len(action.fcurves), "keys": sorted({len(f.keyframe_points) for f in action.fcurves}),
            "live": rig.fabrik.live,
        }
        x, y = region.x + region.width // 2, region.y + region.height // 2
        window.event_simulate('Z', 'PRESS', x=x, y=y, ctrl=True)
        window.event_simulate('Z', 'RELEASE', x=x, y=y, ctrl=True)
        bake["phase"] = "undone"
        return None
    if action is not None:
        return None  # undo not done yet
    result["bake_undo"] = {"action": False, "live": rig.fabrik.live, "effectors": len(rig.fabrik.effectors)}
    return POLL


def step_finish() -> float:
    """Write the result and quit."""
    result["stage"] = "done"
    finish()
    return POLL


steps: list = [step_setup, step_fabrik_tab]
for i in range(len(TARGETS)):
    steps += [make_move(i), make_check(i)]
steps += [step_screenshot, step_bake_cancel, step_bake_and_undo, step_finish]
session.run(steps)
