# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK on chains and trees: properties over random skeletons, plus the paper's own setting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from skeletons import (
    assert_rigid_pose,
    assert_unmoved_outside_chains,
    hand,
    random_rotations,
    skeletons,
    straight_chain,
    unit_vectors,
)

from fabrik_addon.core import Goal, Pose, SolveSettings, solve
from fabrik_addon.core.chain.fabrik import chain_backward, chain_forward, forward_reaching
from fabrik_addon.core.math.matrix_rows import swing_matrix
from fabrik_addon.core.model.tree import Joints, Start, moving_tree

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
points = st.tuples(*[st.floats(-15, 15)] * 3)


def swing_pose(skeleton, rng: np.random.Generator) -> Pose:
    """A random pose reached by turning each bone the shortest way from rest (what position-only IK can express)."""
    n = len(skeleton)
    heads, frames = np.zeros((n, 3)), np.zeros((n, 3, 3))
    for i in skeleton.order:
        d = rng.normal(size=3)
        d /= np.linalg.norm(d)
        frames[i] = swing_matrix(skeleton.rest_frames[i][:, 1], d, skeleton.rest_frames[i][:, 0]) @ skeleton.rest_frames[i]
        p = skeleton.parents[i]
        if p < 0:
            heads[i] = skeleton.rest_heads[i]
        else:
            heads[i] = heads[p] + skeleton.lengths[p] * frames[p][:, 1] + frames[p] @ skeleton.offsets[i]
    return Pose(heads, frames, skeleton.lengths)


@PROPERTY
@given(skeletons(max_bones=12, trees=True, offsets=True, roots=2), st.data())
def test_any_targets_keep_the_skeleton_rigid_and_the_roots_fixed(skeleton, data):
    """Lengths, offsets and roots survive any goals, chain lengths and weights; nothing is NaN."""
    tips = data.draw(st.lists(st.sampled_from(range(len(skeleton))), min_size=1, max_size=4, unique=True))
    goals = [
        Goal(t, data.draw(points), data.draw(st.floats(0, 3)), data.draw(st.integers(0, 4)))
        for t in tips
    ]
    start = skeleton.rest_pose()
    pose, report = solve(skeleton, goals, start, SolveSettings(max_iterations=30))
    assert_rigid_pose(skeleton, start, pose)
    assert all(math.isfinite(e) for e in report.errors)
    assert_unmoved_outside_chains(skeleton, goals, start, pose)


@PROPERTY
@given(skeletons(max_bones=10, trees=False, offsets=False), st.integers(0, 2**32 - 1))
def test_reachable_targets_are_reached_on_chains(skeleton, seed):
    """A target that some pose of the chain reaches is reached within tolerance."""
    tip = len(skeleton) - 1
    goal_pose = skeleton.pose_from_local(random_rotations(np.random.default_rng(seed), len(skeleton)))
    target = tuple(goal_pose.tails[tip])
    tolerance = 1e-4 * skeleton.lengths.sum()
    pose, report = solve(skeleton, [Goal(tip, target)], settings=SolveSettings(max_iterations=2000, tolerance=tolerance))
    assert report.converged, report
    assert np.linalg.norm(pose.tails[tip] - target) <= tolerance


def test_reachable_targets_are_reached_with_unconnected_bones():
    """With rigid head offsets (unconnected bones) FABRIK is no longer exact; measure how often it still reaches."""
    rng = np.random.default_rng(7)
    reached = trials = 0
    for trial in range(300):
        n = int(rng.integers(2, 11))
        skeleton = _random_offset_chain(rng, n)
        tip = n - 1
        target = tuple(swing_pose(skeleton, rng).tails[tip])
        tolerance = 1e-4 * skeleton.lengths.sum()
        _, report = solve(skeleton, [Goal(tip, target)], settings=SolveSettings(max_iterations=1000, tolerance=tolerance))
        trials += 1
        reached += report.converged
    assert reached / trials >= 0.95, f"reached {reached} of {trials}"


def _random_offset_chain(rng: np.random.Generator, n: int):
    """A chain where every head sits a random offset away from its parent's tail."""
    from fabrik_addon.core import skeleton_from_points

    heads, tails = [], []
    for i in range(n):
        head = np.zeros(3) if i == 0 else np.array(tails[-1]) + rng.uniform(-0.4, 0.4, 3)
        d = rng.normal(size=3)
        heads.append(head)
        tails.append(head + rng.uniform(0.2, 1.5) * d / np.linalg.norm(d))
    return skeleton_from_points([-1] + list(range(n - 1)), heads, tails)


