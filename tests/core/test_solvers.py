# SPDX-License-Identifier: GPL-3.0-or-later
"""The other IK solvers (CCD, Jacobian transpose, DLS, analytic two-bone) and the registry that offers them."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from limit_checks import assert_within, blender_limits
from skeletons import (
    assert_rigid_pose,
    assert_unmoved_outside_chains,
    hand,
    random_chain,
    random_rotations,
    skeletons,
    straight_chain,
    unit_vectors,
)

from fabrik_addon.core import Goal, Pose, SolveReport, SolveSettings, skeleton_from_points
from fabrik_addon.core.compared.two_bone import solve as two_bone
from fabrik_addon.core.goals import pole
from fabrik_addon.core.math import quat
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.solving import plan
from fabrik_addon.core.solving.solvers import DESCRIPTIONS, SOLVERS

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ITERATIVE = ["CCD", "JACOBIAN_TRANSPOSE", "DLS"]
points = st.tuples(*[st.floats(-15, 15)] * 3)
#: What the two-bone solver says to a chain it cannot solve (the UI shows it).
NEEDS = "the two-bone solver needs exactly one goal on a chain of two connected bones"


# --- every solver -----------------------------------------------------------------------------------------


def test_every_solver_takes_the_same_arguments_and_returns_a_pose_and_a_report():
    """The registry's solvers share FABRIK's signature and answer alike, positionally or by keyword."""
    skeleton = straight_chain(2)
    goals = [Goal(1, (0.5, 0.0, 1.5))]
    expected = list(inspect.signature(plan.solve).parameters)
    assert set(SOLVERS) == {"FABRIK", "CCD", "JACOBIAN_TRANSPOSE", "DLS", "TWO_BONE"}
    assert set(DESCRIPTIONS) == set(SOLVERS)
    for name, solve in SOLVERS.items():
        assert list(inspect.signature(solve).parameters)[:4] == expected, name
        label, description = DESCRIPTIONS[name]
        assert label and description and "\n" not in description
        for pose, report in (
            solve(skeleton, goals),
            solve(skeleton, goals, skeleton.rest_pose(), SolveSettings()),
            solve(skeleton, goals, start=skeleton.rest_pose(), settings=SolveSettings(max_iterations=5)),
        ):
            assert isinstance(pose, Pose) and isinstance(report, SolveReport), name
            assert pose.heads.shape == (2, 3) and pose.frames.shape == (2, 3, 3)
            assert len(report.errors) == 1
            assert report.stopped_by in {"converged", "unreachable", "stalled", "max_iterations"}
        pose, report = solve(skeleton, [])
        np.testing.assert_array_equal(pose.heads, skeleton.rest_heads)
        assert report.converged and report.iterations == 0


@pytest.mark.parametrize("name", list(SOLVERS))
def test_bad_goals_are_refused_by_every_solver(name):
    """Every solver validates goals the same way (ValueError naming the problem)."""
    with pytest.raises(ValueError, match="finite"):
        SOLVERS[name](straight_chain(2), [Goal(1, (0.0, float("nan"), 0.0))])


# --- the iterative solvers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ITERATIVE)
@PROPERTY
@given(skeleton=skeletons(max_bones=10, trees=True, offsets=True, roots=2), data=st.data())
def test_any_targets_keep_the_skeleton_rigid_and_the_roots_fixed(name, skeleton, data):
    """Lengths, offsets and roots survive any goals, chain lengths and weights; bones outside every chain stay."""
    tips = data.draw(st.lists(st.sampled_from(range(len(skeleton))), min_size=1, max_size=3, unique=True))
    goals = [Goal(t, data.draw(points), data.draw(st.floats(0, 3)), data.draw(st.integers(0, 4))) for t in tips]
    start = skeleton.rest_pose()
    pose, report = SOLVERS[name](skeleton, goals, start, SolveSettings(max_iterations=15))
    assert_rigid_pose(skeleton, start, pose)
    assert all(math.isfinite(e) for e in report.errors)
    assert_unmoved_outside_chains(skeleton, goals, start, pose)


@pytest.mark.parametrize("name", ITERATIVE)
@PROPERTY
@given(skeleton=skeletons(max_bones=8, trees=True, offsets=True), data=st.data())
def test_degenerate_input_gives_no_nan(name, skeleton, data):
    """Targets on the root and on joints, and folded start poses with coincident joints, stay finite."""
    n = len(skeleton)
    folds = {i: np.diag([1.0, -1.0, -1.0]) for i in range(1, n, 2)}
    start = skeleton.with_local_rotations(skeleton.rest_pose(), folds)
    joints_and_root = [tuple(p) for p in np.vstack([start.heads, start.tails])]
    tips = data.draw(st.lists(st.sampled_from(range(n)), min_size=1, max_size=3, unique=True))
    goals = [Goal(t, data.draw(st.sampled_from(joints_and_root))) for t in tips]
    pose, report = SOLVERS[name](skeleton, goals, start, SolveSettings(max_iterations=15))
    assert_rigid_pose(skeleton, start, pose)
    assert all(math.isfinite(e) for e in report.errors)


#: Per solver: the least share of reachable targets on chains of 2 to 6 bones reached within `REACH_ITERATIONS`
#: (measured over 500 such targets: CCD 99.8 %, transpose 98.6 %, DLS 100 %; at 50 iterations 95 %, 74 %, 99.8 %).
REACH_RATE = {"CCD": 0.95, "JACOBIAN_TRANSPOSE": 0.93, "DLS": 0.98}
REACH_ITERATIONS = 300


@pytest.mark.parametrize("name", ITERATIVE)
def test_reachable_targets_are_reached_in_most_cases(name):
    """Targets made by FK from random poses of random chains (2..6 bones), relative tolerance 1e-4."""
    rng = np.random.default_rng(11)
    reached, trials, iterations = 0, 60, []
    for _ in range(trials):
        n = int(rng.integers(2, 7))
        skeleton = random_chain(rng, n)
        target = tuple(skeleton.pose_from_local(random_rotations(rng, n)).tails[n - 1])
        tolerance = 1e-4 * skeleton.lengths.sum()
        run = SolveSettings(max_iterations=REACH_ITERATIONS, tolerance=tolerance)
        pose, report = SOLVERS[name](skeleton, [Goal(n - 1, target)], settings=run)
        reached += report.converged
        iterations.append(report.iterations)
        if report.converged:
            assert np.linalg.norm(pose.tails[n - 1] - target) <= tolerance
    rate = reached / trials
    print(f"{name}: reached {reached}/{trials} = {rate:.0%}, median {np.median(iterations):.0f} iterations")
    assert rate >= REACH_RATE[name]


@pytest.mark.parametrize("name", ITERATIVE)
@PROPERTY
@given(
    skeleton=skeletons(max_bones=8, trees=True, offsets=True),
    bone_limits=st.lists(st.one_of(st.none(), blender_limits(with_stiffness=True)), min_size=8, max_size=8),
    data=st.data(),
)
def test_every_solved_pose_satisfies_every_limit(name, skeleton, bone_limits, data):
    """Random rigs, limits (with stiffness) and targets: each bone's local rotation is inside its limit."""
    n = len(skeleton)
    skeleton = skeleton.with_limits(bone_limits[:n])
    tips = data.draw(st.lists(st.sampled_from(range(n)), min_size=1, max_size=3, unique=True))
    goals = [Goal(t, data.draw(st.tuples(*[st.floats(-8, 8)] * 3)), 1.0, data.draw(st.integers(0, 3))) for t in tips]
    pose, report = SOLVERS[name](skeleton, goals, settings=SolveSettings(max_iterations=15))
    assert all(math.isfinite(e) for e in report.errors)
    np.testing.assert_allclose(np.linalg.norm(pose.tails - pose.heads, axis=1), skeleton.lengths, rtol=1e-9)
    local = skeleton.local_rotations(pose)
    for bone, limit in enumerate(skeleton.limits):
        if limit is not None:
            assert_within(limit, local[bone], f"bone {bone}")


