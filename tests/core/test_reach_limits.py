# SPDX-License-Identifier: GPL-3.0-or-later
"""Reach under joint limits: hinged fingers, a 6-axis arm and a tentacle reach targets a pose inside their
limits reaches, within one iteration budget, without breaking a limit, and warm starts stay continuous."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from limit_checks import assert_within, swing_and_twist
from skeletons import about, arm6, finger, inside_limits, tentacle

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points
from fabrik_addon.core.joints import refine, settle
from fabrik_addon.core.joints.angles import AngleRig, freedom
from fabrik_addon.core.joints.tree_goals import TreeGoals, goal_errors_of
from fabrik_addon.core.model.tree import Start, moving_tree
from fabrik_addon.core.solving import plan

R = math.radians


def assert_pose_within_limits(skeleton, pose, label: str) -> None:
    """Every limited bone's local rotation satisfies its limit (read by tests/support/limit_checks.py)."""
    for b, local in enumerate(skeleton.local_rotations(pose)):
        if skeleton.limits[b] is not None:
            assert_within(skeleton.limits[b], local, f"{label}, bone {b}")


@pytest.mark.parametrize(
    "build, share",
    [(finger, 0.95), (arm6, 0.95), (tentacle, 0.95)],
    ids=["finger", "arm6", "tentacle"],
)
def test_targets_a_pose_inside_the_limits_reaches_are_reached(build, share):
    """Random targets made by FK inside the limits, each solve from rest with the default 50 iterations."""
    skeleton = build()
    tip = len(skeleton) - 1
    reach = float(skeleton.lengths.sum())
    settings = SolveSettings(tolerance=1e-3 * reach)
    rng = np.random.default_rng(7)
    count, reached = 40, 0
    for sample in range(count):
        target = tuple(skeleton.pose_from_local(inside_limits(skeleton, rng)).tails[tip])
        pose, report = plan.solve(skeleton, [Goal(tip, target)], settings=settings)
        assert report.iterations <= settings.max_iterations
        assert report.converged == (report.max_error <= settings.tolerance)
        reached += report.converged
        assert_pose_within_limits(skeleton, pose, f"sample {sample}")
    assert reached >= share * count, f"reached {reached} of {count}"


def test_a_rotation_goal_on_the_flange_is_reached_with_its_roll():
    """Position and full orientation of the arm's flange, from targets made inside the limits."""
    skeleton = arm6()
    tip = len(skeleton) - 1
    settings = SolveSettings(tolerance=1e-3 * float(skeleton.lengths.sum()), max_iterations=100)
    rng = np.random.default_rng(3)
    count, reached = 20, 0
    for _ in range(count):
        made = skeleton.pose_from_local(inside_limits(skeleton, rng))
        rotation = _quaternion(made.frames[tip])
        pose, report = plan.solve(skeleton, [Goal(tip, tuple(made.tails[tip]), rotation=rotation)], settings=settings)
        if report.converged:
            reached += 1
            off = math.degrees(math.acos(np.clip((np.trace(pose.frames[tip].T @ made.frames[tip]) - 1) / 2, -1, 1)))
            assert off * math.pi / 180 * float(skeleton.lengths.sum()) <= settings.tolerance * 1.0001
        assert_pose_within_limits(skeleton, pose, "rotation goal")
    # Blender Standard reaches 61-67 % of such targets on the UR5 (benchmarks/limits.py).
    assert reached >= 0.8 * count, f"reached {reached} of {count}"


def _quaternion(m: np.ndarray) -> tuple[float, float, float, float]:
    """A unit quaternion (w, x, y, z) of a rotation matrix whose trace is not close to -1 (tests only)."""
    w = math.sqrt(max(0.0, 1 + m[0, 0] + m[1, 1] + m[2, 2])) / 2
    if w > 1e-3:
        return (w, (m[2, 1] - m[1, 2]) / (4 * w), (m[0, 2] - m[2, 0]) / (4 * w), (m[1, 0] - m[0, 1]) / (4 * w))
    x = math.sqrt(max(0.0, 1 + m[0, 0] - m[1, 1] - m[2, 2])) / 2
    return ((m[2, 1] - m[1, 2]) / (4 * x), x, (m[0, 1] + m[1, 0]) / (4 * x), (m[0, 2] + m[2, 0]) / (4 * x))


