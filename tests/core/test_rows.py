# SPDX-License-Identifier: GPL-3.0-or-later
"""Many frames solved at once (the plan on numpy rows: `many_frames.solve_rows`, `rows`) agree with each frame solved alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skeletons import hand, random_rotations, skeletons, solve_frames, straight_chain

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
from fabrik_addon.core.chain import fabrik, fabrik_rows
from fabrik_addon.core.math import quat
from fabrik_addon.core.model import limits
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.model.tree import Start, moving_tree
from fabrik_addon.core.solving import many_frames
from fabrik_addon.core.solving.parts import open_cones_as_free
from fabrik_addon.core.solving.plan import plan_for


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


@pytest.mark.parametrize("bones", [1, 2, 3, 10, 30])
def test_batched_chains_agree_with_the_per_frame_solver(bones):
    """Every frame's pose, iteration count and errors match `core.solve` on the same input."""
    skeleton = straight_chain(bones, 4.0 / bones)
    targets, starts = frames_of(skeleton, [bones - 1], 60, bones)
    targets[5, 0] = skeleton.rest_heads[0]  # a target on the root
    targets[6, 0] = starts[6].tails[bones - 1]  # a target already reached
    goals = [Goal(bones - 1, (0.0, 0.0, 0.0))]
    settings = SolveSettings(tolerance=1e-5)
    poses, iterations, errors = solve_frames(skeleton, goals, targets, starts, settings)
    for f in range(len(starts)):
        pose, report = solve(skeleton, [Goal(bones - 1, tuple(targets[f, 0]))], starts[f], settings)
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-12)
        assert iterations[f] == report.iterations
        np.testing.assert_allclose(errors[f], report.errors, atol=1e-12)


def test_batched_trees_with_weights_agree_with_the_per_frame_solver():
    """A connected Y-shaped tree with two weighted effectors and a partial chain."""
    skeleton = skeleton_from_points(
        [-1, 0, 1, 1, 3], [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 2), (0.5, 0, 2.5)],
        [(0, 0, 1), (0, 0, 2), (0, 0.5, 2.8), (0.5, 0, 2.5), (1.0, 0, 3.0)],
    )
    targets, starts = frames_of(skeleton, [2, 4], 40, 3)
    goals = [Goal(2, (0.0, 0.0, 0.0), 2.0), Goal(4, (0.0, 0.0, 0.0), 1.0, chain_length=3)]
    poses, iterations, _ = solve_frames(skeleton, goals, targets, starts)
    for f in range(len(starts)):
        frame_goals = [Goal(g.bone, tuple(targets[f, i]), g.weight, g.chain_length) for i, g in enumerate(goals)]
        pose, report = solve(skeleton, frame_goals, starts[f])
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        assert iterations[f] == report.iterations


def assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, run=SolveSettings()) -> None:
    """Each frame of a batch equals `core.solve` on that frame: pose, iterations and errors."""
    poses, iterations, errors = solve_frames(skeleton, goals, targets, starts, run)
    for f in range(len(starts)):
        frame_goals = [Goal(g.bone, tuple(targets[f, i]), g.weight, g.chain_length) for i, g in enumerate(goals)]
        pose, report = solve(skeleton, frame_goals, starts[f], run)
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-9, err_msg=f"frame {f}")
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-9, err_msg=f"frame {f}")
        assert iterations[f] == report.iterations, f"frame {f}"
        np.testing.assert_allclose(errors[f], report.errors, atol=1e-9, err_msg=f"frame {f}")


def test_batched_trees_with_offsets_agree_with_the_per_frame_solver():
    """The hand: fingers hang off the palm at offsets, so frames are carried (careful descent, then refinement)."""
    skeleton, tips = hand()
    targets, starts = frames_of(skeleton, tips, 60, 11)
    # Weights that are not powers of two, and one finger that leaves the palm alone (chain of 3).
    goals = [Goal(tip, (0.0, 0.0, 0.0), weight, chain) for tip, weight, chain in zip(tips, (2.0, 3.0, 1.0, 0.7, 1.0), (4, 4, 4, 4, 3))]
    run = SolveSettings(tolerance=1e-4)
    assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, run)
    # FABRIK's phase alone (all frames at once) crawls short of all of these targets (the weights pull the
    # palm different ways); the per-frame solver's refinement finishes those frames, reaching all in reach.
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    heads = np.stack([p.heads[bones] for p in starts])
    frames = np.stack([p.frames[bones] for p in starts])
    *_, converged = fabrik_rows.solve(tree, goals, targets, heads, frames, run, fabrik.SLOW_WINDOW)
    assert not converged.any()
    _, _, errors = solve_frames(skeleton, goals, targets, starts, run)
    reached = errors.max(axis=1) <= run.tolerance
    in_reach = np.ones(len(starts), dtype=bool)
    in_reach[::7] = False
    assert reached[in_reach].all() and not reached[~in_reach].any()
    # One finger pulling the palm: reachable frames converge, the others do not.
    one = [Goal(tips[2], (0.0, 0.0, 0.0), chain_length=4)]
    assert_agrees_with_the_per_frame_solver(skeleton, one, targets[:, 2:3], starts, run)
    _, _, errors = solve_frames(skeleton, one, targets[:, 2:3], starts, run)
    reached = errors[:, 0] <= run.tolerance
    assert reached.any() and not reached[::7].any()