@pytest.mark.parametrize("name", ITERATIVE)
def test_a_limited_start_pose_is_brought_inside_its_limits(name):
    """A start pose outside a hinge's range comes back inside, even when the target is already reached."""
    hinge = JointLimit(lock_z=True, lock_y=True, use_limit_x=True, min_x=0.0, max_x=1.0)
    skeleton = straight_chain(3).with_limits({1: hinge})
    sideways = np.array(quat.to_matrix(quat.about_axis((0.0, 0.0, 1.0), 0.8)))
    start = skeleton.with_local_rotations(skeleton.rest_pose(), {1: sideways})
    pose, _ = SOLVERS[name](skeleton, [Goal(2, tuple(start.tails[2]))], start)
    assert_within(hinge, skeleton.local_rotations(pose)[1], "bone 1")


@pytest.mark.parametrize("name", ITERATIVE)
def test_a_branch_with_weight_zero_does_not_pull_the_shared_bones(name):
    """Solving with a zero-weight second effector moves the hand exactly as solving without it."""
    skeleton, tips = hand()
    run = SolveSettings(max_iterations=20, tolerance=0.0, stall_fraction=0.0, patience=1000)
    pulled = Goal(tips[0], (-1.0, 1.5, 1.0), 1.0)
    ignored = Goal(tips[4], (3.0, -2.0, 0.0), 0.0)
    alone, _ = SOLVERS[name](skeleton, [pulled], settings=run)
    both, _ = SOLVERS[name](skeleton, [pulled, ignored], settings=run)
    np.testing.assert_allclose(both.frames, alone.frames, atol=1e-12)
    np.testing.assert_allclose(both.heads, alone.heads, atol=1e-12)