@pytest.mark.parametrize("cap", [1, 7, 50])
def test_the_iteration_cap_holds_for_the_whole_solve_restarts_included(cap):
    """A target inside the reach sphere that the limits cannot reach: stuck, restarts tried, never past the cap."""
    skeleton = finger()
    settings = SolveSettings(max_iterations=cap, tolerance=1e-6)
    pose, report = plan.solve(skeleton, [Goal(2, (0.0, -0.05, 0.0))], settings=settings)  # behind the knuckle
    assert not report.converged and report.stopped_by in ("stalled", "max_iterations")
    assert report.iterations <= cap
    assert_pose_within_limits(skeleton, pose, "stuck")


def test_an_unreachable_target_under_limits_is_recognised_at_once():
    """Beyond all the chain could reach: no restarts, well inside the budget, and about as close as the limits allow.

    The base bone only rolls, so the closest the arm gets is straight from the
    shoulder towards the target. No other start poses are tried for a target
    out of reach (that would spend the whole budget on every such frame), so
    the solve may settle in a nearby optimum of the limits instead: here the
    base rolls the near way round and the arm ends 0.5 % of its reach further
    off than the best pose, which rolls it the far way round.
    """
    skeleton = arm6()
    far = (3.0, 1.0, 2.0)
    pose, report = plan.solve(skeleton, [Goal(5, far)])
    assert report.stopped_by == "unreachable" and not report.converged and report.restarts == 0
    assert report.iterations < 50
    shoulder = (0.0, 0.0, 0.3)
    reach = float(skeleton.lengths.sum())
    closest = math.dist(far, shoulder) - (reach - 0.3)
    assert closest - 1e-9 <= report.max_error <= closest + 0.01 * reach
    assert_pose_within_limits(skeleton, pose, "unreachable")


def test_chains_that_share_no_bones_do_not_cost_each_other():
    """Two fingers side by side: one pulled somewhere it cannot go, the other solved exactly as on its own."""
    one, two = finger(), finger()
    parents = list(one.parents) + [p + 3 if p >= 0 else -1 for p in two.parents]
    heads = np.vstack((one.rest_heads, two.rest_heads + (0.03, 0, 0)))
    tails = np.vstack((one.rest_tails, two.rest_tails + (0.03, 0, 0)))
    both = skeleton_from_points(parents, heads, tails).with_limits(list(one.limits) + list(two.limits))
    reachable = tuple(one.pose_from_local(inside_limits(one, np.random.default_rng(1))).tails[2] + (0.03, 0, 0))
    stuck = Goal(2, (0.0, -0.05, 0.0))
    alone_pose, alone = plan.solve(both, [Goal(5, reachable)])
    pose, report = plan.solve(both, [stuck, Goal(5, reachable)])
    assert alone.converged and report.errors[1] == alone.errors[0]
    np.testing.assert_array_equal(pose.frames[3:], alone_pose.frames[3:])
    assert not report.converged and report.iterations <= SolveSettings().max_iterations


def test_a_roll_that_moves_no_goal_stays_where_it_was():
    """The flange roll cannot move the tool tip: without a rotation goal it keeps its start value, restarts or not."""
    skeleton = arm6()
    start_local = np.broadcast_to(np.eye(3), (6, 3, 3)).copy()
    start_local[5] = about((0.0, R(40), 0.0))
    start = skeleton.pose_from_local(start_local)
    rng = np.random.default_rng(5)
    for _ in range(10):
        target = tuple(skeleton.pose_from_local(inside_limits(skeleton, rng)).tails[5])
        pose, report = plan.solve(skeleton, [Goal(5, target)], start)
        _, _, twist = swing_and_twist(skeleton.local_rotations(pose)[5])
        assert twist == pytest.approx(R(40), abs=1e-9)


