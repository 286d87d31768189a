# SPDX-License-Identifier: GPL-3.0-or-later
"""Pole targets against Blender's own IK constraint (Standard solver) in the real bpy module.

Each case builds one rig, lets Blender's IK constraint (with a pole) solve
it, then mutes the constraint and solves the same goal from the same start
pose with ours. Blender's rule (fabrik_addon/core/goals/pole.py) turns the chain
as one body before solving, so a chain bent in a plane ends in that plane
turned; our solvers must bend to the same side, in the same plane (within
1 degree). Where the in-plane shape of a chain of three bones is not fixed
by its target, FABRIK and Blender's Jacobian solver may share the plane out
differently between the joints, so only the plane is compared for those.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from blender_scenes import rigbuild
from mathutils import Euler

from fabrik_addon.blender.rig import armature
from fabrik_addon.core import Goal, SolveSettings
from fabrik_addon.core.compared import two_bone
from fabrik_addon.core.solving import plan

pytestmark = pytest.mark.usefixtures("clean_scene")

BENT_2 = [(0.0, 0.0, 0.0), (0.0, 0.15, 1.0), (0.0, 0.0, 2.0)]
BENT_3 = [(0.0, 0.0, 0.0), (0.0, 0.2, 0.7), (0.0, 0.25, 1.4), (0.0, 0.0, 2.1)]
STRAIGHT_2 = [(0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (0.0, 0.0, 2.0)]
STRAIGHT_3 = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.7), (0.0, 0.0, 1.4), (0.0, 0.0, 2.1)]
TARGET = (0.45, 0.3, 1.45)
#: Which way each bone's Z axis faces (its roll): Blender's default, and two others.
ROLLS = [None, (1.0, 1.0, 0.0), (0.0, -1.0, 0.5)]
POLES = [(0.0, -3.0, 1.0), (3.0, 0.0, 1.0), (-2.0, 2.0, 0.5)]
ANGLES = [0.0, 90.0, -90.0, 180.0, 35.0]
#: Blender's own solver stops at this distance when it converges (single precision, 1e-3 angle steps).
BLENDER_REACHED = 1e-3


def build(points, roll=None, pole_angle=0.0, pole=POLES[0], target=TARGET, posed=None, parent=False, turned=None):
    """A chain b0, b1, ... through the points (on a posed parent bone "p" if asked) with Blender's IK on its last
    bone: Standard solver, whole chain, target and pole empties. `posed` sets pose channels (Euler XYZ),
    `turned` one bone's (name, (angle, axis x, y, z)) as an axis-angle."""
    bones = [("p", (0.0, 0.0, -1.0), (0.0, 0.0, 0.0), None, True)] if parent else []
    for i in range(len(points) - 1):
        above = f"b{i - 1}" if i else ("p" if parent else None)
        bone = (f"b{i}", tuple(points[i]), tuple(points[i + 1]), above, True)
        bones.append(bone + ((roll,) if roll else ()))
    rig = rigbuild.make_armature("Rig", bones)
    rig.pose.ik_solver = 'LEGACY'
    for name, angles in (posed or {}).items():
        pose_bone = rig.pose.bones[name]
        pose_bone.rotation_mode = 'XYZ'
        pose_bone.rotation_euler = Euler(angles)
    if turned is not None:
        pose_bone = rig.pose.bones[turned[0]]
        pose_bone.rotation_mode = 'AXIS_ANGLE'
        pose_bone.rotation_axis_angle = turned[1]
    count = len(points) - 1
    constraint = rig.pose.bones[f"b{count - 1}"].constraints.new("IK")
    constraint.target = rigbuild.make_target("Target", target)
    constraint.pole_target = rigbuild.make_target("Pole", pole)
    constraint.pole_angle = pole_angle
    constraint.chain_count = count
    bpy.context.view_layer.update()
    return rig, constraint


def chain_points(rig) -> np.ndarray:
    """The chain's joints as Blender evaluated them: b0's head, then every b tail (armature space)."""
    evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
    bones = [evaluated.pose.bones[f"b{i}"] for i in range(sum(b.name.startswith("b") for b in rig.pose.bones))]
    return np.array([bones[0].head] + [b.tail for b in bones], dtype=float)


def ours(rig, constraint, solver=plan.solve) -> np.ndarray:
    """Our solve of the constraint's goal (pole included) from the pose Blender's IK starts from, as chain points."""
    constraint.mute = True
    bpy.context.view_layer.update()
    skeleton = armature.skeleton_of(rig)
    start = armature.current_pose(rig, skeleton)
    count = constraint.chain_count
    index = {name: i for i, name in enumerate(skeleton.names)}
    goal = Goal(
        index[f"b{count - 1}"],
        tuple(constraint.target.location),
        chain_length=count,
        pole=tuple(constraint.pole_target.location),
        pole_angle=constraint.pole_angle,
    )
    pose, report = solver(skeleton, [goal], start, SolveSettings(max_iterations=500, tolerance=1e-6))
    assert report.converged, report
    constraint.mute = False
    bones = [index[f"b{i}"] for i in range(count)]
    return np.vstack([pose.heads[bones[0]][None], pose.tails[bones]])