@pytest.mark.parametrize("name", ITERATIVE)
def test_weights_decide_between_conflicting_targets(name):
    """Two fingers pulled apart: the heavier one gets closer."""
    skeleton, tips = hand(finger_bones=2)
    left, right = (-4.0, 1.5, 0.0), (4.0, 1.5, 0.0)
    _, report = SOLVERS[name](skeleton, [Goal(tips[0], left, 4.0), Goal(tips[4], right, 1.0)])
    assert report.errors[0] < report.errors[1]


@pytest.mark.parametrize("name", ITERATIVE)
def test_all_fingertips_of_a_hand_are_reached(name):
    """A tree with five effectors (three-bone fingers on a fixed palm) reaches targets from a pose of its own."""
    skeleton, tips = hand()
    rng = np.random.default_rng(3)
    local = {i: m for i, m in enumerate(random_rotations(rng, len(skeleton), max_angle=1.0))}
    local[0] = np.eye(3)
    target_pose = skeleton.with_local_rotations(skeleton.rest_pose(), local)
    goals = [Goal(t, tuple(target_pose.tails[t]), chain_length=3) for t in tips]
    pose, report = SOLVERS[name](skeleton, goals, settings=SolveSettings(max_iterations=1000, tolerance=1e-3))
    assert report.converged, report
    np.testing.assert_array_equal(pose.frames[0], skeleton.rest_frames[0])