def test_warm_starts_follow_a_smooth_path_without_jumps_and_close_the_loop():
    """The previous solution as each frame's start (no exploring): joints turn smoothly and a loop comes back."""
    skeleton = arm6()
    settings = SolveSettings(tolerance=1e-4, explore=False)
    frames = 120
    path = [(0.6 + 0.25 * math.cos(a), 0.3 * math.sin(a), 1.0 + 0.2 * math.sin(2 * a)) for a in np.linspace(0, 2 * math.pi, frames + 1)]
    pose, first = None, None
    previous = skeleton.local_rotations(skeleton.rest_pose())
    worst = 0.0
    for i, target in enumerate(path):
        pose, report = plan.solve(skeleton, [Goal(5, target)], pose, settings)
        assert report.converged, f"frame {i}: {report}"
        local = skeleton.local_rotations(pose)
        if i == 0:
            first = local
        else:
            turn = np.einsum("nji,njk->nik", previous, local)
            worst = max(worst, max(math.acos(np.clip((np.trace(t) - 1) / 2, -1, 1)) for t in turn))
        previous = local
    assert math.degrees(worst) < 30.0
    # The path ends where it began, and so does the pose.
    np.testing.assert_allclose(previous, first, atol=1e-2)


def test_warm_starts_near_their_target_are_refined_first_and_fabrik_follows_where_that_stalls(monkeypatch):
    """Continuity mode refines a start near its target as it is (these random starts are far from settled, so
    one settling step seldom does); where that stalls (near the edge of what the cones reach), FABRIK's attempt
    follows, and it does reach some of those targets (the frame's whole search follows where it does not)."""
    skeleton = tentacle(12, 15.0)
    settings = SolveSettings(tolerance=1e-4, explore=False)
    reach = 1.2
    refinements = []
    solve_refinement = refine.solve
    monkeypatch.setattr(refine, "solve", lambda *a: refinements.append(solve_refinement(*a)) or refinements[-1])
    rng = np.random.default_rng(0)
    stalled = rescued = 0
    for _ in range(150):
        start = skeleton.pose_from_local(inside_limits(skeleton, rng))
        direction = rng.normal(size=3)
        target = tuple(start.tails[11] + direction / np.linalg.norm(direction) * reach * rng.uniform(0.01, 0.09))
        if np.linalg.norm(target) >= reach:
            continue  # (beyond reach FABRIK stretches towards it first)
        refinements.clear()
        _, report = plan.solve(skeleton, [Goal(11, target)], start, settings)
        if not refinements:
            assert report.converged  # (one settling step reached it: `settle.follow`)
            continue
        assert refinements[0].iterations > 0  # (refined from the start: no FABRIK pass before)
        if not refinements[0].converged:
            stalled += 1
            # FABRIK's attempt, then its refinement; where that stalls too, the frame's whole search follows
            assert len(refinements) == 2 or (len(refinements) > 2 and not refinements[1].converged)
            assert report.max_error <= refinements[0].errors[0]
            rescued += report.converged
        else:
            assert report.converged
    assert stalled and rescued


def test_a_warm_started_tentacle_follows_a_loop_a_step_a_frame_and_comes_back_to_the_same_poses():
    """Continuity mode on a chain in cones: from the pose the frame before settled, each frame reaches its target
    in one settling step (`settle.follow`, its leftover pull left to the next frame), turns no joint far, and
    the second round of a closed path gives the first round's poses."""
    skeleton = tentacle(30, 15.0)
    settings = SolveSettings(tolerance=1e-4, explore=False)
    frames = 90
    angles = np.linspace(0, 2 * math.pi, frames, endpoint=False)
    path = [(0.9 + 0.4 * math.cos(a), 0.4 * math.sin(a), 2.2) for a in angles]
    pose, rounds, steps = None, [], []
    for _ in range(3):
        poses = []
        for target in path:
            pose, report = plan.solve(skeleton, [Goal(29, target)], pose, settings)
            assert report.converged
            steps.append(report.iterations)
            poses.append(skeleton.local_rotations(pose))
        rounds.append(poses)
    followed = steps[frames:]  # (the first round starts from rest, far from its first target)
    assert np.median(followed) <= 2 and max(followed) <= 10
    worst = max(
        math.acos(np.clip((np.trace(a.T @ b) - 1) / 2, -1, 1))
        for before, after in zip(rounds[1], rounds[1][1:]) for a, b in zip(before, after)
    )
    assert math.degrees(worst) < 10.0
    for second, third in zip(rounds[1], rounds[2]):
        np.testing.assert_allclose(third, second, atol=1e-3)