@PROPERTY
@given(skeletons(max_bones=10, trees=False, offsets=False), unit_vectors(), st.floats(1.01, 5.0))
def test_unreachable_targets_stretch_the_chain_straight_at_them(skeleton, direction, beyond):
    """Out of reach, every bone points from the fixed base straight at the target."""
    base = skeleton.rest_heads[0]
    target = tuple(base + np.asarray(direction) * skeleton.lengths.sum() * beyond)
    tip = len(skeleton) - 1
    pose, report = solve(skeleton, [Goal(tip, target)])
    assert report.stopped_by == "unreachable" and not report.converged
    np.testing.assert_allclose(pose.frames[:, :, 1], np.broadcast_to(direction, (len(skeleton), 3)), atol=1e-9)
    np.testing.assert_allclose(pose.heads[0], base)
    assert report.errors[0] == pytest.approx(skeleton.lengths.sum() * (beyond - 1), rel=1e-9)


@PROPERTY
@given(skeletons(max_bones=8, trees=True, offsets=True), st.data())
def test_degenerate_input_gives_no_nan(skeleton, data):
    """Targets on the root, on joints, and folded start poses with coincident joints stay finite."""
    n = len(skeleton)
    # Fold every other bone back onto its parent: heads and tails coincide with other joints.
    folds = {i: np.diag([1.0, -1.0, -1.0]) for i in range(1, n, 2)}
    start = skeleton.with_local_rotations(skeleton.rest_pose(), folds)
    joints_and_root = [tuple(p) for p in np.vstack([start.heads, start.tails])]
    tips = data.draw(st.lists(st.sampled_from(range(n)), min_size=1, max_size=3, unique=True))
    goals = [Goal(t, data.draw(st.sampled_from(joints_and_root))) for t in tips]
    pose, report = solve(skeleton, goals, start)
    assert_rigid_pose(skeleton, start, pose)
    assert all(math.isfinite(e) for e in report.errors)


def test_target_exactly_on_the_root_of_a_straight_chain():
    """The worst case for a chain: the target at its base and the chain pointing straight away."""
    skeleton = straight_chain(4)
    pose, report = solve(skeleton, [Goal(3, (0.0, 0.0, 0.0))])
    assert_rigid_pose(skeleton, skeleton.rest_pose(), pose)
    assert report.max_error < 1e-3


@pytest.mark.parametrize("bones", [2, 3, 5])
def test_a_chain_straight_but_for_its_last_bone_bends_for_a_target_on_its_line(bones):
    """Every joint on the line from the base to the target but the tip: the passes alone would keep them there
    (the tip's own place does not count, the forward pass puts it on the target). Two bones start bent about
    their base towards the side their tip bends to; longer chains bend evenly from the tip's bend. Either way the
    chain stays in the plane its tip bends in."""
    from fabrik_addon.core import skeleton_from_points

    heads = [(0.3 * i, 0.0, 0.0) for i in range(bones)]
    tails = heads[1:] + [(0.3 * bones, 0.02, 0.0)]
    skeleton = skeleton_from_points([-1] + list(range(bones - 1)), heads, tails)
    target = (0.3 * bones - 0.05, 0.0, 0.0)
    pose, report = solve(skeleton, [Goal(bones - 1, target)], settings=SolveSettings(max_iterations=100))
    assert report.converged and report.iterations < 30, report
    np.testing.assert_allclose(pose.tails[-1], target, atol=1e-4)
    assert np.abs(pose.heads[:, 2]).max() < 1e-9 and np.abs(pose.tails[:, 2]).max() < 1e-9


@pytest.mark.parametrize("bones", [2, 3])
def test_a_tip_bone_set_off_its_parents_line_is_no_degenerate_chain(bones):
    """The tip bone's head off the line of the bones above it (an unconnected bone): not FABRIK's degenerate
    case, so nothing bends the chain out of the plane it lies in."""
    from fabrik_addon.core import skeleton_from_points

    heads = [(0.0, 0.0, 0.0)] + [(0.05 if i == bones - 1 else 0.0, 0.3 * i, 0.0) for i in range(1, bones)]
    tails = [(0.0, 0.3 * (i + 1), 0.0) for i in range(bones - 1)] + [(0.05, 0.3 * bones, 0.0)]
    skeleton = skeleton_from_points([-1] + list(range(bones - 1)), heads, tails)
    for y in (0.3 * bones - 0.1, 0.18 * bones, -0.2):
        pose, report = solve(skeleton, [Goal(bones - 1, (0.0, y, 0.0))], settings=SolveSettings(max_iterations=100))
        assert report.converged, (y, report)
        assert np.abs(pose.tails[:, 2]).max() < 1e-9, y


