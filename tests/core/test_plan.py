# SPDX-License-Identifier: GPL-3.0-or-later
"""A plan solves from the nodes' local rotations (the live path's start, forward kinematics on plain floats) as it
solves from a whole pose (`core.solve`): the same local rotations and the same report, for every method."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from skeletons import hand, random_rotations, skeletons, straight_chain

from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core.chain import fabrik
from fabrik_addon.core.goals import stretch
from fabrik_addon.core.math import matrix_rows, quat
from fabrik_addon.core.model import tree as tree_types
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.model.tree import Start, components, moving_tree
from fabrik_addon.core.solving import many_frames
from fabrik_addon.core.solving.parts import FREE, LIMITED, OFFSETS, open_cones_as_free
from fabrik_addon.core.solving.plan import plan_for
from fabrik_addon.core.solving.stages import local_rotations_inside


def solve_both(skeleton, goals, rotations, locations, solve_settings):
    """(local rotations from the plan's solve from local rotations, its report, local rotations of the moving bones
    from `core.solve` on the whole pose, its report)."""
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    # The start as the bridge builds it: the moving bones' channels over a pose of the whole rig.
    around = skeleton.pose_from_local(rotations)
    start = skeleton.with_local_rotations(around, {b: rotations[b] for b in bones}, locations)
    pose, report = solve(skeleton, goals, start, solve_settings)
    slow = skeleton.local_rotations(pose)[bones]
    plan = plan_for(skeleton, goals)
    fixed = [
        (quat.from_matrix(around.frames[b].tolist()), tuple(around.heads[b].tolist()))
        if k < 0 and b >= 0 else None
        for k, b in zip(tree.parent, (skeleton.parents[b] for b in bones))
    ]
    moves = [tuple(locations[b].tolist()) if b in locations else None for b in bones]
    begun = plan.start([quat.from_matrix(rotations[b].tolist()) for b in bones], moves, fixed, lambda: start)
    outcome = plan.solve(goals, begun, solve_settings)
    fast = np.array([quat.to_matrix(q) for q in plan.rotations(begun, outcome)])
    return fast, outcome.report, slow, report


def assert_same(fast, fast_report, slow, report):
    np.testing.assert_allclose(fast, slow, atol=1e-9)
    assert fast_report.iterations == report.iterations
    assert fast_report.converged == report.converged
    assert fast_report.stopped_by == report.stopped_by
    np.testing.assert_allclose(fast_report.errors, report.errors, atol=1e-9)


def assert_alike(fast, fast_report, slow, report):
    """The same outcome where the path to it turns on rounding: converged or not alike, each goal's error to 1e-6."""
    assert fast_report.converged == report.converged
    np.testing.assert_allclose(fast_report.errors, report.errors, atol=1e-6)


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
    plan = plan_for(skeleton, goals)
    assume(not tree.needs_frames and not stretch.applies(skeleton, goals))
    assert all(p.method == FREE for p in plan.parts) and many_frames.on_rows(plan)
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=tolerance)
    assert_same(*solve_both(skeleton, goals, rotations, locations, solve_settings))


@settings(max_examples=200, deadline=None, suppress_health_check=SELECTED_CASES)
@given(skeletons(max_bones=9, offsets=True, roots=2), st.integers(0, 2**32 - 1), st.integers(1, 3), st.booleans())
def test_free_trees_with_offsets_solve_as_fabrik_does(skeleton, seed, goal_count, translate):
    """Bones hanging off their parents' tails: the same rotations and report, where FABRIK's descent converges and
    where the refinement finishes after it (both from the plan's one method)."""
    rng = np.random.default_rng(seed)
    n = len(skeleton)
    rotations = random_rotations(rng, n, 1.0)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 1.0))
    goals = [Goal(int(b), tuple(reach.tails[b]), float(rng.uniform(0.2, 2.0)), int(rng.integers(0, 4)))
             for b in rng.integers(n, size=goal_count)]
    tree = moving_tree(skeleton, goals)
    assume(tree.needs_frames and not stretch.applies(skeleton, goals))
    assert any(p.method == OFFSETS for p in plan_for(skeleton, goals).parts)
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=1e-4)
    solve_alike(skeleton, goals, rotations, locations, solve_settings, "refined")


def descent_converges(skeleton, goals, rotations, locations, solve_settings) -> bool:
    """Whether FABRIK's descent on each part of a tree with offsets (goals that share no bones are solved apart)
    converges before it hands over; a part that carries no frames never hands over."""
    tree = moving_tree(skeleton, goals)
    around = skeleton.pose_from_local(rotations)
    start = skeleton.with_local_rotations(around, {b: rotations[b] for b in tree.bones}, locations)
    for group in components(tree):
        part_goals = [goals[g] for g in group]
        part = moving_tree(skeleton, part_goals)
        poled = any(g.pole is not None for g in part_goals)
        if not (part.needs_frames or poled):
            continue
        window = 0 if poled else fabrik.SLOW_WINDOW  # (poles: FABRIK goes on)
        begun = Start.of_pose(skeleton, part, start)
        _, report = fabrik.solve_from(part, part_goals, begun, solve_settings, careful=True, window=window)
        if not report.converged:
            return False
    return True