@pytest.mark.parametrize("bones", [12, 24])
def test_follow_reaches_a_nearby_target_in_one_step_and_leaves_a_far_one_to_the_solver(bones, monkeypatch):
    """`settle.follow` from a settled pose: a target moved a little is reached by one settling step (two
    iterations at most); one moved far is not (its corrections stop cutting the error, even with a Jacobian made
    afresh), and the rig is put back as it was. A chain of many joints (24 bones: numpy's path) corrects with the
    step's own Jacobian, so the nearby target costs one linearisation; a small one makes each afresh. Every step
    counts against the budget: with one iteration the step is the whole follow."""
    skeleton = tentacle(bones, 15.0)
    scale = bones / 12
    settings = SolveSettings(tolerance=1e-4, explore=False)
    tip = bones - 1
    goal = Goal(tip, (0.3 * scale, 0.2 * scale, 1.0 * scale))
    settled, report = plan.solve(skeleton, [goal], None, settings)
    assert report.converged
    tree = moving_tree(skeleton, [goal])
    linearisations = []
    for name in ("linearised", "linearised_plain"):
        made = getattr(settle, name)
        monkeypatch.setattr(settle, name, lambda *args, made=made: linearisations.append(1) or made(*args))
    near, far = (0.31 * scale, 0.21 * scale, 1.0 * scale), (-0.6 * scale, 0.1, 0.5 * scale)
    for target, reached in ((near, True), (far, False)):
        problem = TreeGoals(tree, [Goal(tip, target)])
        rig = AngleRig(tree, Start.of_pose(skeleton, tree, settled))
        free = freedom(rig, problem)
        assert (len(free.coordinates) > refine.PLAIN_COORDINATES) == (bones == 24)
        before = rig.snapshot()
        linearisations.clear()
        steps, followed = settle.follow(rig, problem, settings.tolerance, 100)
        assert followed is reached
        errors, _ = goal_errors_of(rig, problem)
        if reached:
            assert steps == 2 and errors[0] <= settings.tolerance
            assert len(linearisations) == (1 if bones == 24 else 2)
        else:
            # The step, then corrections until one made afresh does not cut the error either.
            assert steps == len(linearisations) + (1 if bones == 24 else 0) == (3 if bones == 24 else 2)
            assert rig.snapshot() == before
        rig = AngleRig(tree, Start.of_pose(skeleton, tree, settled))
        assert settle.follow(rig, problem, settings.tolerance, 1) == (1, False)  # (no correction left to reach)


def test_settling_stops_where_it_crawls_nearly_as_near_its_aim_as_crawling_on():
    """Settling towards an aim the goals keep it from (rest, the tip held far from it) stops once its steps stall
    or crawl (each leaving over `settle.CRAWL` of the squared distance to the aim): a fraction of the iterations
    of crawling on, every goal still reached, and within a tenth as near the aim."""
    skeleton = tentacle(12, 15.0)
    goal = Goal(11, (-0.6, 0.1, 0.6))
    pose, report = plan.solve(skeleton, [goal], None, SolveSettings(tolerance=1e-4))
    assert report.converged
    tree = moving_tree(skeleton, [goal])
    problem = TreeGoals(tree, [goal])
    outcome = {}
    for crawl in (settle.CRAWL, 1.0):
        rig = AngleRig(tree, Start.of_pose(skeleton, tree, pose))
        free = freedom(rig, problem)
        used = settle.settle(rig, problem, 1e-4, 500, settle.rest_aim, crawl)
        assert goal_errors_of(rig, problem)[0][0] <= 1e-4
        outcome[crawl] = used, settle._away(rig.values(free), settle.rest_aim(rig, free), free.settling_weight)
    (used, away), (used_on, away_on) = outcome[settle.CRAWL], outcome[1.0]
    assert 2 * used < used_on and away <= 1.1 * away_on


def test_a_follow_that_does_not_reach_counts_its_iterations(monkeypatch):
    """A frame from the last one's pose whose settling step does not reach runs the whole solve from that pose;
    the step's iteration counts in the frame's report all the same."""
    skeleton = tentacle(12, 15.0)
    settings = SolveSettings(tolerance=1e-4, explore=False)
    settled, _ = plan.solve(skeleton, [Goal(11, (0.3, 0.2, 1.0))], None, settings)
    goal = Goal(11, (0.31, 0.21, 1.0))
    monkeypatch.setattr(settle, "CORRECTIONS", 0)  # (a step that needs a correction to reach, and gets none)
    follow, outcomes = settle.follow, []
    monkeypatch.setattr(settle, "follow", lambda *args: outcomes.append(follow(*args)) or outcomes[-1])
    pose, report = plan.solve(skeleton, [goal], settled, settings)
    assert outcomes == [(1, False)] and report.converged
    monkeypatch.setattr(settle, "follow", lambda *args: (0, False))
    again, without = plan.solve(skeleton, [goal], settled, settings)
    assert report.iterations == without.iterations + 1
    np.testing.assert_allclose(pose.tails, again.tails, atol=1e-12)  # (the same solve after it)


