# SPDX-License-Identifier: GPL-3.0-or-later
"""Batched FABRIK over many frames agrees with the per-frame solver."""

from __future__ import annotations

import numpy as np
import pytest

from fabrik_addon.core import Goal, SolveSettings, batch, solve
from skeletons import hand, random_rotations, straight_chain


def frames_of(skeleton, tips, count, seed, scale_every=7):
    """Targets (reachable, with every n-th frame pushed out of reach) and random start poses."""
    rng = np.random.default_rng(seed)
    targets = np.zeros((count, len(tips), 3))
    starts = []
    for f in range(count):
        targets[f] = skeleton.pose_from_local(random_rotations(rng, len(skeleton), 0.5)).tails[tips]
        starts.append(skeleton.pose_from_local(random_rotations(rng, len(skeleton), 0.3)))
    targets[::scale_every] *= 3.0
    return targets, starts


@pytest.mark.parametrize("bones", [1, 3, 10, 30])
def test_batched_chains_agree_with_the_per_frame_solver(bones):
    """Every frame's pose, iteration count and errors match fabrik.solve on the same input."""
    skeleton = straight_chain(bones, 4.0 / bones)
    targets, starts = frames_of(skeleton, [bones - 1], 60, bones)
    targets[5, 0] = skeleton.rest_heads[0]  # a target on the root
    targets[6, 0] = starts[6].tails[bones - 1]  # a target already reached
    goals = [Goal(bones - 1, (0.0, 0.0, 0.0))]
    settings = SolveSettings(tolerance=1e-5)
    poses, iterations, errors = batch.solve_frames(skeleton, goals, targets, starts, settings)
    for f in range(len(starts)):
        pose, report = solve(skeleton, [Goal(bones - 1, tuple(targets[f, 0]))], starts[f], settings)
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-12)
        assert iterations[f] == report.iterations
        np.testing.assert_allclose(errors[f], report.errors, atol=1e-12)


def test_batched_trees_with_weights_agree_with_the_per_frame_solver():
    """A connected Y-shaped tree with two weighted effectors and a partial chain."""
    from fabrik_addon.core import skeleton_from_points

    skeleton = skeleton_from_points(
        [-1, 0, 1, 1, 3], [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 2), (0.5, 0, 2.5)],
        [(0, 0, 1), (0, 0, 2), (0, 0.5, 2.8), (0.5, 0, 2.5), (1.0, 0, 3.0)],
    )
    targets, starts = frames_of(skeleton, [2, 4], 40, 3)
    goals = [Goal(2, (0.0, 0.0, 0.0), 2.0), Goal(4, (0.0, 0.0, 0.0), 1.0, chain_length=3)]
    poses, iterations, _ = batch.solve_frames(skeleton, goals, targets, starts)
    for f in range(len(starts)):
        frame_goals = [Goal(g.bone, tuple(targets[f, i]), g.weight, g.chain_length) for i, g in enumerate(goals)]
        pose, report = solve(skeleton, frame_goals, starts[f])
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        assert iterations[f] == report.iterations


def test_what_batching_cannot_take_is_refused():
    """Unconnected bones (the hand's fingers) and rotation goals need frames: refused with a message."""
    skeleton, tips = hand()
    assert not batch.supports(skeleton, [Goal(tips[0], (0.0, 1.0, 0.0))])
    chain = straight_chain(3)
    assert not batch.supports(chain, [Goal(2, (1.0, 0.0, 1.0), rotation=(1.0, 0.0, 0.0, 0.0))])
    with pytest.raises(ValueError, match="free tree of connected bones"):
        batch.solve_frames(skeleton, [Goal(tips[0], (0.0, 1.0, 0.0))], np.zeros((1, 1, 3)), [skeleton.rest_pose()])


def test_batched_bend_of_a_straight_chain_matches_the_per_frame_solver():
    """The degenerate straight-chain case with a goal partway up, in a batch and one by one."""
    skeleton = straight_chain(3)
    goals = [Goal(1, (0.0, 0.0, 0.0)), Goal(2, (0.0, 0.0, 0.0), weight=0.0)]
    targets = np.array([[(0.0, 0.0, 1.5), (0.5, 0.0, 2.0)], [(0.0, 0.0, 1.2), (0.3, 0.2, 2.5)]])
    starts = [skeleton.rest_pose(), skeleton.rest_pose()]
    poses, _, _ = batch.solve_frames(skeleton, goals, targets, starts)
    for f in range(2):
        frame_goals = [Goal(g.bone, tuple(targets[f, i]), g.weight) for i, g in enumerate(goals)]
        pose, _ = solve(skeleton, frame_goals, starts[f])
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-12)
