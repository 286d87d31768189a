# SPDX-License-Identifier: GPL-3.0-or-later
"""The floor: targets below it are lifted onto it, no moving joint ends below it (a solve that could not keep
one above says it did not converge), limits still hold, and many frames on numpy rows agree with each alone."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from limit_checks import assert_within
from skeletons import leaves, random_rotations, skeletons, solve_frames, straight_chain

from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core.goals import floor
from fabrik_addon.core.goals.floor import Floor
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.model.tree import moving_tree
from fabrik_addon.core.solving.plan import plan_for

LEVEL = Floor((0.0, 0.0, 0.8), (0.0, 0.0, 1.0))


def lowest_joint(skeleton, goals, pose) -> float:
    """The lowest height above LEVEL of any moving joint (the moving bones' tails, and the heads of those that
    hang off a moving parent)."""
    tree = moving_tree(skeleton, goals)
    points = [pose.tails[b] for b in tree.bones]
    points += [pose.heads[b] for k, b in enumerate(tree.bones) if tree.parent[k] >= 0]
    return min(floor.height(LEVEL, tuple(p)) for p in points)


@pytest.mark.parametrize("target", [(2.5, 0.0, 0.9), (1.0, 1.0, 1.5), (0.5, 0.0, 0.9), (0.3, 0.2, 1.2)])
def test_a_chain_reaches_a_target_above_the_floor_with_no_joint_below_it(target):
    skeleton = straight_chain(4)
    goals = [Goal(3, target)]
    free, _ = solve(skeleton, goals, None, SolveSettings(max_iterations=100))
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=100, floor=LEVEL))
    assert report.converged and report.max_error <= 1e-4
    assert lowest_joint(skeleton, goals, pose) >= -1e-4
    assert lowest_joint(skeleton, goals, free) < -1e-2 or target == (2.5, 0.0, 0.9)  # (without it: below)


def test_a_target_below_the_floor_is_reached_where_it_is_lifted_onto_it():
    skeleton = straight_chain(4)
    pose, report = solve(skeleton, [Goal(3, (3.0, 0.0, 0.2))], None, SolveSettings(max_iterations=100, floor=LEVEL))
    assert report.converged
    np.testing.assert_allclose(pose.tails[3], (3.0, 0.0, 0.8), atol=1e-4)
    lifted = floor.lifted(Floor((0.0, 0.0, 0.0), (0.0, 0.6, 0.8)), [Goal(0, (1.0, 0.0, -1.0))])
    np.testing.assert_allclose(lifted[0].target, (1.0, 0.48, -0.36), atol=1e-12)  # straight up the normal


@pytest.mark.parametrize("target", [(1.8, 0.4, 1.0), (0.9, -0.3, 0.85), (2.4, 0.0, 1.6)])
def test_limits_hold_on_the_floor(target):
    """A chain of hinges and cones reaching along the floor: no joint below it, every joint inside its limit."""
    limit = JointLimit(use_limit_x=True, min_x=-1.2, max_x=1.2, use_limit_z=True, min_z=-0.4, max_z=0.4)
    hinge = JointLimit(lock_z=True, lock_y=True, use_limit_x=True, min_x=-1.6, max_x=1.6)
    skeleton = straight_chain(5, 0.8).with_limits({1: limit, 2: hinge, 3: limit, 4: hinge})
    goals = [Goal(4, target)]
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=200, floor=LEVEL))
    assert report.converged, report
    assert lowest_joint(skeleton, goals, pose) >= -1e-4
    local = skeleton.local_rotations(pose)
    for b, joint in ((1, limit), (2, hinge), (3, limit), (4, hinge)):
        assert_within(joint, local[b], f"bone {b}")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeletons(max_bones=8), st.integers(0, 2**31 - 1), st.floats(-0.9, 0.9), st.floats(-0.5, 0.5))
def test_a_solve_that_says_it_converged_left_no_joint_below_the_floor(skeleton, seed, tilt, drop):
    """Random trees, targets and tilted floors under their bases: converged means every target reached and no
    joint deeper than the tolerance; else the report says it did not converge."""
    rng = np.random.default_rng(seed)
    tips = leaves(skeleton)
    reached = skeleton.pose_from_local(random_rotations(rng, len(skeleton), 1.2))
    goals = [Goal(t, tuple(reached.tails[t])) for t in tips]
    base = skeleton.rest_heads[[b for b in range(len(skeleton)) if skeleton.parents[b] < 0]]
    normal = (math.sin(tilt), 0.0, math.cos(tilt))
    point = (0.0, 0.0, float(base[:, 2].min()) - 0.5 + drop)
    plane = Floor(point, normal)
    tolerance = 1e-4
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=200, tolerance=tolerance, floor=plane))
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    rest = skeleton.rest_pose()
    held = floor.liftable(plane, tree, [tuple(h) for h in rest.heads[bones]], [tuple(t) for t in rest.tails[bones]])
    depth = floor.deepest(
        plane, tree, [tuple(q) for q in _quaternions(pose.frames[bones])], [tuple(h) for h in pose.heads[bones]], held
    )
    if report.converged:
        assert depth <= tolerance * (1.0 + 1e-6)
        lifted = floor.lifted(plane, goals)
        for goal in lifted:
            assert np.linalg.norm(pose.tails[goal.bone] - goal.target) <= tolerance * (1.0 + 1e-6)


def _quaternions(frames: np.ndarray) -> np.ndarray:
    from fabrik_addon.core.math.matrix_rows import quaternions_from_matrices

    return quaternions_from_matrices(frames)


def test_many_frames_on_rows_agree_with_each_frame_alone():
    skeleton = straight_chain(6, 0.5)
    rng = np.random.default_rng(3)
    count = 40
    targets = np.zeros((count, 1, 3))
    starts = []
    for f in range(count):
        targets[f, 0] = skeleton.pose_from_local(random_rotations(rng, len(skeleton), 0.9)).tails[5]
        starts.append(skeleton.pose_from_local(random_rotations(rng, len(skeleton), 0.2)))
    goals = [Goal(5, (0.0, 0.0, 0.0))]
    plane = Floor((0.0, 0.0, 0.3), (0.0, 0.0, 1.0))  # (the first bone's tail, 0.5 from the origin, clears it)
    solve_settings = SolveSettings(max_iterations=100, tolerance=1e-5, floor=plane)
    poses, iterations, errors = solve_frames(skeleton, goals, targets, starts, solve_settings)
    held = 0
    for f in range(count):
        pose, report = solve(skeleton, [Goal(5, tuple(targets[f, 0]))], starts[f], solve_settings)
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-9)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-9)
        assert iterations[f] == report.iterations
        np.testing.assert_allclose(errors[f], report.errors, atol=1e-12)
        free, _ = solve(skeleton, [Goal(5, tuple(targets[f, 0]))], starts[f], replace(solve_settings, floor=None))
        if report.converged:
            assert min(floor.height(plane, tuple(t)) for t in poses[f].tails) >= -1e-5
            held += min(floor.height(plane, tuple(t)) for t in free.tails) < -1e-3
    assert held >= 5  # (frames the free solve takes under the floor, held above it on rows as alone)


def test_a_joint_no_pose_lifts_above_the_floor_does_not_pull_the_goals_away():
    """The first bone (1 long, from the origin) cannot reach a floor at 1.5: it is left where the goals put it,
    and the joints after it are held above the floor while the target is reached."""
    skeleton = straight_chain(4)
    plane = Floor((0.0, 0.0, 1.5), (0.0, 0.0, 1.0))
    goals = [Goal(3, (1.5, 0.0, 1.8))]
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=100, floor=plane))
    assert report.converged and report.max_error <= 1e-4
    assert min(floor.height(plane, tuple(t)) for t in pose.tails[1:]) >= -1e-4


def test_the_floor_is_refused_where_it_is_not_a_plane():
    skeleton = straight_chain(2)
    for bad in (Floor((0.0, 0.0, math.nan), (0.0, 0.0, 1.0)), Floor((0.0, 0.0, 0.0), (0.0, 0.0, 2.0))):
        with pytest.raises(ValueError, match="the floor"):
            solve(skeleton, [Goal(1, (1.0, 0.0, 1.0))], None, SolveSettings(floor=bad))
    assert plan_for(skeleton, [Goal(1, (1.0, 0.0, 1.0))]) is not None
