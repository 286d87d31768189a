# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint limits from Blender's own pose-bone IK settings, in the real bpy module."""

from __future__ import annotations

import math
import types

import bpy
import numpy as np
import pytest
from blender_scenes import RecordingLayout, chain_rig, rigbuild, tip_world
from limit_checks import assert_within

from fabrik_addon.blender.rig import armature
from fabrik_addon.blender.rig.status import statuses
from fabrik_addon.core.model.limits import JointLimit

pytestmark = pytest.mark.usefixtures("clean_scene")


def basis_rotation(pose_bone) -> np.ndarray:
    """The bone's own rotation as Blender holds it (matrix_basis), read back after the solve."""
    return np.array(pose_bone.matrix_basis.to_3x3().normalized())


def limit_of(pose_bone) -> JointLimit:
    """What the settings on a pose bone ask for, read here independently of the add-on's reader."""
    return JointLimit(
        lock_x=pose_bone.lock_ik_x, lock_y=pose_bone.lock_ik_y, lock_z=pose_bone.lock_ik_z,
        use_limit_x=pose_bone.use_ik_limit_x, use_limit_y=pose_bone.use_ik_limit_y, use_limit_z=pose_bone.use_ik_limit_z,
        min_x=pose_bone.ik_min_x, max_x=pose_bone.ik_max_x, min_y=pose_bone.ik_min_y, max_y=pose_bone.ik_max_y,
        min_z=pose_bone.ik_min_z, max_z=pose_bone.ik_max_z,
    )


def test_a_rig_set_up_for_blender_ik_solves_within_its_limits():
    """Hinges and cones set in the pose bones' IK settings hold in the pose FABRIK writes."""
    rig, target = chain_rig(count=4, live=False)
    bones = rig.pose.bones
    for pose_bone in bones[1:]:
        pose_bone.lock_ik_y, pose_bone.lock_ik_z = True, True  # hinges about X ...
        pose_bone.use_ik_limit_x = True
        pose_bone.ik_min_x, pose_bone.ik_max_x = 0.0, math.radians(90)  # ... bending one way only
    bones[0].use_ik_limit_x = bones[0].use_ik_limit_z = True
    bones[0].ik_min_x, bones[0].ik_max_x = -math.radians(30), math.radians(30)
    bones[0].ik_min_z, bones[0].ik_max_z = -math.radians(30), math.radians(30)
    rig.fabrik.live = True
    for location in [(0.0, 1.5, 2.5), (0.0, -1.5, 2.0), (2.0, 2.0, 0.5), (0.0, 0.5, 1.0)]:
        target.location = location
        bpy.context.view_layer.update()
        for pose_bone in bones:
            assert_within(limit_of(pose_bone), basis_rotation(pose_bone), f"{pose_bone.name} at {location}")


def test_a_reachable_target_inside_the_limits_is_reached():
    """The hinge chain reaches a target it can reach while bending the allowed way."""
    rig, target = chain_rig(count=3, live=False)
    for pose_bone in rig.pose.bones:
        pose_bone.lock_ik_y = pose_bone.lock_ik_z = True
        pose_bone.use_ik_limit_x = True
        pose_bone.ik_min_x, pose_bone.ik_max_x = 0.0, math.radians(100)
    target.location = (0.0, -1.2, 2.2)  # positive X rotation tips a +Z bone towards -Y
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone2") - target.location).length < 1e-3
    for pose_bone in rig.pose.bones:
        assert_within(limit_of(pose_bone), basis_rotation(pose_bone), pose_bone.name)


def test_changing_a_limit_takes_effect_at_once():
    """The cached skeleton notices edited limits: a newly locked bone stops turning."""
    rig, target = chain_rig(count=3, live=False)
    rig.fabrik.live = True
    target.location = (1.5, 0.0, 1.5)
    bpy.context.view_layer.update()
    assert not np.allclose(basis_rotation(rig.pose.bones["bone0"]), np.eye(3), atol=1e-3)
    pose_bone = rig.pose.bones["bone0"]
    pose_bone.lock_ik_x = pose_bone.lock_ik_y = pose_bone.lock_ik_z = True
    target.location = (1.4, 0.0, 1.6)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(basis_rotation(pose_bone), np.eye(3), atol=1e-6)


