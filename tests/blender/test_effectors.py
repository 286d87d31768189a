# SPDX-License-Identifier: GPL-3.0-or-later
"""Effector features in the real bpy module: IK constraint conversion and undo, rotation goals, poles, weights, order."""

from __future__ import annotations

import math

import bpy
import pytest
from blender_scenes import chain_rig, rigbuild, target_world, tip_world
from mathutils import Euler, Vector

from fabrik_addon.blender.effectors import constraints
from fabrik_addon.blender.rig.status import statuses

pytestmark = pytest.mark.usefixtures("clean_scene")


def ik_rig():
    """A 4-bone chain with a Blender IK constraint (target, pole, chain count 3, weight) and no effectors."""
    rig, target = chain_rig(count=4, live=False)
    rig.fabrik.effectors.clear()
    pole = rigbuild.make_target("Pole", (0.0, -3.0, 2.0))
    constraint = rig.pose.bones["bone3"].constraints.new("IK")
    constraint.name = "IK"
    constraint.target, constraint.pole_target = target, pole
    constraint.chain_count, constraint.weight, constraint.pole_angle = 3, 0.7, math.radians(-90)
    other = rig.pose.bones["bone0"].constraints.new("COPY_SCALE")  # must stay untouched
    other.name = "Keep"
    target.location = (1.0, 0.5, 2.8)
    return rig, target, pole


def test_convert_turns_ik_constraints_into_effectors_and_mutes_them():
    """Target, pole, chain count, weight and pole angle carry over; the constraint is muted; live solving is on."""
    rig, target, pole = ik_rig()
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.convert_constraints() == {"FINISHED"}
    (effector,) = rig.fabrik.effectors
    assert (effector.bone, effector.target, effector.pole_target) == ("bone3", target, pole)
    assert effector.chain_length == 3 and effector.weight == pytest.approx(0.7)
    assert effector.pole_angle == pytest.approx(math.radians(-90))
    assert (effector.source_bone, effector.source_constraint) == ("bone3", "IK")
    assert rig.pose.bones["bone3"].constraints["IK"].mute
    assert not rig.pose.bones["bone0"].constraints["Keep"].mute
    assert rig.fabrik.live
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target_world(target)).length < 1e-3
    # Converting again finds nothing new to convert.
    assert bpy.ops.fabrik.convert_constraints() == {"CANCELLED"}
    assert len(rig.fabrik.effectors) == 1


def test_undo_after_converting_restores_the_constraints():
    """Converting is one undo step: undo brings the unmuted constraint back and the effector list empty.

    In background mode an operator called from Python does not push its own
    undo step (the UI does that when an operator with the UNDO flag finishes),
    so the test pushes the two steps the UI would.
    """
    from fabrik_addon.blender.ui.ops import FABRIK_OT_convert_constraints

    assert "UNDO" in FABRIK_OT_convert_constraints.bl_options
    rig, _, _ = ik_rig()
    bpy.context.view_layer.objects.active = rig
    bpy.ops.ed.undo_push(message="before converting")
    bpy.ops.fabrik.convert_constraints()
    bpy.ops.ed.undo_push(message=FABRIK_OT_convert_constraints.bl_label)
    assert len(bpy.data.objects["Rig"].fabrik.effectors) == 1
    bpy.ops.ed.undo()
    rig = bpy.data.objects["Rig"]  # undo replaced the data; look it up again
    assert len(rig.fabrik.effectors) == 0
    assert not rig.pose.bones["bone3"].constraints["IK"].mute
    assert not rig.fabrik.live


def test_restore_unmutes_the_constraints_and_removes_their_effectors():
    """The Restore operator gives the rig back to Blender's IK; hand-made effectors stay."""
    rig, target, _ = ik_rig()
    bpy.context.view_layer.objects.active = rig
    bpy.ops.fabrik.convert_constraints()
    rigbuild.add_effector(rig, "bone1", target)  # made by hand: not the constraint's
    assert bpy.ops.fabrik.restore_constraints() == {"FINISHED"}
    assert not rig.pose.bones["bone3"].constraints["IK"].mute
    assert [e.bone for e in rig.fabrik.effectors] == ["bone1"]