@pytest.mark.parametrize("at_once", [1, 70])
def test_solved_frames_turned_a_few_nodes_at_a_time_are_the_same(monkeypatch, at_once):
    """The end of a solve turns the nodes' frames in groups (`fabrik_rows._ROWS_AT_ONCE` frames x nodes): one node at a
    time, and groups that split the hand's carried and swung nodes unevenly, give each frame its lone solve."""
    monkeypatch.setattr(fabrik_rows, "_ROWS_AT_ONCE", at_once)
    skeleton, tips = hand()
    targets, starts = frames_of(skeleton, tips, 20, 4)
    goals = [Goal(tip, (0.0, 0.0, 0.0), chain_length=4) for tip in tips]
    assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, SolveSettings(tolerance=1e-4))
    chain = straight_chain(7, 0.5)
    targets, starts = frames_of(chain, [6], 20, 5)
    assert_agrees_with_the_per_frame_solver(chain, [Goal(6, (0.0, 0.0, 0.0))], targets, starts)


def test_batched_offsets_through_bones_that_stay_put():
    """A node whose nearest moving ancestor is not its parent: the bones between act as a rigid offset."""
    skeleton = straight_chain(6, 0.5)
    goals = [Goal(5, (0.0, 0.0, 0.0), chain_length=1), Goal(3, (0.0, 0.0, 0.0), chain_length=3)]
    targets, starts = frames_of(skeleton, [5, 3], 40, 5)
    assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(skeletons(max_bones=9, trees=True, offsets=True), st.data())
def test_batched_random_trees_agree_with_the_per_frame_solver(skeleton, data):
    """Random trees with and without offsets, random effectors, weights and chain lengths."""
    leaves_ = [b for b in range(len(skeleton)) if not skeleton.children[b]]
    tips = data.draw(st.lists(st.sampled_from(leaves_), min_size=1, max_size=3, unique=True))
    goals = [
        Goal(tip, (0.0, 0.0, 0.0), data.draw(st.sampled_from([0.0, 0.5, 1.0, 3.0])),
             data.draw(st.integers(0, len(skeleton.path_to_root(tip)))))
        for tip in tips
    ]
    targets, starts = frames_of(skeleton, tips, 6, data.draw(st.integers(0, 2**16)), scale_every=3)
    assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, SolveSettings(max_iterations=40))


def test_what_batching_cannot_take_is_refused():
    """Joint limits other than open cones, and rotation or pole goals, are left to the per-frame solver, with a
    message."""
    chain = straight_chain(3)
    assert not many_frames.on_rows(plan_for(chain, [Goal(2, (1.0, 0.0, 1.0), rotation=(1.0, 0.0, 0.0, 0.0))]))
    assert not many_frames.on_rows(plan_for(chain, [Goal(2, (1.0, 0.0, 1.0), pole=(1.0, 0.0, 0.0))]))
    limited = chain.with_limits({1: JointLimit(lock_x=True)})
    assert not many_frames.on_rows(plan_for(limited, [Goal(2, (1.0, 0.0, 1.0))]))
    assert many_frames.on_rows(plan_for(limited, [Goal(2, (1.0, 0.0, 1.0), chain_length=1)]))  # the limited bone stays put
    with pytest.raises(ValueError, match="no joint limits"):
        solve_frames(limited, [Goal(2, (1.0, 0.0, 1.0))], np.zeros((1, 1, 3)), [limited.rest_pose()])


