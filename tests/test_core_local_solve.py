# SPDX-License-Identifier: GPL-3.0-or-later
"""The live path's plain-float solve of free trees gives what fabrik.solve and local_rotations give."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from fabrik_addon.core import Goal, SolveSettings, batch, fabrik, local_solve, matrix_rows, quat, solve, stretch
from fabrik_addon.core.fabrik import moving_tree
from fabrik_addon.core.limits import JointLimit
from skeletons import hand, random_rotations, skeletons, straight_chain


def solve_both(skeleton, goals, rotations, locations, solve_settings):
    """(fast local rotations as matrices, fast report, slow local rotations of the moving bones, slow report)."""
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    # The start as the bridge builds it: the moving bones' channels over a pose of the whole rig.
    around = skeleton.pose_from_local(rotations)
    start = skeleton.with_local_rotations(around, {b: rotations[b] for b in bones}, locations)
    pose, report = solve(skeleton, goals, start, solve_settings)
    slow = skeleton.local_rotations(pose)[bones]
    local = local_solve.local_tree(skeleton, tree)
    fixed = [
        (quat.from_matrix(around.frames[p].tolist()), tuple(around.heads[p].tolist())) if k < 0 and p >= 0 else None
        for k, p in zip(tree.parent, local.parent_bone)
    ]
    moves = [tuple(locations[b].tolist()) if b in locations else None for b in bones]
    solved = local_solve.solve(
        local, goals, [quat.from_matrix(rotations[b].tolist()) for b in bones], moves, fixed, solve_settings
    )
    if solved is None:  # a tree with offsets that FABRIK alone does not solve: the general path's
        return None, None, slow, report
    solved_rotations, fast_report = solved
    fast = np.array([quat.to_matrix(q) for q in solved_rotations])
    return fast, fast_report, slow, report


def assert_same(fast, fast_report, slow, report):
    np.testing.assert_allclose(fast, slow, atol=1e-9)
    assert fast_report.iterations == report.iterations
    assert fast_report.converged == report.converged
    assert fast_report.stopped_by == report.stopped_by
    np.testing.assert_allclose(fast_report.errors, report.errors, atol=1e-9)


#: These tests draw random skeletons and goals and keep the cases the lean path covers (`assume`): about two in
#: three draws are left out by design, so Hypothesis' "filtered too much" check can fail a run that happens to
#: draw many left-out cases first (one unexplained failure of this file in a random run led here).
SELECTED_CASES = [HealthCheck.too_slow, HealthCheck.filter_too_much]


@settings(max_examples=300, deadline=None, suppress_health_check=SELECTED_CASES)
@given(
    skeletons(max_bones=9, offsets=False, roots=2),
    st.integers(0, 2**32 - 1),
    st.integers(1, 3),
    st.sampled_from([1e-3, 1e-5]),
    st.booleans(),
)
def test_free_connected_trees_solve_as_fabrik_does(skeleton, seed, goal_count, tolerance, translate):
    """Random trees, partial chains, weights, targets in and out of reach, moved bases: the same rotations."""
    rng = np.random.default_rng(seed)
    n = len(skeleton)
    rotations = random_rotations(rng, n, 1.0)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 1.5))
    goals = []
    for _ in range(goal_count):
        bone = int(rng.integers(n))
        target = reach.tails[bone] * (3.0 if rng.random() < 0.2 else 1.0)
        goals.append(Goal(bone, tuple(target), float(rng.uniform(0.2, 2.0)), int(rng.integers(0, 4))))
    tree = moving_tree(skeleton, goals)
    assume(not tree.needs_frames and local_solve.applies(tree, goals) and batch.supports(skeleton, goals))
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=tolerance)
    assert_same(*solve_both(skeleton, goals, rotations, locations, solve_settings))


@settings(max_examples=200, deadline=None, suppress_health_check=SELECTED_CASES)
@given(skeletons(max_bones=9, offsets=True, roots=2), st.integers(0, 2**32 - 1), st.integers(1, 3), st.booleans())
def test_free_trees_with_offsets_solve_as_fabrik_does_or_hand_over(skeleton, seed, goal_count, translate):
    """Bones hanging off their parents' tails: where FABRIK's descent converges, the same rotations and report;
    where it does not, no answer (the general path refines), and fabrik.solve needed more than that descent."""
    rng = np.random.default_rng(seed)
    n = len(skeleton)
    rotations = random_rotations(rng, n, 1.0)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 1.0))
    goals = [Goal(int(b), tuple(reach.tails[b]), float(rng.uniform(0.2, 2.0)), int(rng.integers(0, 4)))
             for b in rng.integers(n, size=goal_count)]
    tree = moving_tree(skeleton, goals)
    assume(tree.needs_frames and local_solve.applies(tree, goals) and batch.supports(skeleton, goals))
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=1e-4)
    fast, fast_report, slow, report = solve_both(skeleton, goals, rotations, locations, solve_settings)
    local = local_solve.local_tree(skeleton, tree)
    direct = all(p < 0 or local.parent_bone[k] == tree.bones[p] for k, p in enumerate(tree.parent))
    assert (fast is not None) == (direct and descent_converges(skeleton, goals, rotations, locations, solve_settings))
    if fast is not None:
        assert_same(fast, fast_report, slow, report)


def descent_converges(skeleton, goals, rotations, locations, solve_settings) -> bool:
    """Whether fabrik.solve's FABRIK descent on each part of a tree with offsets (goals that share no bones are
    solved apart) converges before it hands over; a part that carries no frames never hands over."""
    tree = moving_tree(skeleton, goals)
    around = skeleton.pose_from_local(rotations)
    start = skeleton.with_local_rotations(around, {b: rotations[b] for b in tree.bones}, locations)
    for group in fabrik.components(tree):
        part_goals = [goals[g] for g in group]
        part = moving_tree(skeleton, part_goals)
        poled = any(g.pole is not None for g in part_goals)
        if not (part.needs_frames or poled):
            continue
        window = 0 if poled else fabrik.SLOW_WINDOW  # (poles: FABRIK goes on)
        _, report = fabrik._solve_from(skeleton, part, part_goals, start, solve_settings, careful=True, window=window)
        if not report.converged:
            return False
    return True


@settings(max_examples=150, deadline=None, suppress_health_check=SELECTED_CASES)
@given(skeletons(max_bones=7, offsets=True, roots=1), st.integers(0, 2**32 - 1), st.integers(1, 2), st.booleans())
def test_free_trees_with_poles_solve_as_fabrik_does_or_hand_over(skeleton, seed, goal_count, translate):
    """Chains turned by poles (Blender's rule, then held through the passes): where FABRIK's careful descent
    converges, the same rotations and report; where it does not, no answer (the general path goes on)."""
    rng = np.random.default_rng(seed)
    n = len(skeleton)
    rotations = random_rotations(rng, n, 0.8)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 0.8))
    goals = [
        Goal(int(b), tuple(reach.tails[b]), 1.0, int(rng.integers(0, 4)), pole=tuple(rng.normal(size=3) * 3.0),
             pole_angle=float(rng.uniform(-np.pi, np.pi)))
        for b in rng.integers(n, size=goal_count)
    ]
    tree = moving_tree(skeleton, goals)
    assume(local_solve.applies(tree, goals) and not stretch.applies(skeleton, goals))
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=1e-4)
    fast, fast_report, slow, report = solve_both(skeleton, goals, rotations, locations, solve_settings)
    local = local_solve.local_tree(skeleton, tree)
    direct = all(p < 0 or local.parent_bone[k] == tree.bones[p] for k, p in enumerate(tree.parent))
    assert (fast is not None) == (direct and descent_converges(skeleton, goals, rotations, locations, solve_settings))
    if fast is not None:
        assert_same(fast, fast_report, slow, report)


def test_an_arm_with_a_pole_solves_as_fabrik_does():
    """A three-bone arm reaching with its elbow towards a pole: the plain-float solve gives fabrik.solve's pose."""
    skeleton = straight_chain(3, 1.0)
    rng = np.random.default_rng(3)
    rotations = random_rotations(rng, 3, 0.3)
    goal = Goal(2, (1.2, 0.4, 1.5), pole=(0.0, -3.0, 1.0), pole_angle=-np.pi / 2)
    fast, fast_report, slow, report = solve_both(skeleton, [goal], rotations, {}, SolveSettings(tolerance=1e-5))
    assert report.converged and fast is not None
    assert_same(fast, fast_report, slow, report)


def test_a_hand_pulled_through_its_palm_solves_as_fabrik_does():
    """Fingers hanging off the palm with the palm in their chains: the frames the passes carry give the rotations."""
    rng = np.random.default_rng(11)
    skeleton, tips = hand()
    rotations = random_rotations(rng, len(skeleton), 0.1)
    start = skeleton.pose_from_local(rotations)
    # Two moves of the hand as a whole: FABRIK's descent gets to the first, and crawls towards the second.
    for shift, converges in (((0.1, -0.1, 0.2), True), ((0.05, 0.02, 0.1), False)):
        goals = [Goal(t, tuple(start.tails[t] + np.array(shift)), 1.0, chain_length=4) for t in tips]
        tree = moving_tree(skeleton, goals)
        assert tree.needs_frames and local_solve.applies(tree, goals)
        solve_settings = SolveSettings(tolerance=1e-4)
        assert descent_converges(skeleton, goals, rotations, {}, solve_settings) == converges
        fast, fast_report, slow, report = solve_both(skeleton, goals, rotations, {}, solve_settings)
        if converges:
            assert report.converged
            assert_same(fast, fast_report, slow, report)
        else:
            assert fast is None, "where the descent crawls, the general path goes on"


def test_chains_and_a_hand_solve_as_fabrik_does():
    """A long chain (reached, out of reach, already there) and a hand with its fingers pulled at once."""
    rng = np.random.default_rng(7)
    skeleton = straight_chain(30, 4.0 / 30)
    for target in [(1.0, 0.5, 2.0), (10.0, 0.0, 0.0), tuple(skeleton.rest_tails[29])]:
        at_rest = target[0] == skeleton.rest_tails[29][0]
        rotations = np.tile(np.eye(3), (30, 1, 1)) if at_rest else random_rotations(rng, 30, 0.2)
        goals = [Goal(29, target, chain_length=20)]
        assert_same(*solve_both(skeleton, goals, rotations, {}, SolveSettings(tolerance=1e-5)))
    skeleton, tips = hand()
    rotations = random_rotations(rng, len(skeleton), 0.3)
    reach = skeleton.pose_from_local(random_rotations(rng, len(skeleton), 0.6))
    goals = [Goal(t, tuple(reach.tails[t]), 1.0 + i, chain_length=3) for i, t in enumerate(tips)]
    assert local_solve.applies(moving_tree(skeleton, goals), goals)
    assert_same(*solve_both(skeleton, goals, rotations, {}, SolveSettings(tolerance=1e-5)))


def test_a_nearly_opposite_turn_keeps_the_careful_roll():
    """A bone that turns almost half round swings as matrix_rows.swung_frames swings it."""
    frame = quat.about_axis((0.0, 0.0, 1.0), 0.3)
    a = quat.y_axis(frame)
    b = quat.rotate(quat.about_axis(quat.x_axis(frame), np.pi - 1e-5), a)

    expected = matrix_rows.swung_frames(np.array([quat.to_matrix(frame)]), np.array([b]))[0]
    np.testing.assert_allclose(quat.to_matrix(local_solve._swung_half_round(frame, a, b)), expected, atol=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 12), st.integers(0, 2**32 - 1), st.floats(5.0, 60.0), st.booleans(), st.booleans(),
    st.sampled_from([1e-3, 1e-5]),
)
def test_chains_in_open_cones_solve_as_fabrik_does_or_hand_over(n, seed, degrees, twist_range, translate, tolerance):
    """One chain whose limits are open cones, from random start rotations (in and out of the cones) to random
    targets in and out of reach: where the lean solve answers (the free passes converged inside every cone), it
    answers what `fabrik.solve` does, tip twist included; where it hands over, `fabrik.solve` goes on."""
    rng = np.random.default_rng(seed)
    r = np.radians(degrees)
    cone = JointLimit(
        use_limit_x=True, min_x=-r * rng.uniform(0.5, 1.0), max_x=r, use_limit_z=True, min_z=-r, max_z=r * rng.uniform(0.5, 1.0),
        use_limit_y=twist_range, min_y=-0.5, max_y=0.5,
    )
    skeleton = straight_chain(n, 0.5).with_limits([None if rng.random() < 0.2 else cone for _ in range(n)])
    rotations = random_rotations(rng, n, 0.4)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 0.3))
    target = tuple(reach.tails[n - 1] * (1.5 if rng.random() < 0.2 else 1.0))
    goals = [Goal(n - 1, target)]
    tree = moving_tree(skeleton, goals)
    free = fabrik.open_cones_as_free(tree)
    assert free is not None and not any(limit is not None for limit in free.limits)
    assert local_solve.applies_open(free, goals)
    locations = {b: rng.normal(size=3) * 0.1 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(5, 60)), tolerance=tolerance)
    start = skeleton.with_local_rotations(skeleton.pose_from_local(rotations), {b: rotations[b] for b in tree.bones}, locations)
    pose, report = solve(skeleton, goals, start, solve_settings)
    moves = [tuple(locations[b].tolist()) if b in locations else None for b in tree.bones]
    solved = local_solve.solve_open(
        local_solve.local_tree(skeleton, free), tree.limits, goals,
        [quat.from_matrix(rotations[b].tolist()) for b in tree.bones], moves, [None] * n, solve_settings,
    )
    event("handed over" if solved is None else "answered")
    if solved is None:
        return
    fast = np.array([quat.to_matrix(q) for q in solved[0]])
    assert_same(fast, solved[1], skeleton.local_rotations(pose)[list(tree.bones)], report)