# Subnormal weights (5e-324) make the centroid below meaningless (w * p rounds to 0 or to w), not the solver.
@PROPERTY
@given(st.floats(0.0, 5.0, allow_subnormal=False), st.floats(0.0, 5.0, allow_subnormal=False), st.integers(0, 2**32 - 1))
def test_sub_base_goes_to_the_weighted_centroid_of_its_branches(w1, w2, seed):
    """One forward pass on a Y-shaped tree: the shared bone's tail lands where the weights say."""
    assume(w1 + w2 > 0)
    from fabrik_addon.core import skeleton_from_points

    rng = np.random.default_rng(seed)
    skeleton = skeleton_from_points(
        [-1, 0, 0], [(0, 0, 0), (0, 0, 1), (0, 0, 1)], [(0, 0, 1), (0.7, 0, 1.7), (-0.7, 0, 1.7)]
    )
    goals = [Goal(1, tuple(rng.uniform(-3, 3, 3)), w1), Goal(2, tuple(rng.uniform(-3, 3, 3)), w2)]
    tree = moving_tree(skeleton, goals)
    joints = Joints(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
    weights = [w1, w2]
    branch = [w1 + w2, w1, w2]
    forward_reaching(tree, joints, [g.target for g in goals], weights, branch)
    asked = [np.array(joints.heads[1]), np.array(joints.heads[2])]
    centroid = (w1 * asked[0] + w2 * asked[1]) / (w1 + w2)
    np.testing.assert_allclose(joints.tails[0], centroid, atol=1e-12)


def test_a_branch_with_weight_zero_does_not_pull_the_shared_bones():
    """Solving with a zero-weight second effector moves the palm exactly as solving without it."""
    skeleton, tips = hand()
    run = SolveSettings(max_iterations=20, tolerance=0.0, stall_fraction=0.0, patience=1000)
    pulled = Goal(tips[0], (-1.0, 1.5, 1.0), 1.0)
    ignored = Goal(tips[4], (3.0, -2.0, 0.0), 0.0)
    alone, _ = solve(skeleton, [pulled], settings=run)
    both, _ = solve(skeleton, [pulled, ignored], settings=run)
    np.testing.assert_allclose(both.frames[0], alone.frames[0], atol=1e-12)
    np.testing.assert_allclose(both.tails[: tips[0] + 1], alone.tails[: tips[0] + 1], atol=1e-12)


def test_weights_decide_between_conflicting_targets():
    """Two fingers pulled in opposite directions: the heavier one gets closer, equal ones come out even."""
    skeleton, tips = hand(finger_bones=2)
    left, right = (-4.0, 1.5, 0.0), (4.0, 1.5, 0.0)

    def errors(w_left, w_right):
        _, report = solve(skeleton, [Goal(tips[0], left, w_left), Goal(tips[4], right, w_right)])
        return report.errors

    even = errors(1.0, 1.0)
    assert even[0] == pytest.approx(even[1], rel=0.05)
    heavy_left = errors(4.0, 1.0)
    assert heavy_left[0] < heavy_left[1]


def test_all_reachable_fingertips_are_reached():
    """A hand (a tree with five effectors) reaches five targets taken from a pose of its own."""
    skeleton, tips = hand()
    rng = np.random.default_rng(3)
    local = {i: m for i, m in enumerate(random_rotations(rng, len(skeleton), max_angle=0.5))}
    local[0] = np.eye(3)  # the palm stays, so the five targets agree about it
    target_pose = skeleton.with_local_rotations(skeleton.rest_pose(), local)
    goals = [Goal(t, tuple(target_pose.tails[t]), chain_length=3) for t in tips]
    pose, report = solve(skeleton, goals, settings=SolveSettings(max_iterations=200, tolerance=1e-4))
    assert report.converged, report
    np.testing.assert_allclose(pose.frames[0], skeleton.rest_frames[0])


def test_a_partial_chain_keeps_the_bone_above_it_fixed():
    """Chain length 2 on a 5-bone chain: bones 0..2 do not move, 3 and 4 do."""
    skeleton = straight_chain(5)
    pose, report = solve(skeleton, [Goal(4, (1.0, 0.0, 4.5), chain_length=2)])
    assert report.converged
    np.testing.assert_array_equal(pose.frames[:3], skeleton.rest_frames[:3])
    np.testing.assert_array_equal(pose.heads[:4], skeleton.rest_heads[:4])
    assert not np.allclose(pose.frames[3], skeleton.rest_frames[3])


def test_bones_below_the_chain_follow_rigidly():
    """A child bone outside every chain keeps its rotation relative to its moved parent."""
    skeleton = straight_chain(4)
    pose, _ = solve(skeleton, [Goal(2, (1.5, 0.0, 2.0))])
    local = skeleton.local_rotations(pose)
    np.testing.assert_allclose(local[3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(pose.heads[3], pose.tails[2], atol=1e-12)


def test_conflicting_targets_stop_when_the_error_stops_improving():
    """Targets no pose can satisfy together end by stalling (here, each beyond its chain's reach: unreachable),
    well before the iteration cap."""
    skeleton, tips = hand(finger_bones=2)
    goals = [Goal(tips[0], (-9.0, 0.0, 0.0)), Goal(tips[4], (9.0, 0.0, 0.0))]
    _, report = solve(skeleton, goals, settings=SolveSettings(max_iterations=500))
    assert report.stopped_by in ("stalled", "unreachable")
    assert report.iterations < 100


def test_paper_setting_ten_joint_chain_converges_in_a_few_iterations():
    """The paper's test: a 10-joint chain and random reachable targets (it reports 15.5 iterations on average)."""
    skeleton = straight_chain(10)
    rng = np.random.default_rng(2011)
    iterations = []
    for _ in range(200):
        target_pose = skeleton.pose_from_local(random_rotations(rng, 10))
        _, report = solve(skeleton, [Goal(9, tuple(target_pose.tails[9]))], settings=SolveSettings(tolerance=0.01))
        assert report.converged
        iterations.append(report.iterations)
    assert np.median(iterations) <= 15.5


@pytest.mark.parametrize(
    "goal, message",
    [
        (Goal(0, (0.0, float("nan"), 0.0)), "finite"),
        (Goal(0, (0.0, float("inf"), 0.0)), "finite"),
        (Goal(7, (0.0, 0.0, 0.0)), "outside"),
        (Goal(0, (0.0, 0.0, 0.0), weight=-1.0), "weight"),
        (Goal(0, (0.0, 0.0, 0.0), chain_length=-1), "chain length"),
    ],
)
def test_bad_goals_are_refused_with_a_clear_message(goal, message):
    """NaN targets, unknown bones, negative weights and chain lengths raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        solve(straight_chain(3), [goal])


def test_no_goals_returns_the_start_pose():
    """Nothing to reach: the pose comes back unchanged."""
    skeleton = straight_chain(3)
    pose, report = solve(skeleton, [])
    np.testing.assert_array_equal(pose.heads, skeleton.rest_heads)
    assert report.converged and report.iterations == 0


def test_bending_a_straight_chain_turns_every_bone_below_it():
    """A goal partway up a straight chain, its target on the chain's line: the bones beyond it turn along."""
    skeleton = straight_chain(3)
    goals = [Goal(1, (0.0, 0.0, 1.5)), Goal(2, (0.5, 0.0, 2.0), weight=0.0)]
    start = skeleton.rest_pose()
    pose, _ = solve(skeleton, goals, start, SolveSettings(max_iterations=0))
    assert_rigid_pose(skeleton, start, pose)
    pose, _ = solve(skeleton, goals, start)
    assert_rigid_pose(skeleton, start, pose)


def test_a_straight_chain_bent_out_of_line_keeps_a_child_offset_rigid():
    """A child hanging at an offset along its parent's line, target on that line: bending it keeps the offset.

    Found by the degenerate-input property test: the bend turned the child about its parent's tail, which an
    offset keeps apart from the child's head, and tore the rigid offset.
    """
    from fabrik_addon.core import skeleton_from_points

    skeleton = skeleton_from_points([-1, 0], [(0, 0, 0), (1.5, 0, 0)], [(1, 0, 0), (1.75, 0, 0)])
    assert skeleton.offsets[1].any()
    start = skeleton.rest_pose()
    pose, report = solve(skeleton, [Goal(1, (0.0, 0.0, 0.0))], start)
    assert_rigid_pose(skeleton, start, pose)
    # The tip can come no closer to the root than the head's 1.5 less the last bone's 0.25, and does.
    assert report.max_error == pytest.approx(1.25, abs=1e-3)


@pytest.mark.parametrize("extension", [0.9, 0.99, 0.9995])
def test_a_two_bone_limb_near_full_reach_is_reached_at_once(extension):
    """Two free bones pulled at the tip (a leg without limits): near full reach FABRIK's passes crawl (at 99.95 %
    of the reach they took over 400 iterations, past the add-on's cap), but where they converge is known: the
    one triangle in the plane of base, knee and target, on the knee's side. The solve starts there."""
    skeleton = straight_chain(2)
    c, s = math.cos(0.3), math.sin(0.3)
    bent = skeleton.with_local_rotations(skeleton.rest_pose(), {1: np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])})
    target = (0.4 * 2.0 * extension, 0.0, math.sqrt((2.0 * extension) ** 2 - (0.8 * extension) ** 2))
    pose, report = solve(skeleton, [Goal(1, target)], bent, SolveSettings(max_iterations=50, tolerance=1e-6))
    assert report.converged and report.iterations <= 1
    assert_rigid_pose(skeleton, bent, pose)
    # The same place as the paper's passes themselves, run from that start until they stop moving (at 90 %).
    if extension == 0.9:
        points = [tuple(bent.heads[0]), tuple(bent.heads[1]), tuple(bent.tails[1])]
        for _ in range(5000):
            chain_forward(points, [1.0, 1.0], target)
            chain_backward(points, [1.0, 1.0], (0.0, 0.0, 0.0))
        assert np.allclose(pose.tails[0], points[1], atol=1e-9)
    # The knee stays on its side of the base-target line (the side it was bent to).
    knee_side = np.cross(np.asarray(target), bent.tails[0])
    assert np.dot(np.cross(np.asarray(target), pose.tails[0]), knee_side) > 0.0


def test_in_a_free_tree_with_offsets_only_the_bones_children_hang_from_carry_their_frames():
    """The palm, which fingers hang from at offsets, turns with every pass (its frame places them); a finger
    bone, from which nothing hangs at an offset, turns once from its start the shortest way to where its bone
    ends up, as every bone of a free chain does (per-pass turns would add a twist of their own)."""
    from fabrik_addon.core.chain.fabrik import SLOW_WINDOW, solve_from
    from fabrik_addon.core.math.matrix_rows import swung_frames
    from fabrik_addon.core.model.tree import posed

    skeleton, tips = hand()
    tree = moving_tree(skeleton, [Goal(t, (0.0, 0.0, 0.0), chain_length=4) for t in tips])
    assert tree.offset_parents == tuple(k == 0 for k in range(len(tree.bones)))  # the palm only
    rng = np.random.default_rng(5)
    twisted = 0
    for _ in range(6):
        start = skeleton.with_local_rotations(
            skeleton.rest_pose(), dict(enumerate(random_rotations(rng, len(skeleton), max_angle=0.4)))
        )
        aim = skeleton.with_local_rotations(
            skeleton.rest_pose(), dict(enumerate(random_rotations(rng, len(skeleton), max_angle=0.6)))
        )
        goals = [Goal(t, tuple(aim.tails[t]), chain_length=4) for t in tips]
        settings = SolveSettings(max_iterations=200, tolerance=1e-4)
        # FABRIK's own part of the solve (where it hands over, the refinement's turns are its own).
        begun = Start.of_pose(skeleton, tree, start)
        joints, report = solve_from(tree, goals, begun, settings, careful=True, window=SLOW_WINDOW)
        assert report.iterations > 2
        pose = posed(skeleton, tree, start, joints.final_frames(tree, begun), joints.heads)
        fingers = [b for b in tree.bones if b != 0]
        directions = (pose.tails[fingers] - pose.heads[fingers]) / skeleton.lengths[fingers][:, None]
        np.testing.assert_allclose(pose.frames[fingers], swung_frames(start.frames[fingers], directions), atol=1e-9)
        # The palm's frame is not its start's turned the shortest way: it carried the passes' turns.
        palm_direction = (pose.tails[0] - pose.heads[0]) / skeleton.lengths[0]
        shortest = swung_frames(start.frames[[0]], palm_direction[None])[0]
        twisted += np.abs(pose.frames[0] - shortest).max() > 1e-6
    assert twisted >= 4