@pytest.mark.parametrize("name", ITERATIVE)
def test_a_partial_chain_keeps_the_bones_above_it_and_carries_those_below(name):
    """Chain length 2 on bones 2..3 of a 5-bone chain: 0..1 stay, 2..3 turn, 4 follows rigidly."""
    skeleton = straight_chain(5)
    goal = Goal(3, (0.8, 0.0, 3.2), chain_length=2)
    pose, report = SOLVERS[name](skeleton, [goal], settings=SolveSettings(max_iterations=300))
    assert report.converged
    np.testing.assert_array_equal(pose.frames[:2], skeleton.rest_frames[:2])
    np.testing.assert_array_equal(pose.heads[:3], skeleton.rest_heads[:3])
    np.testing.assert_allclose(skeleton.local_rotations(pose)[4], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(pose.heads[4], pose.tails[3], atol=1e-12)


@pytest.mark.parametrize("name", ITERATIVE)
def test_a_target_on_the_line_of_a_straight_chain_is_still_reached(name):
    """Straight chain, target on its own base: the Jacobian is singular there, the solvers must get out."""
    skeleton = straight_chain(4)
    _, report = SOLVERS[name](skeleton, [Goal(3, (0.0, 0.0, 0.0))], settings=SolveSettings(max_iterations=300))
    assert report.max_error < 1e-3, report


@pytest.mark.parametrize("name", ITERATIVE)
def test_a_target_out_of_reach_is_reported_and_pointed_at(name):
    """Out of reach the chain ends (nearly) straight at the target and the report says why it stopped."""
    skeleton = straight_chain(4)
    target = np.array([6.0, 0.0, 3.0])
    pose, report = SOLVERS[name](skeleton, [Goal(3, tuple(target))], settings=SolveSettings(max_iterations=300))
    assert report.stopped_by == "unreachable" and not report.converged
    direction = target / np.linalg.norm(target)
    assert report.errors[0] < np.linalg.norm(target) - 4.0 + 0.05
    assert (pose.frames[:, :, 1] @ direction).min() > 0.9


# --- the analytic two-bone solver ------------------------------------------------------------------------------


@st.composite
def two_bone_rigs(draw):
    """A two-bone chain (optionally under a parent bone), a random start pose of it, and its tip bone."""
    lengths = draw(st.lists(st.floats(0.1, 2.0), min_size=3, max_size=3))
    directions = draw(unit_vectors(3))
    heads, tails = [np.zeros(3)], [lengths[0] * np.asarray(directions[0])]
    for i in (1, 2):
        heads.append(tails[-1])
        tails.append(tails[-1] + lengths[i] * np.asarray(directions[i]))
    with_parent = draw(st.booleans())
    first = 0 if with_parent else 1
    parents = [-1, 0, 1][first:] if with_parent else [-1, 0]
    skeleton = skeleton_from_points(parents, heads[first:], tails[first:])
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    start = skeleton.pose_from_local(random_rotations(rng, len(skeleton)))
    return skeleton, start, len(skeleton) - 1


@settings(max_examples=150, deadline=None)
@given(two_bone_rigs(), st.integers(0, 2**32 - 1))
def test_two_bone_reaches_reachable_targets_exactly(rig, seed):
    """Any target inside the chain's reach is hit to 1e-9, from any start pose; the chain stays rigid."""
    skeleton, start, tip = rig
    turns = random_rotations(np.random.default_rng(seed), 2)
    target = tuple(skeleton.with_local_rotations(start, {tip - 1: turns[0], tip: turns[1]}).tails[tip])
    chain_length = 2 if len(skeleton) == 3 else 0
    pose, report = two_bone(skeleton, [Goal(tip, target, chain_length=chain_length)], start)
    assert np.linalg.norm(pose.tails[tip] - target) <= 1e-9
    assert report.converged and report.stopped_by == "converged" and report.errors[0] <= 1e-9
    assert_rigid_pose(skeleton, start, pose)
    if len(skeleton) == 3:
        np.testing.assert_array_equal(pose.frames[0], start.frames[0])


@settings(max_examples=100, deadline=None)
@given(two_bone_rigs(), unit_vectors(), st.floats(1.001, 5.0))
def test_two_bone_points_straight_at_targets_out_of_reach(rig, direction, beyond):
    """Beyond the reach both bones point from the base straight at the target."""
    skeleton, start, tip = rig
    base = start.heads[tip - 1]
    reach = skeleton.lengths[tip - 1] + skeleton.lengths[tip]
    target = base + np.asarray(direction) * reach * beyond
    pose, report = two_bone(skeleton, [Goal(tip, tuple(target), chain_length=2)], start)
    np.testing.assert_allclose(pose.frames[tip - 1 :, :, 1], np.broadcast_to(direction, (2, 3)), atol=1e-9)
    assert report.stopped_by == "unreachable" and not report.converged
    # A difference of two lengths near the reach: its rounding is relative to the reach, not to the difference.
    assert report.errors[0] == pytest.approx(reach * (beyond - 1), abs=1e-9 * reach)


def test_two_bone_keeps_the_start_bend_and_picks_one_when_straight():
    """Without a pole the chain keeps the start's bend axis and sense; a straight start always bends the same way."""
    skeleton = straight_chain(2)

    def bend_axis(pose: Pose) -> np.ndarray:
        axis = np.cross(pose.heads[1] - pose.heads[0], pose.tails[1] - pose.heads[1])
        return axis / np.linalg.norm(axis)

    turn = {0: np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), 0.3))),
            1: np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), -0.9)))}
    bent = skeleton.with_local_rotations(skeleton.rest_pose(), turn)
    pose, report = two_bone(skeleton, [Goal(1, (0.0, 0.0, 1.2))], bent)
    assert report.converged
    np.testing.assert_allclose(bend_axis(pose), bend_axis(bent), atol=1e-12)
    first, _ = two_bone(skeleton, [Goal(1, (0.3, 0.2, 1.0))])
    again, _ = two_bone(skeleton, [Goal(1, (0.3, 0.2, 1.0))])
    np.testing.assert_array_equal(first.heads, again.heads)
    np.testing.assert_allclose(first.tails[1], (0.3, 0.2, 1.0), atol=1e-12)


def _about_x(angle: float) -> np.ndarray:
    """A local rotation about the bone's X axis (the hinge axis of Blender rigs)."""
    return np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), angle)))


