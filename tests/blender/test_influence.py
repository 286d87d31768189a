# SPDX-License-Identifier: GPL-3.0-or-later
"""Influence, as a constraint's: the rig and each effector blend the solve with the animator's pose, live and in
the bake, keyable."""

from __future__ import annotations

import bpy
import numpy as np
import pytest
from blender_scenes import chain_rig, rigbuild, target_world, tip_world
from mathutils import Quaternion

from fabrik_addon.blender.bake import baking
from fabrik_addon.blender.rig import animdata
from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("clean_scene")


def rotations(rig) -> dict[str, Quaternion]:
    """Every bone's rotation as a quaternion, whatever its mode."""
    out = {}
    for pose_bone in rig.pose.bones:
        mode = pose_bone.rotation_mode
        if mode == 'QUATERNION':
            out[pose_bone.name] = pose_bone.rotation_quaternion.copy().normalized()
        elif mode == 'AXIS_ANGLE':
            angle, *axis = pose_bone.rotation_axis_angle
            out[pose_bone.name] = Quaternion(axis, angle)
        else:
            out[pose_bone.name] = pose_bone.rotation_euler.to_quaternion()
    return out


def turn_between(a: Quaternion, b: Quaternion) -> float:
    """The angle of the turn from a to b (q and -q are the same turn; atan2 stays exact for tiny turns)."""
    d = a.normalized().rotation_difference(b.normalized())
    return 2.0 * float(np.arctan2(np.linalg.norm((d.x, d.y, d.z)), abs(d.w)))


def full_and_half(rig, setter) -> tuple[dict, dict, dict]:
    """The animator's pose, the full solve, and the solve at half influence (set by `setter`)."""
    animator = rotations(rig)
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    full = rotations(rig)
    setter(0.5)
    bpy.context.view_layer.update()
    return animator, full, rotations(rig)


@pytest.mark.parametrize("mode", ['QUATERNION', 'XYZ'])
@pytest.mark.parametrize("whose", ["rig", "effector"])
def test_half_influence_poses_each_bone_half_way_between_the_animator_and_the_solve(mode, whose):
    """Each chain bone turns half the way (slerp) from the animator's rotation to the solved one."""
    rig, target = chain_rig(live=False)
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_mode = mode
    rig.pose.bones["bone1"].rotation_euler = (0.3, 0.0, 0.1)
    rig.pose.bones["bone1"].rotation_quaternion = (0.98, 0.15, 0.0, 0.05)
    owner = rig.fabrik if whose == "rig" else rig.fabrik.effectors[0]
    animator, full, half = full_and_half(rig, lambda value: setattr(owner, "influence", value))
    for name in full:
        expected = animator[name].slerp(full[name], 0.5)
        assert turn_between(half[name], expected) < 1e-4, name
    assert (tip_world(rig, "bone3") - target_world(target)).length > 1e-2, "half way is not on the target"
    assert "influence 50%" in statuses["Rig"].message
    owner.influence = 0.0
    bpy.context.view_layer.update()
    for name, value in rotations(rig).items():
        assert turn_between(value, animator[name]) < 1e-5, name


def test_influence_applies_to_its_effectors_chain_only():
    """Two chains on one root, one at influence 0: that chain stays in the animator's pose, the other solves."""
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(3, 1.0) + rigbuild.chain_bones(
        3, 1.0, prefix="arm", start=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0)))
    one, two = rigbuild.make_target("T", (1.0, 0.5, 2.0)), rigbuild.make_target("U", (2.0, 0.5, 1.0))
    rigbuild.add_effector(rig, "bone2", one)
    rigbuild.add_effector(rig, "arm2", two)
    rig.fabrik.effectors[1].influence = 0.0
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone2") - target_world(one)).length < 1e-3
    for name in ("arm0", "arm1", "arm2"):
        assert tuple(rig.pose.bones[name].rotation_quaternion) == pytest.approx((1.0, 0.0, 0.0, 0.0), abs=1e-6)


@pytest.mark.parametrize("continuous", [False, True], ids=["per-frame", "continuous"])
def test_a_keyed_influence_is_baked_as_the_live_pose(continuous):
    """Influence keyed from 1 to 0 over the range: every baked frame equals what live solving showed there."""
    rig, target = chain_rig(live=False)
    rigbuild.key_circle(target, (0.0, 0.0, 2.5), 1.0, range(1, 11), axis="XZ")
    rig.fabrik.influence = 1.0
    rig.fabrik.keyframe_insert("influence", frame=1)
    rig.fabrik.influence = 0.0
    rig.fabrik.keyframe_insert("influence", frame=10)
    rig.fabrik.start = "PREVIOUS" if continuous else "FK"
    rig.fabrik.live = True
    scene = bpy.context.scene
    live = {}
    for frame in range(1, 11):
        scene.frame_set(frame)
        live[frame] = rotations(rig)
    result = baking.bake_object(rig, range(1, 11), warm_start=continuous)
    assert result.keys > 0 and not result.problems
    for frame in range(1, 11):
        scene.frame_set(frame)
        for name, value in rotations(rig).items():
            assert turn_between(value, live[frame][name]) < 1e-4, (frame, name)
    scene.frame_set(10)
    assert all(turn_between(value, Quaternion()) < 1e-5 for value in rotations(rig).values()), "influence 0: the animator's rest pose"
    assert any(fc.data_path == "fabrik.influence" for fc in animdata.fcurves(rig))


def test_influence_survives_save_and_reload(tmp_path):
    """The influences are saved with the file."""
    rig, _ = chain_rig(live=False)
    rig.fabrik.influence, rig.fabrik.effectors[0].influence = 0.25, 0.75
    path = str(tmp_path / "influence.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Rig"]
    assert rig.fabrik.influence == pytest.approx(0.25) and rig.fabrik.effectors[0].influence == pytest.approx(0.75)
    assert np.isfinite(rig.fabrik.influence)