def bend_normal(points: np.ndarray) -> np.ndarray:
    """The unit normal of a chain's bend plane, signed by the side its joints are on: (tip - base) x knees."""
    line = points[-1] - points[0]
    line = line / np.linalg.norm(line)
    knees = sum((p - points[0]) - line * (line @ (p - points[0])) for p in points[1:-1])
    normal = np.cross(line, knees)
    return normal / np.linalg.norm(normal)


def degrees_between(a: np.ndarray, b: np.ndarray) -> float:
    """The angle between two unit vectors in degrees."""
    return math.degrees(math.acos(float(np.clip(a @ b, -1.0, 1.0))))


def assert_bends_like_blender(blender: np.ndarray, mine: np.ndarray, target=TARGET, reached: float = 1e-5) -> None:
    """Both chains reach the target and bend in the same plane to the same side (within 1 degree)."""
    assert np.linalg.norm(blender[-1] - target) < BLENDER_REACHED
    assert np.linalg.norm(mine[-1] - target) < reached
    assert degrees_between(bend_normal(blender), bend_normal(mine)) < 1.0


@pytest.mark.parametrize("pole", POLES)
@pytest.mark.parametrize("angle", ANGLES)
@pytest.mark.parametrize("roll", ROLLS)
@pytest.mark.parametrize("points", [BENT_2, BENT_3], ids=["two bones", "three bones"])
def test_a_chain_bent_at_rest_bends_where_blenders_does(points, roll, angle, pole):
    """Bent at rest, in one plane: same side and bend plane as Blender's IK, any roll, pole and pole angle."""
    rig, constraint = build(points, roll, math.radians(angle), pole)
    blender = chain_points(rig)
    assert_bends_like_blender(blender, ours(rig, constraint))
    if len(points) == 3:
        mine = ours(rig, constraint, two_bone.solve)
        assert_bends_like_blender(blender, mine)
        # Two bones are fixed by their plane: the elbow itself lands where Blender's does.
        assert np.linalg.norm(mine[1] - blender[1]) < 1e-3


@pytest.mark.parametrize("angle", [-90.0, 35.0])
@pytest.mark.parametrize("points", [BENT_2, BENT_3], ids=["two bones", "three bones"])
def test_blender_turns_the_chain_from_its_start_pose_not_its_rest_pose(points, angle):
    """The X and Z axes Blender reads are the first bone's in the pose the solve starts from: its own pose
    channels and a posed parent above the chain count, as they do for ours.

    (The three bones keep their default roll, so that turning b1 about its
    X axis keeps the chain in one plane; see the module's docstring.)
    """
    roll = (1.0, 1.0, 0.0) if len(points) == 3 else None
    rig, constraint = build(points, roll, math.radians(angle), (2.0, -3.0, 1.0),
                            posed={"p": (0.3, 0.5, 0.2), "b0": (0.4, 0.7, 0.2), "b1": (-0.5, 0.0, 0.0)}, parent=True)
    blender = chain_points(rig)
    assert_bends_like_blender(blender, ours(rig, constraint))


@pytest.mark.parametrize("pole", POLES[:2])
@pytest.mark.parametrize("angle", ANGLES[:4])
@pytest.mark.parametrize("roll", ROLLS[:2])
@pytest.mark.parametrize("points", [STRAIGHT_2, STRAIGHT_3], ids=["two bones", "three bones"])
def test_a_chain_straight_at_rest_bends_as_blender_bends_it_bent_a_hair(points, roll, angle, pole):
    """Straight at rest Blender's IK does not converge: its turn points the chain at the target and nothing can
    bend it from there, so it stays straight. Ours bends it towards the first bone's up vector X cos(angle) +
    Z sin(angle), which the turn puts on the pole, so the knees face the pole: the side and plane Blender's
    gives the same chain bent at its first joint by 0.01 rad that way (how a pole angle is chosen for a knee)."""
    rig, constraint = build(points, roll, math.radians(angle), pole)
    straight = chain_points(rig)
    line = (straight[-1] - straight[0]) / np.linalg.norm(straight[-1] - straight[0])
    assert np.linalg.norm(straight[-1] - TARGET) > 0.4  # Blender stopped short, straight at the target:
    assert np.linalg.norm(np.cross(line, np.asarray(TARGET) / np.linalg.norm(TARGET))) < 1e-4
    solvers = [plan.solve, two_bone.solve] if len(points) == 3 else [plan.solve]
    mine = [ours(rig, constraint, solver) for solver in solvers]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    # b1 turned about (up x Y) in its own frame, the first bone's as the chain is straight: its knee goes up.
    a = math.radians(angle)
    rig, constraint = build(points, roll, a, pole, turned=("b1", (0.01, -math.sin(a), 0.0, math.cos(a))))
    blender = chain_points(rig)
    for points_of_mine in mine:
        assert_bends_like_blender(blender, points_of_mine)