def test_the_same_start_and_targets_give_the_same_pose_every_time():
    """Restarts draw their start poses the same way on every solve, so a frame solves alike whenever it is shown."""
    skeleton = finger()
    goal = Goal(2, (0.0, -0.05, 0.0))  # behind the knuckle: stuck, so every restart runs
    first, report = plan.solve(skeleton, [goal])
    assert report.restarts > 0
    for _ in range(3):
        again, _ = plan.solve(skeleton, [goal])
        np.testing.assert_array_equal(again.frames, first.frames)
        np.testing.assert_array_equal(again.heads, first.heads)


def test_a_stiff_joint_turns_less_while_the_others_make_up_for_it():
    """Stiffness on the finger's middle hinge: the target is still reached, with the middle joint bent less."""
    skeleton = finger()
    stiff_middle = list(skeleton.limits)
    stiff_middle[1] = dataclasses.replace(stiff_middle[1], stiffness_x=0.9)
    stiff = skeleton.with_limits(stiff_middle)
    rng = np.random.default_rng(2)
    bent_less = 0
    for _ in range(10):
        target = tuple(skeleton.pose_from_local(inside_limits(skeleton, rng)).tails[2])
        free_pose, free = plan.solve(skeleton, [Goal(2, target)], settings=SolveSettings(tolerance=1e-5))
        stiff_pose, held = plan.solve(stiff, [Goal(2, target)], settings=SolveSettings(tolerance=1e-5))
        assert free.converged and held.converged
        bend = [abs(swing_and_twist(p)[0]) for p in (skeleton.local_rotations(free_pose)[1], stiff.local_rotations(stiff_pose)[1])]
        bent_less += bend[1] < bend[0] - 1e-3
    assert bent_less >= 7


def _turns_round_a_loop(skeleton, warm: bool, hold: int = 0) -> np.ndarray:
    """Each joint's whole turn, swing and twist (degrees, the twist's size) on every frame of a loop of targets the
    8-bone tentacle's tip follows, then of `hold` frames with the target still where the loop ends; each frame
    solved from the last one's pose (`warm`) or from rest, every target reached inside the limits. Shape
    (frames, bones, 3)."""
    settings = SolveSettings(tolerance=1e-4, explore=False)
    pose, turns = None, []
    for a in [*np.linspace(0.0, 2.0 * math.pi, 31), *[2.0 * math.pi] * hold]:
        target = (0.35 * math.cos(a), 0.35 * math.sin(a), 0.6)
        pose, report = plan.solve(skeleton, [Goal(7, target)], pose if warm else None, settings)
        assert report.converged
        local = skeleton.local_rotations(pose)
        for b, limit in enumerate(skeleton.limits):
            assert_within(limit, local[b], f"bone {b}")
        turns.append([
            (
                math.degrees(math.acos(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0))),
                math.degrees(math.hypot(*swing_and_twist(m)[:2])),
                abs(math.degrees(swing_and_twist(m)[2])),
            )
            for m in local
        ])
    return np.array(turns)


def _stiff(skeleton, axes: str, bones=(1, 2)):
    """The skeleton with `bones` stiff (0.9) about `axes`."""
    return skeleton.with_limits([
        dataclasses.replace(limit, **{f"stiffness_{axis}": 0.9 for axis in axes}) if b in bones else limit
        for b, limit in enumerate(skeleton.limits)
    ])


