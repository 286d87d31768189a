# SPDX-License-Identifier: GPL-3.0-or-later
"""Live solving starts the plan from the moving bones' local rotations (forward kinematics on plain floats) and
does exactly what it does from the whole pose (`core.solve`'s start) in Blender, in every rotation mode."""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from blender_scenes import rigbuild, rotation_channels

from fabrik_addon.blender.rig import memory
from fabrik_addon.blender.rig.held_bones import held_bones
from fabrik_addon.blender.rig.status import statuses
from fabrik_addon.core.model.tree import Start
from fabrik_addon.core.solving import loop, stages
from fabrik_addon.core.solving.plan import Plan

pytestmark = pytest.mark.usefixtures("clean_scene")


def play(general: bool, start: str, keyed: bool, monkeypatch, mixed: bool = False) -> tuple[list[np.ndarray], list[str], list[bool]]:
    """Live solving over some frames, then switched off: the channels and held values after each step,
    the status messages, and how many solves started from local rotations (`general`: none, every solve starts
    from the whole pose)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    memory.reset()
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(8, 0.5))
    # A second chain on the same root: a tree, pulled with another weight.
    arm = rigbuild.chain_bones(3, 0.4, prefix="arm", start=(0.0, 0.0, 2.0), axis=(1.0, 0.0, 0.0))
    rig.select_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode='EDIT')
    edit = rig.data.edit_bones
    for name, head, tail, *_ in arm:
        bone = edit.new(name)
        bone.head, bone.tail = head, tail
    edit["arm0"].parent, edit["arm0"].use_connect = edit["bone3"], False
    edit["arm1"].parent, edit["arm1"].use_connect = edit["arm0"], True
    edit["arm2"].parent, edit["arm2"].use_connect = edit["arm1"], True
    bpy.ops.object.mode_set(mode='OBJECT')
    target = rigbuild.make_target("T", (1.0, 0.5, 3.0))
    other = rigbuild.make_target("U", (1.5, -0.5, 2.0))
    rigbuild.add_effector(rig, "bone7", target, chain_length=6)
    rigbuild.add_effector(rig, "arm2", other, chain_length=3, weight=2.0)
    rig.pose.bones["bone4"].rotation_quaternion = (0.9, 0.1, 0.2, 0.0)
    rig.pose.bones["arm0"].location = (0.0, 0.1, 0.0)
    if mixed:  # Euler orders and axis-angle among the moving bones, each holding a turn of its own
        for name, mode in (("bone2", 'XYZ'), ("bone6", 'AXIS_ANGLE'), ("arm1", 'ZXY'), ("bone4", 'YZX')):
            rig.pose.bones[name].rotation_mode = mode
        rig.pose.bones["bone2"].rotation_euler = (0.2, -0.1, 0.3)
        rig.pose.bones["bone6"].rotation_axis_angle = (0.4, 0.0, 0.6, 0.8)
        rig.pose.bones["arm1"].rotation_euler = (-0.3, 0.2, 0.1)
    if keyed:
        rig.pose.bones["bone5"].rotation_quaternion = (0.95, 0.0, 0.3, 0.1)
        rig.pose.bones["bone5"].keyframe_insert("rotation_quaternion", frame=1)
        rig.pose.bones["bone5"].rotation_quaternion = (0.9, 0.3, 0.0, 0.1)
        rig.pose.bones["bone5"].keyframe_insert("rotation_quaternion", frame=30)
    frames = range(1, 31)
    rigbuild.key_path(target, frames, lambda f: (math.sin(f * 0.2), 0.5 * math.cos(f * 0.3), 2.5 + 0.3 * math.sin(f * 0.1)))
    rigbuild.key_path(other, frames, lambda f: (1.2 + 0.3 * math.cos(f * 0.2), -0.5, 2.0 + 0.5 * math.sin(f * 0.15)))
    rig.fabrik.start = start
    taken = count_bulk(general, monkeypatch)
    rig.fabrik.live = True
    seen, messages = [], []
    for frame in [1, 4, 9, 9, 20, 13, 30]:
        seen += after_frame(rig, frame)
        messages.append(statuses["Rig"].message)
    rig.fabrik.live = False
    seen.append(rotation_channels(rig))
    return seen, messages, taken


def count_bulk(general: bool, monkeypatch) -> list[bool]:
    """Per solve from now on, whether it started from the moving bones' local rotations (with `general`, every
    solve starts from the whole pose instead)."""
    answered = []
    start = Plan.start

    def counted(plan, rotations, translations, fixed, pose):
        if general:
            answered.append(False)
            return Start.of_pose(plan.skeleton, plan.tree, pose())
        begun = start(plan, rotations, translations, fixed, pose)
        answered.append(begun.rotations is not None)
        return begun

    monkeypatch.setattr(Plan, "start", counted)
    return answered


def after_frame(rig, frame: int) -> list[np.ndarray]:
    """Go to the frame: every rotation channel, and what the rig holds of the animator's pose."""
    bpy.context.scene.frame_set(frame)
    return [rotation_channels(rig), np.array([tuple(e.written) + tuple(e.fk) + (e.rotated,) for e in held_bones(rig)])]