def test_stiffness_set_in_blender_makes_a_bone_turn_less():
    """ik_stiffness on the first bone moves the bend into the others."""
    rig, target = chain_rig(count=4, live=False)
    rig.fabrik.live = True
    target.location = (2.0, 0.0, 2.0)
    bpy.context.view_layer.update()
    loose = math.acos(min(1.0, basis_rotation(rig.pose.bones["bone0"])[1, 1]))
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_quaternion = (1, 0, 0, 0)
    rig.pose.bones["bone0"].ik_stiffness_x = rig.pose.bones["bone0"].ik_stiffness_z = 0.9
    target.location = (2.0, 0.0, 2.0001)
    bpy.context.view_layer.update()
    stiff = math.acos(min(1.0, basis_rotation(rig.pose.bones["bone0"])[1, 1]))
    assert stiff < 0.5 * loose
    assert (tip_world(rig, "bone3") - target.location).length < 1e-3


def test_nonsense_limits_are_ignored_with_a_message():
    """A NaN limit (Python can set one) is reported in the status; that bone solves without limits."""
    rig, target = chain_rig(count=3, live=False)
    rig.pose.bones["bone1"].use_ik_limit_x = True
    rig.pose.bones["bone1"].ik_min_x = float("nan")
    rig.fabrik.live = True
    target.location = (1.0, 0.5, 2.0)
    bpy.context.view_layer.update()
    status = statuses["Rig"]
    assert not status.ok
    assert "bone 'bone1': the X limit is not a finite number; its limits are ignored" in status.message
    assert (tip_world(rig, "bone2") - target.location).length < 1e-3
    assert armature.limit_problems(rig)


def test_bone_limits_panel_shows_blenders_ik_settings():
    """The Bone properties sub-panel draws Blender's own IK settings of the active pose bone (fake layout)."""
    from fabrik_addon.blender.ui.bone_panel import BONE_PT_fabrik_limits

    rig, _ = chain_rig(count=2, live=False)
    pose_bone = rig.pose.bones["bone1"]
    log = []

    class Context:
        object = rig
        active_pose_bone = pose_bone

    panel = types.SimpleNamespace(layout=RecordingLayout(log))  # Panel instances only exist inside Blender's UI
    assert BONE_PT_fabrik_limits.poll(Context)
    BONE_PT_fabrik_limits.draw(panel, Context)
    drawn = {args[1] for name, args, _ in log if name == "prop"}
    expected = {f"{kind}_{axis}" for kind in ("lock_ik", "use_ik_limit", "ik_min", "ik_max", "ik_stiffness") for axis in "xyz"}
    assert expected <= drawn


@pytest.mark.parametrize("count, length", [(200, 0.02), (200, 0.5)])
def test_a_long_connected_chain_counts_as_connected(count, length):
    """Blender's single-precision rest matrices put connected heads a hair off their parents' tails; the
    skeleton still treats every connected bone as connected (so solves take the fast path), and a bone that
    really hangs at an offset keeps it."""
    from fabrik_addon.core import Goal
    from fabrik_addon.core.model.tree import moving_tree

    rng = np.random.default_rng(1)
    bones, head = [], np.array([0.3, 0.2, 0.1])
    for i in range(count):
        d = rng.normal(size=3)
        d[2] = abs(d[2]) + 0.5
        tail = head + length * d / np.linalg.norm(d)
        bones.append((f"b{i}", tuple(head), tuple(tail), f"b{i - 1}" if i else None, i > 0))
        head = tail
    bones.append(("apart", tuple(head + (0.0, 0.1, 0.0)), tuple(head + (0.0, 0.2, 0.0)), f"b{count - 1}", False))
    skeleton = armature.skeleton_of(rigbuild.make_armature("Long", bones))
    offsets = np.linalg.norm(skeleton.offsets, axis=1)
    assert not offsets[:count].any()
    assert offsets[count] == pytest.approx(0.1, abs=1e-3)  # single precision, up to 100 m from the origin
    assert not moving_tree(skeleton, [Goal(count - 1, (0.0, 0.0, 0.0))]).needs_frames