def updated_by_moving(target) -> set[str]:
    """The names of the objects Blender's evaluation reports updated when the target moves."""
    seen: set[str] = set()

    def note(scene, depsgraph):
        seen.update(update.id.name for update in depsgraph.updates if isinstance(update.id, bpy.types.Object))

    bpy.app.handlers.depsgraph_update_post.append(note)
    try:
        target.location.x += 0.25
        bpy.context.view_layer.update()
    finally:
        bpy.app.handlers.depsgraph_update_post.remove(note)
    return seen


def test_convert_sets_the_constraints_targets_aside_and_restore_gives_them_back():
    """A muted constraint still ties the armature to its targets in Blender's dependency graph: converted, moving
    the target no longer updates the rig (as for a rig built fresh), and Restore gives the targets back, followed
    through a rename."""
    rig, target, pole = ik_rig()
    constraint = rig.pose.bones["bone3"].constraints["IK"]
    constraint.subtarget = ""  # (an object target)
    bpy.context.view_layer.update()
    assert rig.name in updated_by_moving(target)  # tied by the constraint
    constraints.convert_ik_constraints(rig)
    assert constraint.mute and constraint.target is None and constraint.pole_target is None
    rig.fabrik.live = False
    bpy.context.view_layer.update()
    assert updated_by_moving(target) == {target.name}
    target.name, pole.name = "Hand Target", "Elbow Pole"
    restored, problems = constraints.restore_ik_constraints(rig)
    assert restored == ["'IK' on 'bone3'"] and not problems
    assert (constraint.target, constraint.pole_target, constraint.mute) == (target, pole, False)
    assert constraint.pole_angle == pytest.approx(math.radians(-90)) and constraint.chain_count == 3


def test_restore_says_which_target_it_could_not_give_back():
    """A pole deleted while converted: the constraint comes back with its target, and Restore says the pole is
    gone."""
    rig, target, pole = ik_rig()
    constraint = rig.pose.bones["bone3"].constraints["IK"]
    constraints.convert_ik_constraints(rig)
    bpy.data.objects.remove(pole)
    restored, problems = constraints.restore_ik_constraints(rig)
    assert restored == ["'IK' on 'bone3'"]
    assert problems == ["'IK' on 'bone3': its pole 'Pole' is gone; the constraint stays without it"]
    assert constraint.target == target and constraint.pole_target is None and not constraint.mute


def test_constraints_without_use_tail_or_target():
    """Without Use Tail the effector sits on the parent; a targetless IK constraint is skipped with a reason."""
    rig, target = chain_rig(count=3, live=False)
    rig.fabrik.effectors.clear()
    headed = rig.pose.bones["bone2"].constraints.new("IK")
    headed.target, headed.use_tail, headed.chain_count = target, False, 2
    rig.pose.bones["bone1"].constraints.new("IK")  # no target
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.convert_constraints() == {"FINISHED"}
    (effector,) = rig.fabrik.effectors
    assert effector.bone == "bone1" and effector.chain_length == 2
    assert not rig.pose.bones["bone1"].constraints[0].mute


def test_a_rotation_goal_turns_the_tip_bone_like_its_target():
    """With Rotation on, the tip bone's world rotation matches the target empty's."""
    rig, target = chain_rig(count=4, live=False)
    target.location = (0.5, 0.3, 1.5)
    target.rotation_euler = Euler((0.4, -0.3, 1.0))
    effector = rig.fabrik.effectors[0]
    effector.use_rotation = True
    rig.fabrik.live = True
    bpy.context.view_layer.update()
    bone_rotation = (rig.matrix_world @ rig.pose.bones["bone3"].matrix).to_quaternion()
    assert bone_rotation.rotation_difference(target.matrix_world.to_quaternion()).angle < 1e-2
    assert (tip_world(rig, "bone3") - target_world(target)).length < 1e-3


def test_a_pole_target_sets_which_way_the_chain_bends():
    """Moving the pole to the other side flips the bend of the chain to that side."""
    rig, target = chain_rig(count=3, live=False)
    target.location = (0.0, 0.0, 2.2)  # straight above the base: only the pole says which way to bend
    pole = rigbuild.make_target("Pole", (0.0, -3.0, 1.0))
    effector = rig.fabrik.effectors[0]
    effector.pole_target, effector.pole_angle = pole, math.radians(-90)
    rig.fabrik.live = True
    sides = []
    for location in [(0.0, -3.0, 1.0), (0.0, 3.0, 1.0), (3.0, 0.0, 1.0)]:
        pole.location = location
        bpy.context.view_layer.update()
        knee = rig.matrix_world @ rig.pose.bones["bone0"].tail
        sides.append(Vector((knee.x, knee.y, 0.0)).normalized())
        assert (tip_world(rig, "bone2") - target_world(target)).length < 1e-3
    # The bend follows the pole round: a half turn, then a quarter turn.
    assert sides[0].dot(sides[1]) == pytest.approx(-1.0, abs=1e-3)
    assert abs(sides[0].dot(sides[2])) < 1e-3