@pytest.mark.parametrize(
    "start, keyed, mixed",
    [("FK", False, False), ("FK", True, False), ("PREVIOUS", False, False), ("FK", True, True), ("PREVIOUS", False, True)],
)
def test_the_bulk_path_writes_and_holds_what_the_general_path_does(start, keyed, mixed, monkeypatch):
    """Channels, held animator values, status and the pose given back all agree (to single precision)."""
    bulk, bulk_messages, starts = play(False, start, keyed, monkeypatch, mixed)
    general, general_messages, _ = play(True, start, keyed, monkeypatch, mixed)
    assert starts and all(starts), "the free tree did not start from local rotations"
    assert bulk_messages == general_messages
    for a, b in zip(bulk, general):
        np.testing.assert_allclose(a, b, atol=5e-6)


def play_cones(general: bool, monkeypatch) -> tuple[list[np.ndarray], list[str], list[bool]]:
    """Live solving of a 12-bone chain whose IK limits are 30-degree cones, its target swept from where the
    cones stay open to where they bind and back: the channels and held values after each frame, the status
    messages, and per solve whether the free chain's passes were the answer (converged with every joint inside
    its cone)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    memory.reset()
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(12, 0.25))
    for pose_bone in rig.pose.bones:
        rigbuild.set_limits(rig, pose_bone.name, x=(-30.0, 30.0), z=(-30.0, 30.0))
    rig.pose.bones["bone11"].rotation_mode = 'XYZ'
    rig.pose.bones["bone11"].rotation_euler = (0.0, 0.3, 0.0)  # a twist of its own, which the solve keeps
    target = rigbuild.make_target("T", (0.3, 0.0, 2.9))
    rigbuild.add_effector(rig, "bone11", target)
    frames = range(1, 31)
    # Round the base at 2.9: about 0.1 rad from the axis (the free chain's answer keeps inside the cones), then
    # from frame 11 to 18 out to 1.3 rad (the cones bind), then back.
    def angle(f: int) -> float:
        return 1.3 - 0.05 * (f - 11) if 11 <= f <= 18 else 0.1 + 0.01 * f

    rigbuild.key_path(target, frames, lambda f: (2.9 * math.sin(angle(f)), 0.2, 2.9 * math.cos(angle(f))))
    count_bulk(general, monkeypatch)
    answered, inside, limited = [], stages.local_rotations_inside, loop.run
    kept = []  # (whether each pose checked kept inside every limit, in the solve under way: the free passes' first)

    def checked(*args):
        rotations = inside(*args)
        kept.append(rotations is not None)
        return rotations

    def solved(*args, **options):
        kept.clear()
        result = limited(*args, **options)
        answered.append(bool(kept) and kept[0])
        return result

    monkeypatch.setattr(stages, "local_rotations_inside", checked)
    monkeypatch.setattr(loop, "run", solved)
    rig.fabrik.live = True
    seen, messages = [], []
    for frame in frames:
        seen += after_frame(rig, frame)
        messages.append(statuses["Rig"].message)
        assert statuses["Rig"].reached, f"frame {frame}: {messages[-1]}"
    rig.fabrik.live = False
    seen.append(rotation_channels(rig))
    return seen, messages, answered


def test_a_chain_in_open_cones_takes_the_bulk_path_where_they_stay_open(monkeypatch):
    """Where the free chain's answer keeps inside every cone it is the answer, from local rotations as from the
    whole pose; where a cone binds the limited solve goes on inside the limits. The pose given back when live
    solving stops is the animator's either way."""
    bulk, bulk_messages, answered = play_cones(False, monkeypatch)
    general, general_messages, _ = play_cones(True, monkeypatch)
    assert 0 < sum(answered) < len(answered), answered  # (both kinds of frame)
    assert bulk_messages == general_messages
    for a, b in zip(bulk, general):
        np.testing.assert_allclose(a, b, atol=5e-6)
