# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver for Blender 3.4's real GUI: the FABRIK viewport overlay on against off, for each effector status.

Run by tests/gui/test_overlay.py as
`blender --python gui_overlay_driver.py -- RESULT.json SHOT_DIR CHECKOUT`.
A live 4-bone chain (reach 2) is shown in a fixed view; its target is put where the tip reaches it, then out
of reach, then the effector's chain length is made longer than the rig (an error). In each state the window
is captured with the overlay off and on, and the two captures are compared around the tip and the target.
Steps run in `bpy.app.timers` callbacks, so the UI evaluates and redraws between them. Not a pytest module.
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
#: (state, target location, chain length, the status it must give)
STATES = [
    ("reached", (0.9, 0.3, 1.2), 0, "REACHED"),
    ("missed", (0.0, 2.6, 1.4), 0, "MISSED"),
    ("error", (0.0, 2.6, 1.4), 9, "ERROR"),
]
POLL = 0.15
WAIT_TICKS = 60
WATCHDOG = 150.0  # seconds: it stops a hang, so a loaded machine has room
#: Pixels round the projected points that count as "around the chain and target".
MARGIN = 40
#: Largest per-channel difference (0..1) for a pixel to count as a given colour, and for "unchanged".
COLOR_MATCH = 0.1
CHANGED = 0.03

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # gui_driver_kit.py is copied beside it
import gui_driver_kit as kit  # noqa: E402

session = kit.Session(RESULT_PATH, WATCHDOG, POLL, WAIT_TICKS, states={})
result, finish = session.result, session.finish
addon, view3d = kit.addon, kit.view3d


def load_rgb(path: str):
    """A screenshot's RGB, rows from the bottom (as window coordinates)."""
    return kit.load_rgba(path)[:, :, :3]


def build_scene() -> None:
    """A live chain and its target, nothing selected (no outline colours), a fixed view of both."""
    sys.path.insert(0, CHECKOUT)
    from mathutils import Euler, Vector

    from samples import rigbuild

    kit.clear_startup_scene()
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(4, 0.5))
    target = rigbuild.make_target("Target", STATES[0][1], size=0.1)
    effector = rigbuild.add_effector(rig, TIP, target)
    # A cone, a hinge and a twist range, a pole and the reach circle, so the captures show every item.
    rigbuild.set_limits(rig, "bone1", x=(-60, 60), z=(-40, 40))
    rigbuild.set_limits(rig, "bone2", lock="Z", x=(-10, 120))
    rigbuild.set_limits(rig, "bone3", y=(-45, 45))
    effector.pole_target = rigbuild.make_target("Pole", (1.5, -1.0, 1.0), size=0.05)
    rig.fabrik.live = True
    rig.show_in_front = True
    for obj in bpy.context.view_layer.objects:
        obj.select_set(False)
    bpy.context.view_layer.objects.active = None
    settings = bpy.context.scene.fabrik_overlay
    result["defaults"] = {name: getattr(settings, name) for name in
                          ("show", "show_targets", "show_poles", "show_reach", "show_limits", "show_trace",
                           "show_readout")}
    settings.show_trace = False  # the trace of the moves between states would only clutter the comparison
    settings.show_reach = True
    _window, _screen, area, _region, _ui = view3d()
    space = area.spaces.active
    space.show_region_ui = False
    space.overlay.show_floor = False
    space.overlay.show_axis_x = space.overlay.show_axis_y = False
    space.overlay.show_cursor = False  # its red and white ring would match the error colour
    rv3d = space.region_3d
    rv3d.view_perspective = 'PERSP'
    rv3d.view_rotation = Euler((math.radians(75), 0.0, math.radians(120))).to_quaternion()
    rv3d.view_location = Vector((0.0, 1.2, 1.2))
    rv3d.view_distance = 6.0


def rig_status():
    return addon().blender.rig.status.statuses.get("Rig")


def status_name() -> str | None:
    status = rig_status()
    if status is None:
        return None
    return addon().blender.ui.overlay_shapes.effector_status(status, 0)


def project(point) -> list[float] | None:
    """Window pixel coordinates of a world point in the 3D viewport."""
    from bpy_extras.view3d_utils import location_3d_to_region_2d

    _window, _screen, area, region, _ui = view3d()
    p = location_3d_to_region_2d(region, area.spaces.active.region_3d, point)
    return None if p is None else [region.x + p.x, region.y + p.y]


def points() -> dict:
    rig = bpy.data.objects["Rig"]
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    world = evaluated.matrix_world
    tip = world @ evaluated.pose.bones[TIP].tail
    base = world @ evaluated.pose.bones["bone0"].head
    target = bpy.data.objects["Target"].matrix_world.translation
    return {"tip": project(tip), "target": project(target), "base": project(base),
            "tip_world": list(tip), "target_world": list(target)}


def screenshot(path: str) -> list:
    window, screen, area, _region, _ui = view3d()
    with bpy.context.temp_override(window=window, screen=screen, area=area):
        return sorted(bpy.ops.screen.screenshot(filepath=path))