def test_weights_decide_between_conflicting_fingers():
    """Two fingers of the hand pulled apart: the heavier branch gets closer to its target."""
    from samples import hand

    rig = hand.build(range(1, 3))
    effectors = rig.fabrik.effectors
    for effector in effectors:
        effector.enabled = effector.bone in ("thumb2", "pinky2")
    effectors[0].weight = 4.0  # the thumb
    pinky = next(e for e in effectors if e.bone == "pinky2")
    pinky.weight = 1.0
    thumb = effectors[0]
    thumb.target.animation_data_clear()
    pinky.target.animation_data_clear()
    thumb.target.location, pinky.target.location = (-3.0, 1.5, 0.0), (3.0, 1.5, 0.0)
    bpy.context.view_layer.update()
    thumb_error = (tip_world(rig, "thumb2") - target_world(thumb.target)).length
    pinky_error = (tip_world(rig, "pinky2") - target_world(pinky.target)).length
    assert thumb_error < pinky_error
    # Both targets lie beyond all the fingers could reach from the wrist, and the report says so.
    report = statuses["Hand"].report
    assert not report.converged and report.stopped_by == "unreachable"


def test_effectors_can_be_reordered():
    """Move Up/Down swap the active effector with its neighbour and keep it active."""
    rig, target = chain_rig(count=3, live=False)
    rigbuild.add_effector(rig, "bone1", target)
    rig.fabrik.active_effector = 1
    assert bpy.ops.fabrik.effector_move(direction="UP") == {"FINISHED"}
    assert [e.bone for e in rig.fabrik.effectors] == ["bone1", "bone2"] and rig.fabrik.active_effector == 0
    assert bpy.ops.fabrik.effector_move(direction="UP") == {"CANCELLED"}


def test_starting_from_the_previous_solution_is_an_option():
    """'Previous Solution' starts where the last solve ended; 'This Frame's Pose' is deterministic per frame."""
    rig, target = chain_rig(count=4, live=False)
    rig.fabrik.start = "PREVIOUS"
    rig.fabrik.live = True
    target.location = (1.2, 0.0, 2.5)
    bpy.context.view_layer.update()
    first = tip_world(rig, "bone3")
    target.location = (1.2, 0.0, 2.5001)
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - first).length < 1e-3
    assert statuses["Rig"].report.iterations <= 2  # already next to the answer


@pytest.mark.parametrize("solver", ["FABRIK", "CCD", "JACOBIAN_TRANSPOSE", "DLS"])
def test_every_solver_can_drive_the_rig(solver):
    """The solver setting switches the method; each one brings the tip onto a reachable target."""
    rig, target = chain_rig(count=4, live=False)
    rig.fabrik.solver = solver
    rig.fabrik.iterations = 300
    rig.fabrik.live = True
    target.location = (1.0, 0.5, 2.5)
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target_world(target)).length < 1e-3, statuses["Rig"].message


def test_the_two_bone_solver_explains_a_chain_it_cannot_take():
    """On a two-bone chain it is exact; on a longer chain it says why instead of failing."""
    rig, target = chain_rig(count=4, live=False)
    rig.fabrik.solver = "TWO_BONE"
    rig.fabrik.effectors[0].chain_length = 2
    rig.fabrik.live = True
    target.location = (0.8, 0.0, 3.0)
    bpy.context.view_layer.update()
    assert (tip_world(rig, "bone3") - target_world(target)).length < 1e-5
    rig.fabrik.effectors[0].chain_length = 3
    target.location = (0.7, 0.0, 3.0)
    bpy.context.view_layer.update()
    status = statuses["Rig"]
    assert not status.ok and "needs exactly one goal on a chain of two connected bones" in status.message
    assert rig.fabrik.live
