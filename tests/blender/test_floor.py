# SPDX-License-Identifier: GPL-3.0-or-later
"""A rig's Floor in the real bpy module: a target dragged under it is reached on it, no joint goes below it,
live and baked alike, with the floor or the rig moving; a floor that is no plane is refused and changes nothing."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from blender_scenes import chain_rig, rigbuild, tip_world

from fabrik_addon.blender import solve
from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.rig import animdata, status

pytestmark = pytest.mark.usefixtures("addon_per_test")

FRAMES = range(1, 31)


def make_floor(height: float = 0.5, tilt: float = 0.0):
    """A plane object at `height`, tilted about X."""
    bpy.ops.mesh.primitive_plane_add(size=6.0, location=(0.0, 0.0, height), rotation=(tilt, 0.0, 0.0))
    return bpy.context.object


def joint_heights(rig, floor) -> np.ndarray:
    """Each moving joint's height above the floor object's XY plane (the chain's tails and its bones' heads but
    the root's)."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    world = evaluated.matrix_world
    plane = floor.evaluated_get(depsgraph).matrix_world
    normal = np.cross(np.array(plane.col[0][:3]), np.array(plane.col[1][:3]))
    normal /= np.linalg.norm(normal)
    origin = np.array(plane.translation)
    points = [world @ pb.tail for pb in evaluated.pose.bones] + [world @ pb.head for pb in evaluated.pose.bones[1:]]
    return np.array([np.dot(np.array(p) - origin, normal) for p in points])


def floored_chain(live: bool = True):
    """A five-bone chain standing at the origin, its target sweeping low across the floor at 0.5."""
    rig, target = chain_rig(5, 0.6, (1.5, 0.0, 0.2), live=False)
    floor = make_floor(0.5)
    bpy.context.view_layer.objects.active = rig
    rig.fabrik.floor = floor
    rigbuild.key_path(target, FRAMES, lambda f: (2.4 * math.cos(f * 0.1), 2.4 * math.sin(f * 0.1), 0.2 + 0.02 * f))
    rig.fabrik.live = live
    return rig, target, floor


def test_a_target_under_the_floor_is_reached_on_it_and_no_joint_goes_below():
    rig, target, floor = floored_chain()
    scene = bpy.context.scene
    reached = 0
    for frame in FRAMES:
        scene.frame_set(frame)
        heights = joint_heights(rig, floor)
        assert heights.min() >= -1e-3, (frame, heights.min())
        shown = status.statuses[rig.name]
        wanted = np.array(target.matrix_world.translation)
        wanted[2] = max(wanted[2], 0.5)  # lifted onto the floor
        if shown.effectors[0].startswith("reached"):
            assert np.linalg.norm(np.array(tip_world(rig, "bone4")) - wanted) < 1e-3, frame
            reached += 1
    assert reached == len(FRAMES)
    rig.fabrik.floor = None
    scene.frame_set(2)
    assert joint_heights(rig, floor).min() < -0.1  # (without it the tip goes down to the target)


def test_a_moving_floor_and_a_moving_rig_are_followed_live_and_the_bake_holds_what_live_showed(monkeypatch):
    """Live, and both bakes; the per-frame bake keeps every frame on its fast path (one plane a frame)."""
    whole = []
    compute = solve.compute
    monkeypatch.setattr(baking.solve, "compute", lambda *args, **kwargs: whole.append(1) or compute(*args, **kwargs))
    rig, target, floor = floored_chain()
    rigbuild.key_path(floor, FRAMES, lambda f: (0.0, 0.0, 0.3 + 0.01 * f))
    rigbuild.key_path(rig, FRAMES, lambda f: (0.0, 0.01 * f, 0.0))
    scene = bpy.context.scene
    live = []
    for frame in FRAMES:
        scene.frame_set(frame)
        assert joint_heights(rig, floor).min() >= -1e-3, frame
        live.append(np.array([tuple(rig.matrix_world @ pb.tail) for pb in rig.pose.bones]))
    for warm in (False, True):
        rig.fabrik.live = True
        whole.clear()
        result = baking.bake_object(rig, FRAMES, warm_start=warm)
        assert not rig.fabrik.live
        assert len(whole) <= (1 if warm else 0), len(whole)  # (a continuous bake reads its first frame whole)
        for frame in FRAMES:
            scene.frame_set(frame)
            heights = joint_heights(rig, floor)
            assert heights.min() >= -1e-3, (warm, frame)
            if not warm:
                baked = np.array([tuple(rig.matrix_world @ pb.tail) for pb in rig.pose.bones])
                assert np.abs(baked - live[frame - 1]).max() < 1e-3, frame
        assert result.frames == len(FRAMES)


@pytest.mark.parametrize("case", ["no scale", "on a chain bone"])
def test_a_floor_that_is_no_plane_is_refused_and_changes_nothing(case):
    rig, target, floor = floored_chain()
    scene = bpy.context.scene
    scene.frame_set(3)
    before = [tuple(pb.rotation_quaternion) for pb in rig.pose.bones]
    if case == "no scale":
        floor.scale = (0.0, 1.0, 1.0)
        message = "has no XY plane"
    else:
        floor.parent, floor.parent_type, floor.parent_bone = rig, 'BONE', "bone2"
        message = "hangs from a bone of 'Rig'"
    scene.frame_set(4)
    shown = status.statuses[rig.name]
    assert message in shown.message and "nothing to solve" in shown.message and not shown.ok
    assert [tuple(pb.rotation_quaternion) for pb in rig.pose.bones] == before
    assert rig.fabrik.live
    # The bake refuses it as live solving does, before any work (it used to say "Baked" with the tip under it).
    with pytest.raises(ValueError, match=message):
        baking.bake_object(rig, FRAMES)
    assert rig.animation_data is None or rig.animation_data.action is None or not animdata.fcurves(rig)
    assert rig.fabrik.live and scene.frame_current == 4
    if case == "no scale":
        floor.scale = (1.0, 1.0, 1.0)
    else:
        floor.parent = None
    scene.frame_set(5)
    assert status.statuses[rig.name].ok


def test_a_deleted_floor_is_let_go_and_the_floor_saves_and_reloads(tmp_path):
    rig, target, floor = floored_chain()
    path = str(tmp_path / "floor.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig, floor = bpy.data.objects["Rig"], bpy.data.objects["Plane"]
    assert rig.fabrik.floor == floor
    bpy.context.scene.frame_set(2)
    assert joint_heights(rig, floor).min() >= -1e-3
    plane = floor.matrix_world.copy()
    bpy.data.objects.remove(floor)
    assert rig.fabrik.floor is None
    bpy.context.scene.frame_set(3)
    assert status.statuses[rig.name].ok
    tip = rig.matrix_world @ rig.pose.bones["bone4"].tail
    assert tip.z < plane.translation.z - 0.1  # (the floor no longer holds the tip: it goes down to its target)


def test_undo_takes_the_floor_back():
    rig, target, floor = floored_chain(live=False)
    rig.fabrik.floor = None
    bpy.ops.ed.undo_push(message="before")
    rig.fabrik.floor = floor
    bpy.ops.ed.undo_push(message="floor")
    bpy.ops.ed.undo()
    assert bpy.data.objects["Rig"].fabrik.floor is None