def solve_alike(skeleton, goals, rotations, locations, solve_settings, otherwise: str) -> None:
    """Both solves alike: the same where FABRIK's descent converges, else (where the refinement's steps or plain
    FABRIK's wandering turn on comparisons of rounding) the same outcome, to 1e-6."""
    converges = descent_converges(skeleton, goals, rotations, locations, solve_settings)
    event("descent converges" if converges else otherwise)
    if converges:
        assert_same(*solve_both(skeleton, goals, rotations, locations, solve_settings))
    else:
        assert_alike(*solve_both(skeleton, goals, rotations, locations, solve_settings))

@settings(max_examples=150, deadline=None, suppress_health_check=SELECTED_CASES)
@given(skeletons(max_bones=7, offsets=True, roots=1), st.integers(0, 2**32 - 1), st.integers(1, 2), st.booleans())
def test_free_trees_with_poles_solve_as_fabrik_does(skeleton, seed, goal_count, translate):
    """Chains turned by poles (Blender's rule, then held through the passes): the same rotations and report,
    where FABRIK's careful descent converges and where plain FABRIK goes on after it."""
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
    assume(not tree.is_limited and not stretch.applies(skeleton, goals))
    locations = {b: rng.normal(size=3) * 0.3 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(1, 40)), tolerance=1e-4)
    solve_alike(skeleton, goals, rotations, locations, solve_settings, "went on")


def test_an_arm_with_a_pole_solves_as_fabrik_does():
    """A three-bone arm reaching with its elbow towards a pole: the plain-float solve gives `core.solve`'s pose."""
    skeleton = straight_chain(3, 1.0)
    rng = np.random.default_rng(3)
    rotations = random_rotations(rng, 3, 0.3)
    goal = Goal(2, (1.2, 0.4, 1.5), pole=(0.0, -3.0, 1.0), pole_angle=-np.pi / 2)
    fast, fast_report, slow, report = solve_both(skeleton, [goal], rotations, {}, SolveSettings(tolerance=1e-5))
    assert report.converged and fast is not None
    assert_same(fast, fast_report, slow, report)


def test_a_hand_pulled_through_its_palm_solves_as_fabrik_does():
    """Fingers hanging off the palm with the palm in their chains: the frames the passes carry give the rotations,
    where FABRIK converges and where the refinement finishes."""
    rng = np.random.default_rng(11)
    skeleton, tips = hand()
    rotations = random_rotations(rng, len(skeleton), 0.1)
    start = skeleton.pose_from_local(rotations)
    # Two moves of the hand as a whole: FABRIK's descent gets to the first, and crawls towards the second.
    for shift, converges in (((0.1, -0.1, 0.2), True), ((0.05, 0.02, 0.1), False)):
        goals = [Goal(t, tuple(start.tails[t] + np.array(shift)), 1.0, chain_length=4) for t in tips]
        tree = moving_tree(skeleton, goals)
        assert tree.needs_frames and plan_for(skeleton, goals).parts[0].method == OFFSETS
        solve_settings = SolveSettings(tolerance=1e-4)
        assert descent_converges(skeleton, goals, rotations, {}, solve_settings) == converges
        fast, fast_report, slow, report = solve_both(skeleton, goals, rotations, {}, solve_settings)
        assert_same(fast, fast_report, slow, report)


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
    assert plan_for(skeleton, goals).parts[0].method == FREE
    assert_same(*solve_both(skeleton, goals, rotations, {}, SolveSettings(tolerance=1e-5)))