def test_batched_bend_of_a_straight_chain_matches_the_per_frame_solver():
    """The degenerate straight-chain case with a goal partway up, in a batch and one by one."""
    skeleton = straight_chain(3)
    goals = [Goal(1, (0.0, 0.0, 0.0)), Goal(2, (0.0, 0.0, 0.0), weight=0.0)]
    targets = np.array([[(0.0, 0.0, 1.5), (0.5, 0.0, 2.0)], [(0.0, 0.0, 1.2), (0.3, 0.2, 2.5)]])
    starts = [skeleton.rest_pose(), skeleton.rest_pose()]
    poses, _, _ = solve_frames(skeleton, goals, targets, starts)
    for f in range(2):
        frame_goals = [Goal(g.bone, tuple(targets[f, i]), g.weight) for i, g in enumerate(goals)]
        pose, _ = solve(skeleton, frame_goals, starts[f])
        np.testing.assert_allclose(poses[f].heads, pose.heads, atol=1e-12)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-12)


def test_batched_free_passes_on_open_cones_stop_where_the_per_frame_solver_hands_over():
    """A chain in open cones, solved as the free chain on numpy rows: every frame stops where one frame alone stops
    those passes (converged, out of reach, or handed over once they crawl: `fabrik.SLOW_WINDOW`), with the
    same iterations, errors and frames."""
    cone = JointLimit(use_limit_x=True, use_limit_z=True, min_x=-0.6, max_x=0.6, min_z=-0.5, max_z=0.7)
    skeleton = straight_chain(12, 0.4).with_limits({k: cone for k in range(1, 12)})
    goals = [Goal(11, (0.0, 0.0, 0.0))]
    tree = moving_tree(skeleton, goals)
    free = open_cones_as_free(tree)
    assert free is not None
    targets, starts = frames_of(skeleton, [11], 40, 12)
    rng = np.random.default_rng(5)
    for f in range(30, 40):  # nearly the whole reach away: the passes crawl there
        direction = rng.normal(size=3)
        targets[f, 0] = skeleton.rest_heads[0] + 4.8 * 0.999 * direction / np.linalg.norm(direction)
    bones = list(tree.bones)
    settings = SolveSettings(tolerance=1e-6)
    _, solved, iterations, errors, _ = fabrik_rows.solve(
        free, goals, targets, np.stack([p.heads[bones] for p in starts]), np.stack([p.frames[bones] for p in starts]),
        settings, fabrik.SLOW_WINDOW,
    )
    stopped = []
    for f, start in enumerate(starts):
        begun = Start.of_pose(skeleton, free, start)
        joints, report = fabrik.solve_from(
            free, [Goal(11, tuple(targets[f, 0]))], begun, settings, careful=True, window=fabrik.SLOW_WINDOW
        )
        frames = begun.frames if joints is None else joints.final_frames(free, begun)
        stopped.append(report.stopped_by)
        assert iterations[f] == report.iterations, f"frame {f}"
        np.testing.assert_allclose(errors[f], report.errors, atol=1e-9, err_msg=f"frame {f}")
        np.testing.assert_allclose(solved[f], [quat.to_matrix(q) for q in frames], atol=1e-9, err_msg=f"frame {f}")
    assert {"converged", "unreachable", "handover"} <= set(stopped), stopped


def test_open_cones_are_checked_in_bulk_as_one_by_one():
    """`limits.allows_rows` says what `limits.allows` says of each rotation, inside, outside and on the rim."""
    rng = np.random.default_rng(3)
    cone = JointLimit(use_limit_x=True, use_limit_y=True, use_limit_z=True, min_x=-0.5, max_x=0.7, min_z=-0.3,
                      max_z=0.4, min_y=-0.6, max_y=0.2)
    rows = rng.normal(size=(20000, 4))
    rows /= np.linalg.norm(rows, axis=1)[:, None]
    inside = np.array([limits.sample(cone, rng) for _ in range(3000)])
    rim = np.array([quat.from_swing_twist(0.7 * np.cos(a) if np.cos(a) >= 0 else 0.5 * np.cos(a),
                                          0.4 * np.sin(a) if np.sin(a) >= 0 else 0.3 * np.sin(a), 0.2)
                    for a in np.linspace(0.0, 2.0 * np.pi, 400)])
    rows = np.concatenate([rows, inside, rim, -inside[:100]])
    one_by_one = np.array([limits.allows(cone, tuple(q)) for q in rows.tolist()])
    assert one_by_one.sum() > 3000 and not one_by_one.all()
    np.testing.assert_array_equal(limits.allows_rows(cone, rows), one_by_one)
    with pytest.raises(ValueError, match="open cones"):
        limits.allows_rows(JointLimit(lock_x=True), rows)