@pytest.mark.parametrize("pole_angle", [0.0, 0.7, -math.pi / 2, 2.5])
def test_two_bone_pole_follows_blenders_convention_like_fabrik(pole_angle):
    """With a pole the chain bends in its start's bend plane turned as Blender's IK turns it before solving
    (`pole.blender_turn`), the knee bending the way it did; FABRIK lands on the very same pose.

    (Blender's own solves are compared in tests/blender/test_poles.py.) Both
    solvers start from that turn, which points the chain at its target, so
    FABRIK no longer flips the bend over for targets across the knee's line.
    """
    skeleton = straight_chain(2)
    start = skeleton.with_local_rotations(skeleton.rest_pose(), {1: _about_x(0.6)})
    rng = np.random.default_rng(int(100 * pole_angle) % 97)
    for _ in range(20):
        bends = {0: _about_x(rng.uniform(-2.5, 2.5)), 1: _about_x(rng.uniform(0.2, 2.5))}
        target = tuple(skeleton.with_local_rotations(start, bends).tails[1])
        goal = Goal(1, target, pole=tuple(rng.uniform(-3, 3, 3)), pole_angle=pole_angle)
        pose, report = two_bone(skeleton, [goal], start)
        assert report.converged
        turn = pole.blender_turn(
            start.heads[0], start.tails[1], start.frames[0], np.asarray(target), np.asarray(goal.pole), pole_angle
        )
        np.testing.assert_allclose(_bend_normal(pose), turn @ _bend_normal(start), atol=1e-9)
        assert _knee_bend(skeleton, pose) > 0.0
        exact = SolveSettings(tolerance=1e-10, max_iterations=1000)
        reference, fabrik_report = plan.solve(skeleton, [goal], start, exact)
        assert fabrik_report.converged
        np.testing.assert_allclose(pose.heads[1], reference.heads[1], atol=1e-6)
        np.testing.assert_allclose(pose.frames, reference.frames, atol=1e-6)


def _bend_normal(pose: Pose) -> np.ndarray:
    """The unit normal of a two-bone chain's bend plane, signed by the way it bends."""
    axis = np.cross(pose.heads[1] - pose.heads[0], pose.tails[1] - pose.heads[1])
    return axis / np.linalg.norm(axis)


def _knee_bend(skeleton, pose: Pose) -> float:
    """The lower bone's bend about its X axis relative to the upper bone (radians)."""
    return quat.swing_twist(quat.from_matrix(skeleton.local_rotations(pose)[1].tolist()))[0]


@pytest.mark.parametrize(
    "skeleton, goals, message",
    [
        (straight_chain(3), [Goal(2, (0.0, 1.0, 1.0))], "has 3 bones"),
        (straight_chain(3), [Goal(2, (0.0, 1.0, 1.0), chain_length=1)], "has 1 bone$"),
        (straight_chain(3), [Goal(1, (0.0, 1.0, 1.0), chain_length=2), Goal(2, (0.0, 1.0, 1.0))], "not 2 goals"),
        (
            skeleton_from_points([-1, 0], [(0, 0, 0), (0, 0.2, 1)], [(0, 0, 1), (0, 0.2, 2)]),
            [Goal(1, (1.0, 0.0, 1.0))],
            "not connected",
        ),
    ],
)
def test_two_bone_refuses_other_chains_with_a_clear_message(skeleton, goals, message):
    """Anything but one goal on two connected bones is a ValueError the UI can show."""
    with pytest.raises(ValueError, match=NEEDS):
        two_bone(skeleton, goals)
    with pytest.raises(ValueError, match=message):
        two_bone(skeleton, goals)


def test_two_bone_accepts_a_longer_chain_length_that_stops_at_the_root():
    """Chain length 5 on a bone with one ancestor is still a two-bone chain."""
    pose, report = two_bone(straight_chain(2), [Goal(1, (1.0, 0.0, 1.0), chain_length=5)])
    assert report.converged


def test_two_bone_clamps_to_limits_and_only_then_claims_convergence():
    """A hinge that cannot bend the needed way: the pose obeys it and the report does not claim the target."""
    hinge = JointLimit(lock_z=True, lock_y=True, use_limit_x=True, min_x=0.0, max_x=0.3)
    skeleton = straight_chain(2).with_limits({1: hinge})
    pose, report = two_bone(skeleton, [Goal(1, (0.0, 1.0, 0.8))])
    assert_within(hinge, skeleton.local_rotations(pose)[1], "bone 1")
    assert not report.converged and report.stopped_by == "stalled"
    assert report.errors[0] == pytest.approx(np.linalg.norm(pose.tails[1] - (0.0, 1.0, 0.8)))
    free_enough = straight_chain(2).with_limits({1: JointLimit(use_limit_x=True, min_x=-2.0, max_x=2.0)})
    _, report = two_bone(free_enough, [Goal(1, (0.0, 1.0, 0.8))])
    assert report.converged