def test_blender_drops_the_pole_of_a_tree_with_two_goals_and_we_keep_it():
    """Two IK constraints whose chains share their root make one tree: Blender then ignores the pole (moving it
    changes nothing). Ours keeps every goal's pole on a tree, a feature: the pole still turns its chain."""
    def tree(pole, both=True):
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bones = [("root", (0, 0, 0), (0, 0, 1), None, True),
                 ("a0", (0, 0, 1), (0.5, 0.1, 1.8), "root", True), ("a1", (0.5, 0.1, 1.8), (1, 0, 2.6), "a0", True),
                 ("b0", (0, 0, 1), (-0.5, 0.1, 1.8), "root", True), ("b1", (-0.5, 0.1, 1.8), (-1, 0, 2.6), "b0", True)]
        rig = rigbuild.make_armature("Rig", bones)
        first = rig.pose.bones["a1"].constraints.new("IK")
        first.target, first.pole_target = rigbuild.make_target("A", (0.8, 0.5, 2.0)), rigbuild.make_target("P", pole)
        first.chain_count = 3
        if both:
            second = rig.pose.bones["b1"].constraints.new("IK")
            second.target, second.chain_count = rigbuild.make_target("B", (-0.8, 0.4, 2.1)), 3
        bpy.context.view_layer.update()
        evaluated = rig.evaluated_get(bpy.context.evaluated_depsgraph_get())
        return np.array([evaluated.pose.bones[n].tail for n in ("root", "a0", "a1", "b0", "b1")]), rig

    one, _ = tree((3, -3, 2), both=False)
    other, _ = tree((-3, 3, 2), both=False)
    assert np.abs(one - other).max() > 0.1  # one goal: the pole turns the chain
    one, _ = tree((3, -3, 2))
    other, rig = tree((-3, 3, 2))
    np.testing.assert_array_equal(one, other)  # two goals in one tree: the pole does nothing
    for constraint in (rig.pose.bones["a1"].constraints[0], rig.pose.bones["b1"].constraints[0]):
        constraint.mute = True
    bpy.context.view_layer.update()
    skeleton = armature.skeleton_of(rig)
    start = armature.current_pose(rig, skeleton)
    index = {name: i for i, name in enumerate(skeleton.names)}

    def knee(pole):
        goals = [
            Goal(index["a1"], (0.8, 0.5, 2.0), chain_length=3, pole=pole),
            Goal(index["b1"], (-0.8, 0.4, 2.1), chain_length=3),
        ]
        pose, report = plan.solve(skeleton, goals, start)
        assert report.converged, report
        return pose.tails[index["a0"]]

    assert np.linalg.norm(knee((3.0, -3.0, 2.0)) - knee((-3.0, 3.0, 2.0))) > 0.1


ARM = [(0.0, 0.0, 1.5), (0.8, 0.06, 1.5), (1.6, 0.0, 1.5)]  # 0.8 m bones, the elbow bent a little backwards


@pytest.mark.parametrize("angle", [0.0, -90.0, 60.0])
def test_a_converted_rig_bends_its_elbow_to_blenders_side(angle):
    """An arm with Blender's IK and a pole, converted by the add-on's operator and solved live: at each target
    and pole place the elbow lands where Blender's did (same bend plane within 1 degree, within 1 cm)."""
    rig, constraint = build(ARM, (0.0, 0.0, 1.0), math.radians(angle), (0.8, 1.5, 1.2), target=(1.1, -0.4, 1.0))
    target, pole = constraint.target, constraint.pole_target
    # (target, pole) places
    places = [
        ((1.1, -0.4, 1.0), (0.8, 1.5, 1.2)),
        ((0.9, 0.5, 2.1), (0.5, -1.0, 1.5)),
        ((1.2, -0.2, 0.9), (1.0, 0.2, 0.0)),
    ]
    expected = []
    for target_at, pole_at in places:
        target.location, pole.location = target_at, pole_at
        bpy.context.view_layer.update()
        expected.append(chain_points(rig))
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.convert_constraints() == {'FINISHED'}
    assert constraint.mute and rig.fabrik.live
    for (target_at, pole_at), blender in zip(places, expected):
        target.location, pole.location = target_at, pole_at
        bpy.context.view_layer.update()
        mine = chain_points(rig)
        assert_bends_like_blender(blender, mine, target_at, reached=1e-3)  # the live solve's tolerance
        assert np.linalg.norm(mine[1] - blender[1]) < 0.01


@pytest.mark.parametrize("roll", ROLLS)
@pytest.mark.parametrize("pole", POLES)
def test_the_samples_rest_pole_angle_leaves_the_rest_pose_as_it_is(roll, pole):
    """samples/rigbuild.rest_pole_angle (the humanoid's knees and elbows use it): with the target on the rest tip,
    Blender's IK and ours leave the chain as it is at rest."""
    rig, constraint = build(BENT_2, roll, 0.0, pole, target=BENT_2[-1])
    constraint.pole_angle = rigbuild.rest_pole_angle(rig, "b0", "b1", pole)
    bpy.context.view_layer.update()
    np.testing.assert_allclose(chain_points(rig), BENT_2, atol=1e-4)
    np.testing.assert_allclose(ours(rig, constraint), BENT_2, atol=1e-5)