@pytest.mark.parametrize("bones", [1, 6])
def test_a_chain_in_open_cones_solves_in_bulk_as_alone(bones):
    """A root bone alone, and a chain, limited by open cones (the leaf's twist goes back to its start's) through
    the plan on numpy rows: each frame's pose is the one it gets solved alone, and the local rotations it hands
    back are that pose's (`solve_frames` checks them)."""
    cone = JointLimit(use_limit_x=True, use_limit_y=True, use_limit_z=True, min_x=-0.8, max_x=0.8, min_z=-0.7,
                      max_z=0.9, min_y=-0.5, max_y=0.5)
    skeleton = straight_chain(bones, 1.0 / bones).with_limits({k: cone for k in range(bones)})
    goals = [Goal(bones - 1, (0.0, 0.0, 0.0))]
    assert many_frames.on_rows(plan_for(skeleton, goals))
    targets, starts = frames_of(skeleton, [bones - 1], 30, 4)
    settings = SolveSettings(tolerance=1e-6)
    poses, _, _ = solve_frames(skeleton, goals, targets, starts, settings)
    for f, start in enumerate(starts):
        pose, _ = solve(skeleton, [Goal(bones - 1, tuple(targets[f, 0]))], start, settings)
        np.testing.assert_allclose(poses[f].frames, pose.frames, atol=1e-9, err_msg=f"frame {f}")


@pytest.mark.parametrize("cap", [1, 2, 200])
def test_a_chain_whose_even_bend_leaves_its_cones_solves_in_bulk_as_alone(cap):
    """A 12-bone chain in 20-degree cones pulled in towards its base, where the even bend takes the first joints
    out of their cones and they stop on the rims (`bend.spread_within`): through the plan on numpy rows each
    frame's pose, iterations and errors are the ones it gets solved alone, under the iteration cap too (one step:
    the even bend alone, no rims)."""
    n = 12
    r = np.radians(20.0)
    cone = JointLimit(use_limit_x=True, min_x=-r, max_x=r, use_limit_z=True, min_z=-r, max_z=r)
    skeleton = straight_chain(n, 0.2).with_limits([cone] * n)
    goals = [Goal(n - 1, (0.0, 0.0, 0.0))]
    rng = np.random.default_rng(3)
    count = 12
    targets = np.zeros((count, 1, 3))
    for f in range(count):
        angle = rng.uniform(0.0, 2.0 * np.pi)
        targets[f, 0] = (0.25 * np.cos(angle), 0.25 * np.sin(angle), rng.uniform(1.7, 2.0))
    starts = [skeleton.rest_pose()] * count
    settings = SolveSettings(max_iterations=cap)
    assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, settings)
    if cap > 1:
        _, iterations, _ = solve_frames(skeleton, goals, targets, starts, settings)
        assert (iterations == 2).sum() > count // 2  # (the case: the rims take most frames)


def test_a_rim_step_counts_its_own_part_where_other_parts_took_more_iterations():
    """Two parts: a free 4-bone chain with two goals (several passes) and the 12-bone chain in cones whose rims
    take a step: each frame's iterations through the rows are the ones it gets solved alone (the most any part
    took), under a cap of 3 too."""
    n, m = 12, 4
    r = np.radians(20.0)
    cone = JointLimit(use_limit_x=True, min_x=-r, max_x=r, use_limit_z=True, min_z=-r, max_z=r)
    heads = [(5.0, 0.0, 1.0 * i) for i in range(m)] + [(0.0, 0.0, 0.2 * i) for i in range(n)]
    tails = [(5.0, 0.0, 1.0 * (i + 1)) for i in range(m)] + [(0.0, 0.0, 0.2 * (i + 1)) for i in range(n)]
    parents = [-1] + list(range(m - 1)) + [-1] + [m + i for i in range(n - 1)]
    skeleton = skeleton_from_points(parents, heads, tails).with_limits([None] * m + [cone] * n)
    goals = [Goal(1, (0.0, 0.0, 0.0)), Goal(m - 1, (0.0, 0.0, 0.0)), Goal(m + n - 1, (0.0, 0.0, 0.0))]
    rng = np.random.default_rng(3)
    count = 12
    targets = np.zeros((count, 3, 3))
    for f in range(count):
        a = rng.uniform(0.0, 2.0 * np.pi)
        targets[f, 0] = (5.0 + 1.5 * np.cos(a), 1.5 * np.sin(a), 0.3)
        targets[f, 1] = (4.0, 0.5, 2.5)
        targets[f, 2] = (0.25 * np.cos(a), 0.25 * np.sin(a), rng.uniform(1.7, 2.0))
    starts = [skeleton.rest_pose()] * count
    for cap in (3, 50):
        assert_agrees_with_the_per_frame_solver(skeleton, goals, targets, starts, SolveSettings(max_iterations=cap))