def compare(off_path: str, on_path: str, where: dict) -> dict:
    """Differences between the captures with the overlay off and on, round the chain and the target."""
    import numpy

    off, on = load_rgb(off_path), load_rgb(on_path)
    height, width = on.shape[:2]
    _window, _screen, _area, region, _ui = view3d()
    xs = [p[0] for p in (where["tip"], where["target"], where["base"]) if p]
    ys = [p[1] for p in (where["tip"], where["target"], where["base"]) if p]
    x0 = int(max(region.x, min(xs) - MARGIN))
    x1 = int(min(region.x + region.width, max(xs) + MARGIN))
    y0 = int(max(region.y, min(ys) - MARGIN))
    y1 = int(min(region.y + region.height, max(ys) + MARGIN))
    changed = numpy.abs(on - off).max(axis=2) > CHANGED
    inside = numpy.zeros_like(changed)
    inside[y0:y1, x0:x1] = True
    colors = addon().blender.ui.overlay_shapes.STATUS_COLORS
    found = {}
    for name, color in colors.items():
        match = numpy.abs(on - numpy.array(color[:3], dtype=numpy.float32)).max(axis=2) < COLOR_MATCH
        found[name] = int((match & changed & inside).sum())
    # Near the target (the cross round it) and halfway along the tip-to-target line.
    near = {}
    for label, p in (("target", where["target"]),
                     ("midpoint", [(a + b) / 2 for a, b in zip(where["tip"], where["target"])])):
        x, y = int(round(p[0])), int(round(p[1]))
        box = (slice(max(0, y - 6), y + 7), slice(max(0, x - 6), x + 7))
        near[label] = {name: int((numpy.abs(on[box] - numpy.array(color[:3], dtype=numpy.float32)).max(axis=2)
                                  < COLOR_MATCH).sum()) for name, color in colors.items()}
    return {
        "roi": [x0, y0, x1, y1], "size": [width, height],
        "changed_inside": int((changed & inside).sum()), "changed_outside": int((changed & ~inside).sum()),
        "colors_inside": found, "near": near,
        "unchanged_off_matches": {name: int((numpy.abs(off - numpy.array(c[:3], dtype=numpy.float32)).max(axis=2)
                                             < COLOR_MATCH)[y0:y1, x0:x1].sum()) for name, c in colors.items()},
    }


def step_setup():
    result["stage"] = "setup"
    result["addon_enabled"] = MODULE in bpy.context.preferences.addons
    if not result["addon_enabled"]:
        raise RuntimeError(f"{MODULE} is not enabled")
    result["overlay_handles"] = len(addon().blender.ui.overlay._handles)
    build_scene()
    return 0.3


def make_state_steps(name, location, chain_length, expected):
    record: dict = {}

    def set_state():
        result["stage"] = f"{name}: set"
        bpy.data.objects["Target"].location = location
        bpy.data.objects["Rig"].fabrik.effectors[0].chain_length = chain_length
        record["set_at"] = time.monotonic()
        return POLL

    def wait_status():
        result["stage"] = f"{name}: wait for the status"
        if status_name() != expected:
            return None
        return 0.3

    def shot_off():
        result["stage"] = f"{name}: overlay off"
        bpy.context.scene.fabrik_overlay.show = False
        record["off"] = os.path.join(SHOT_DIR, f"overlay_{name}_off.png")
        return 0.4

    def take_off():
        record["shot_off"] = screenshot(record["off"])
        bpy.context.scene.fabrik_overlay.show = True
        record["on"] = os.path.join(SHOT_DIR, f"overlay_{name}_on.png")
        return 0.4

    def take_on():
        result["stage"] = f"{name}: overlay on"
        record["shot_on"] = screenshot(record["on"])
        where = points()
        status = rig_status()
        result["states"][name] = {
            "status": status_name(), "effector_message": status.effectors.get(0),
            "points": where, "shots": [record["off"], record["on"]],
            "screenshot_ops": [record["shot_off"], record["shot_on"]],
            **compare(record["off"], record["on"], where),
        }
        return POLL

    return [set_state, wait_status, shot_off, take_off, take_on]


def cone_pixels(path: str) -> int:
    """Pixels of the limit cones' violet in the viewport of a capture."""
    import numpy

    rgb = load_rgb(path)
    _window, _screen, _area, region, _ui = view3d()
    box = rgb[region.y:region.y + region.height, region.x:region.x + region.width]
    color = numpy.array(addon().blender.ui.overlay_shapes.CONE_COLOR[:3], dtype=numpy.float32)
    return int((numpy.abs(box - color).max(axis=2) < COLOR_MATCH).sum())


def make_limit_steps():
    """The limits drawn for the active chain (the default), then for the selected bones (none selected)."""

    def shot_active():
        result["stage"] = "limits: active chain"
        path = os.path.join(SHOT_DIR, "overlay_limits_active.png")
        screenshot(path)
        result["cone_pixels"] = {"ACTIVE": cone_pixels(path)}
        bpy.context.scene.fabrik_overlay.limits_of = 'SELECTED'  # and no bone is selected
        return 0.4

    def shot_selected():
        result["stage"] = "limits: selected bones"
        path = os.path.join(SHOT_DIR, "overlay_limits_selected.png")
        screenshot(path)
        result["cone_pixels"]["SELECTED"] = cone_pixels(path)
        result["selected_bones"] = [b.name for b in bpy.data.objects["Rig"].data.bones if b.select]
        bpy.context.scene.fabrik_overlay.limits_of = 'ACTIVE'
        return POLL

    return [shot_active, shot_selected]


def step_finish():
    result["stage"] = "done"
    result["logged_errors"] = sorted(addon().blender.ui.overlay._logged)
    finish()
    return POLL


steps = [step_setup]
for state in STATES:
    steps += make_state_steps(*state)
    if state[0] == "reached":
        steps += make_limit_steps()
steps.append(step_finish)
session.run(steps)