def test_a_nearly_opposite_turn_keeps_the_careful_roll():
    """A bone that turns almost half round swings as matrix_rows.swung_frames swings it."""
    frame = quat.about_axis((0.0, 0.0, 1.0), 0.3)
    a = quat.y_axis(frame)
    b = quat.rotate(quat.about_axis(quat.x_axis(frame), np.pi - 1e-5), a)

    expected = matrix_rows.swung_frames(np.array([quat.to_matrix(frame)]), np.array([b]))[0]
    np.testing.assert_allclose(quat.to_matrix(tree_types._swung_half_round(frame, a, b)), expected, atol=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 12), st.integers(0, 2**32 - 1), st.floats(5.0, 60.0), st.booleans(), st.booleans(),
    st.sampled_from([1e-3, 1e-5]),
)
def test_chains_in_open_cones_solve_as_fabrik_does(n, seed, degrees, twist_range, translate, tolerance):
    """One chain whose limits are open cones, from random start rotations (in and out of the cones) to random
    targets in and out of reach: the same rotations and report, tip twist included, where the free passes
    converge inside every cone and where the limited solve goes on from them."""
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
    free = open_cones_as_free(tree)
    assume(tree.is_limited)
    assert free is not None and not any(limit is not None for limit in free.limits)
    assert plan_for(skeleton, goals).parts[0].method == LIMITED and many_frames.on_rows(plan_for(skeleton, goals))
    locations = {b: rng.normal(size=3) * 0.1 for b in tree.bones if translate and rng.random() < 0.5}
    solve_settings = SolveSettings(max_iterations=int(rng.integers(5, 60)), tolerance=tolerance)
    start = skeleton.with_local_rotations(skeleton.pose_from_local(rotations), {b: rotations[b] for b in tree.bones}, locations)
    begun = Start.of_pose(skeleton, tree, start)
    joints, passes = fabrik.solve_from(free, goals, begun, solve_settings, careful=True, window=fabrik.SLOW_WINDOW)
    answered = passes.converged and local_rotations_inside(
        tree, begun, begun.frames if joints is None else joints.final_frames(free, begun)
    ) is not None
    event("free passes answer" if answered else "the limited solve goes on")
    fast, fast_report, slow, report = solve_both(skeleton, goals, rotations, locations, solve_settings)
    if answered:  # (from there on the limited solve's refinement and restarts turn on comparisons of rounding)
        assert_same(fast, fast_report, slow, report)


@settings(max_examples=100, deadline=None, suppress_health_check=SELECTED_CASES)
@given(skeletons(max_bones=9, offsets=True, roots=2), st.integers(0, 2**32 - 1), st.integers(1, 3), st.booleans())
def test_a_frame_that_goes_on_from_the_last_solve_starts_where_forward_kinematics_puts_it(
    skeleton, seed, goal_count, translate
):
    """A continuous bake's next frame starts where the last solve left the nodes (`Plan.start_after`): where forward
    kinematics of that solve's local rotations puts them, with those rotations, worked out one by one or for
    many frames at once (`local.rotation_rows_from_zero`)."""
    from fabrik_addon.core.chain import local

    rng = np.random.default_rng(seed)
    n = len(skeleton)
    reach = skeleton.pose_from_local(random_rotations(rng, n, 1.5))
    goals = [
        Goal(bone, tuple(reach.tails[bone]), 1.0, int(rng.integers(0, 4)))
        for bone in rng.integers(n, size=goal_count).tolist()
    ]
    plan = plan_for(skeleton, goals)
    assume(plan.local.placed and not plan.whole and all(p.method != LIMITED for p in plan.parts))
    tree = plan.tree
    bones = list(tree.bones)
    around = skeleton.pose_from_local(random_rotations(rng, n, 1.0))
    fixed = [
        (quat.from_matrix(around.frames[b].tolist()), tuple(around.heads[b].tolist())) if k < 0 and b >= 0 else None
        for k, b in zip(tree.parent, (skeleton.parents[b] for b in bones))
    ]
    moves = [tuple(rng.normal(size=3) * 0.3) if translate and rng.random() < 0.5 else None for _ in bones]
    rotations = [quat.from_matrix(m) for m in random_rotations(rng, n, 1.0)[bones].tolist()]
    start = plan.start(rotations, moves, fixed, None)
    solved = plan.solve(goals, start, SolveSettings(max_iterations=20, tolerance=1e-5))
    assume(plan.goes_on(start, solved))
    after = plan.start_after(start, solved, list(moves), list(fixed))
    if any(m is not None and p >= 0 for m, p in zip(moves, tree.parent)):
        # A bone moved off its parent's tail by its location channel: forward kinematics places that one.
        assert after is None
        return
    local_rotations = plan.rotations(start, solved)
    again = plan.start(local_rotations, moves, fixed, None)
    for mine, theirs in ((after.frames, again.frames), (after.heads, again.heads), (after.tails, again.tails)):
        np.testing.assert_allclose(np.abs(np.array(mine)), np.abs(np.array(theirs)), atol=1e-9)
    np.testing.assert_allclose(after.rotations, local_rotations, atol=1e-12)
    rows = local.rotation_rows_from_zero(tree, np.array([start.zero] * 2), np.array([solved.frames] * 2))
    np.testing.assert_allclose(rows, np.array([local_rotations] * 2), atol=1e-12)
    # Anything it hangs from moved: not where the last solve left it.
    if any(f is not None for f in fixed):
        moved = [None if f is None else (f[0], (f[1][0] + 1.0, f[1][1], f[1][2])) for f in fixed]
        assert plan.start_after(start, solved, list(moves), moved) is None