@pytest.mark.parametrize("axes", ["xyz", "xz"], ids=["stiff about every axis", "stiff in their swing"])
@pytest.mark.parametrize("warm", [True, False], ids=["from the last frame", "from rest"])
def test_stiff_joints_of_a_long_chain_turn_less_where_settling_moves_it(warm, axes):
    """A chain with more joints than its goal needs settles towards rest after it reaches (and a warm-started one
    moves by settling steps): stiffness weighs those steps too, so two stiff joints turn less about their stiff
    axes (every axis: their whole turn; X and Z: their swing) while the others make up for it."""
    skeleton = tentacle(8, 40.0)
    free = _turns_round_a_loop(skeleton, warm).mean(axis=0)
    held = _turns_round_a_loop(_stiff(skeleton, axes), warm).mean(axis=0)
    measure = 0 if axes == "xyz" else 1  # (the whole turn, or the swing)
    assert held[1, measure] + held[2, measure] < 0.5 * (free[1, measure] + free[2, measure])
    assert held[3:, 0].sum() > free[3:, 0].sum()  # the others bend more


def test_a_twist_left_pliant_settles_back_once_the_target_stops():
    """From the last frame's pose each frame takes one settling step, so what a moving target asks of a pliant
    twist beside stiff swings settles back over the frames after it stops: the twist of the two joints stiff in
    their swing shrinks on every still frame, to under a quarter within eight."""
    turns = _turns_round_a_loop(_stiff(tentacle(8, 40.0), "xz"), True, hold=8)
    twists = turns[30:, 1, 2] + turns[30:, 2, 2]  # from the loop's last frame on
    assert twists[0] > 1.0  # (something to settle)
    assert all(after < before for before, after in zip(twists, twists[1:])), twists
    assert twists[-1] < 0.25 * twists[0]


def test_a_warm_start_the_limits_hold_away_from_a_target_in_reach_still_reaches():
    """Continuity mode (Start From: Previous Solution) on the 6-axis arm: each solve starts from one random pose
    inside the limits towards a target another pose inside them reaches. Where the warm descent stalls in a pose
    the limits keep from the target, the frame's whole search (other starts) runs: every target is reached, every
    limit kept (without the search, some of these stall far short of their targets)."""
    skeleton = arm6()
    tip = len(skeleton) - 1
    settings = SolveSettings(max_iterations=200, tolerance=1e-4, explore=False)
    rng = np.random.default_rng(11)
    for sample in range(60):
        start = skeleton.pose_from_local(inside_limits(skeleton, rng))
        target = tuple(skeleton.pose_from_local(inside_limits(skeleton, rng)).tails[tip])
        pose, report = plan.solve(skeleton, [Goal(tip, target)], start, settings)
        assert report.converged, f"sample {sample}: {report}"
        assert report.iterations <= settings.max_iterations
        assert_pose_within_limits(skeleton, pose, f"sample {sample}")


def test_settling_keeps_only_steps_that_bring_the_joints_nearer_their_rest():
    """Settling slides a reached pose along the poses that reach towards rest. On six hinges the poses that reach
    curve away from the pull, so a whole step can overshoot rest, and each one after it further: a step that takes
    the joints no nearer rest is undone and a shorter one tried. Every step kept goes nearer rest (in settling's
    metric) and the goal stays reached."""
    from fabrik_addon.core.joints.angles import freedom

    skeleton = arm6()
    tip = len(skeleton) - 1
    tolerance = 1e-4 * float(skeleton.lengths.sum())
    rng = np.random.default_rng(3)
    settled = 0
    for _ in range(30):
        target = tuple(skeleton.pose_from_local(inside_limits(skeleton, rng)).tails[tip])
        goals = [Goal(tip, target)]
        tree = moving_tree(skeleton, goals)
        problem = TreeGoals(tree, goals)
        rig = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.pose_from_local(inside_limits(skeleton, rng))))
        if not refine.solve(rig, problem, tolerance, 100).converged:
            continue
        free = freedom(rig, problem)
        distances = [settle._away(rig.values(free), free.rest, free.settling_weight)]
        step = settle._settling_step

        def watched(*args, **kwargs):
            used, outcome, away = step(*args, **kwargs)
            if outcome:
                distances.append(settle._away(rig.values(free), free.rest, free.settling_weight))
            return used, outcome, away

        settle._settling_step = watched
        try:
            settle.settle(rig, problem, tolerance, 100)
        finally:
            settle._settling_step = step
        settled += 1
        assert all(after < before for before, after in zip(distances, distances[1:])), distances
        assert problem.reached(*goal_errors_of(rig, problem), tolerance)
    assert settled >= 20
