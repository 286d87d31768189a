# SPDX-License-Identifier: GPL-3.0-or-later
"""A root that moves: out of reach it moves just enough for the branches to reach (or balances them), free it
follows their pull by its weight, never beyond its distance and angle; the chains below it keep their shape
relative to it, and the pose the plan gives reaches the targets in armature space."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core.goals import root
from fabrik_addon.core.goals.floor import Floor
from fabrik_addon.core.math import quat
from fabrik_addon.core.model.skeleton import skeleton_from_points
from fabrik_addon.core.solving import rooted
from fabrik_addon.core.solving.plan import plan_for

HIPS, CHEST, ARM_L, FOREARM_L, ARM_R, FOREARM_R, THIGH_L, SHIN_L, THIGH_R, SHIN_R = range(10)


def body():
    """Hips (the root, at 1 m), a chest, two 2-bone arms from the chest and two 2-bone legs from the hips (elbows
    and knees bent a little: FABRIK's passes do not bend a chain pulled along its own straight line)."""
    parents = [-1, 0, 1, 2, 1, 4, 0, 6, 0, 8]
    heads = [(0, 0, 1.0), (0, 0, 1.1), (0.2, 0, 1.5), (0.5, 0.08, 1.5), (-0.2, 0, 1.5), (-0.5, 0.08, 1.5),
             (0.1, 0, 1.0), (0.1, 0.02, 0.5), (-0.1, 0, 1.0), (-0.1, 0.02, 0.5)]
    tails = [(0, 0, 1.1), (0, 0, 1.5), (0.5, 0.08, 1.5), (0.8, 0, 1.5), (-0.5, 0.08, 1.5), (-0.8, 0, 1.5),
             (0.1, 0.02, 0.5), (0.1, 0, 0.0), (-0.1, 0.02, 0.5), (-0.1, 0, 0.0)]
    names = ["hips", "chest", "arm.L", "forearm.L", "arm.R", "forearm.R", "thigh.L", "shin.L", "thigh.R", "shin.R"]
    return skeleton_from_points(parents, heads, tails, names)


def feet_and_hand(hand_target):
    """Both feet pinned where they stand, the left hand pulled to `hand_target`."""
    return [
        Goal(SHIN_L, (0.1, 0.0, 0.0), chain_length=2),
        Goal(SHIN_R, (-0.1, 0.0, 0.0), chain_length=2),
        Goal(FOREARM_L, hand_target, chain_length=2),
    ]


def settings(mode=root.OUT_OF_REACH, distance=1.0, angle=0.0, weight=0.5, floor=None, **more) -> SolveSettings:
    skeleton = body()
    moving = root.Root(HIPS, mode, weight, distance, angle, tuple(skeleton.rest_pose().heads[HIPS]))
    return SolveSettings(max_iterations=100, root=moving, floor=floor, **more)


def hips_move(pose, rest) -> float:
    return float(np.linalg.norm(pose.heads[HIPS] - rest.heads[HIPS]))


def test_out_of_reach_the_root_moves_just_enough_and_every_target_is_reached():
    skeleton = body()
    rest = skeleton.rest_pose()
    goals = [Goal(FOREARM_L, (1.0, 0.3, 1.4), chain_length=2)]  # (0.6 m reach from 0.2, 0, 1.5: beyond by ~0.25)
    fixed, fixed_report = solve(skeleton, goals, None, SolveSettings(max_iterations=100))
    assert not fixed_report.converged and fixed_report.stopped_by == "unreachable"
    pose, report = solve(skeleton, goals, None, settings())
    assert report.converged and report.max_error <= 1e-4
    np.testing.assert_allclose(pose.tails[FOREARM_L], goals[0].target, atol=1e-4)
    reach = 2.0 * math.hypot(0.3, 0.08)
    beyond = math.dist((0.2, 0.0, 1.5), goals[0].target) - reach * (1.0 - root.SLACK)
    assert hips_move(pose, rest) == pytest.approx(beyond, abs=1e-6)  # just enough: the arm ends nearly straight
    # The legs hang from the hips as they did: only the root's move moved them.
    np.testing.assert_allclose(pose.heads[SHIN_L] - pose.heads[HIPS], rest.heads[SHIN_L] - rest.heads[HIPS], atol=1e-9)


def test_out_of_reach_a_reachable_target_leaves_the_root_where_it_is():
    skeleton = body()
    rest = skeleton.rest_pose()
    pose, report = solve(skeleton, feet_and_hand((0.6, 0.3, 1.3)), None, settings())
    assert report.converged
    assert hips_move(pose, rest) == 0.0


def test_pinned_feet_and_a_hand_beyond_reach_balance_within_the_legs():
    """The hand pulls the hips forward; the pinned feet hold them back as far as the legs reach."""
    skeleton = body()
    rest = skeleton.rest_pose()
    goals = feet_and_hand((1.6, 0.0, 1.5))
    pose, report = solve(skeleton, goals, None, settings(distance=2.0))
    assert hips_move(pose, rest) > 0.05  # (it helped)
    legs = [math.dist(pose.heads[THIGH_L], goals[0].target), math.dist(pose.heads[THIGH_R], goals[1].target)]
    assert max(legs) <= skeleton.lengths[THIGH_L] + skeleton.lengths[SHIN_L] + 1e-3  # the feet still reachable
    assert report.errors[0] <= 1e-3 and report.errors[1] <= 1e-3
    assert not report.converged  # the hand misses, and says so


@pytest.mark.parametrize("distance", [0.0, 0.05, 0.1])
def test_the_root_never_moves_beyond_its_distance(distance):
    skeleton = body()
    rest = skeleton.rest_pose()
    pose, report = solve(skeleton, [Goal(FOREARM_L, (1.5, 0.0, 1.5), chain_length=2)], None, settings(distance=distance))
    assert hips_move(pose, rest) <= distance + 1e-9
    assert not report.converged


def test_the_root_turns_within_its_angle_to_help_a_hand_reach():
    skeleton = body()
    rest = skeleton.rest_pose()
    goals = [Goal(FOREARM_L, (0.2, 0.7, 1.5), chain_length=2)]  # in front, beyond the arm from the shoulder
    shifted, shifted_report = solve(skeleton, goals, None, settings(distance=0.0, angle=0.0))
    assert not shifted_report.converged
    pose, report = solve(skeleton, goals, None, settings(distance=0.0, angle=math.radians(60)))
    assert report.converged
    turned = pose.frames[HIPS] @ rest.frames[HIPS].T
    angle = math.acos(max(-1.0, min(1.0, (np.trace(turned) - 1.0) / 2.0)))
    assert 0.01 < angle <= math.radians(60) + 1e-9
    np.testing.assert_allclose(pose.heads[HIPS], rest.heads[HIPS], atol=1e-9)  # turned about its head, not moved
    # Limited to 5 degrees it turns that far and the hand misses honestly.
    pose, report = solve(skeleton, goals, None, settings(distance=0.0, angle=math.radians(5)))
    turned = pose.frames[HIPS] @ rest.frames[HIPS].T
    assert math.acos(max(-1.0, min(1.0, (np.trace(turned) - 1.0) / 2.0))) == pytest.approx(math.radians(5), abs=1e-6)
    assert not report.converged


@pytest.mark.parametrize("weight", [0.0, 0.5, 1.0])
def test_free_the_root_follows_its_share_of_the_pull(weight):
    skeleton = body()
    rest = skeleton.rest_pose()
    tip = rest.tails[FOREARM_L]
    pull = np.array([-0.2, 0.2, 0.0])  # (within the arm's reach)
    goals = [Goal(FOREARM_L, tuple(tip + pull), chain_length=2)]
    pose, report = solve(skeleton, goals, None, settings(mode=root.FREE, weight=weight))
    assert report.converged
    np.testing.assert_allclose(pose.heads[HIPS] - rest.heads[HIPS], weight * pull, atol=1e-9)


def test_free_with_pinned_feet_the_pull_is_shared_by_the_branch_weights():
    skeleton = body()
    rest = skeleton.rest_pose()
    tip = rest.tails[FOREARM_L]
    goals = feet_and_hand(tuple(tip + np.array([-0.15, 0.09, 0.0])))
    goals[0] = Goal(SHIN_L, (0.1, 0.0, 0.2), chain_length=2)  # (the knees bent: the legs reach after the move)
    goals[1] = Goal(SHIN_R, (-0.1, 0.0, 0.2), chain_length=2)
    pose, report = solve(skeleton, goals, None, settings(mode=root.FREE, weight=1.0))
    assert report.converged
    pulls = [np.array(g.target) - rest.tails[g.bone] for g in goals]  # (the feet pull up 0.2 each)
    np.testing.assert_allclose(pose.heads[HIPS] - rest.heads[HIPS], sum(pulls) / 3.0, atol=1e-9)
    assert pose.heads[HIPS][2] - rest.heads[HIPS][2] == pytest.approx(0.4 / 3.0)


def test_the_root_in_a_chain_is_refused():
    skeleton = body()
    with pytest.raises(ValueError, match="root bone 'hips' is in an effector's chain"):
        solve(skeleton, [Goal(FOREARM_L, (1.0, 0.0, 1.5), chain_length=0)], None, settings())


@pytest.mark.parametrize("bad", [{"distance": -1.0}, {"distance": math.nan}, {"weight": 2.0}, {"mode": "SIDEWAYS"}])
def test_meaningless_root_settings_are_refused(bad):
    skeleton = body()
    with pytest.raises(ValueError, match="root"):
        solve(skeleton, [Goal(FOREARM_L, (1.0, 0.0, 1.5), chain_length=2)], None, settings(**bad))


def test_a_chain_not_below_the_root_is_solved_where_it_is():
    """A root chosen below the top (the chest): the legs hang from the hips above it and do not move with it."""
    skeleton = body()
    rest = skeleton.rest_pose()
    moving = root.Root(CHEST, root.OUT_OF_REACH, 0.5, 1.0, 0.0, tuple(rest.heads[CHEST]))
    goals = feet_and_hand((1.2, 0.0, 1.5))
    plan = plan_for(skeleton, goals)
    assert rooted.below(plan, CHEST) == [False, False, True]
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=100, root=moving))
    assert report.converged
    np.testing.assert_allclose(pose.heads[HIPS], rest.heads[HIPS], atol=1e-12)
    assert math.dist(pose.heads[CHEST], rest.heads[CHEST]) > 0.1


def test_home_is_where_the_limits_are_measured_from():
    """A root the last frame left moved (its home: back where the animator has it) is measured from home."""
    skeleton = body()
    rest = skeleton.rest_pose()
    home = root.Move(quat.IDENTITY, (0.0, -0.05, 0.0), tuple(rest.heads[HIPS]), HIPS)
    moving = root.Root(HIPS, root.OUT_OF_REACH, 0.5, 0.02, 0.0, tuple(rest.heads[HIPS]), home)
    pose, _ = solve(skeleton, [Goal(FOREARM_L, (1.5, 0.0, 1.5), chain_length=2)], None, SolveSettings(root=moving))
    np.testing.assert_allclose(np.linalg.norm(pose.heads[HIPS] - (rest.heads[HIPS] + (0.0, -0.05, 0.0))), 0.02, atol=1e-9)


def test_the_floor_and_rotation_goals_are_carried_with_the_root():
    """Goals carried back by the move and moved forward again are the goals: a floor holds in armature space."""
    skeleton = body()
    level = Floor((0.0, 0.0, 0.0), (0.0, 0.0, 1.0))
    goals = feet_and_hand((1.3, 0.0, 1.2))
    pose, report = solve(skeleton, goals, None, settings(floor=level, angle=math.radians(20)))
    lowest = min(float(p[2]) for p in np.concatenate((pose.heads, pose.tails)))
    assert lowest >= -1e-4
    move = root.Move(quat.about_axis((0.0, 0.0, 1.0), 0.4), (0.1, 0.2, 0.0), (0.0, 0.0, 1.0), HIPS)
    spun = Goal(FOREARM_L, (1.0, 0.0, 1.0), rotation=quat.about_axis((1.0, 0.0, 0.0), 0.3), pole=(0.0, 1.0, 1.0))
    (back,), plane = root.carried(move, [spun], [True], level)
    np.testing.assert_allclose(move.apply(back.target), spun.target, atol=1e-12)
    np.testing.assert_allclose(move.apply(back.pole), spun.pole, atol=1e-12)
    assert quat.angle_between(quat.mul(move.rotation, back.rotation), spun.rotation) < 1e-9
    np.testing.assert_allclose(move.apply(plane.point), level.point, atol=1e-12)


@pytest.mark.parametrize("target", [(0.5, 0.9, 1.5), (0.3, 0.8, 1.2)])
def test_a_branch_its_limits_keep_short_takes_the_root_on_until_it_reaches(target, monkeypatch):
    """The shoulder in a 0.3 rad cone: a target ahead is further for the arm than its bones' length says, so the
    root goes on as far as the arm really reached (the rounds), and the hand reaches; in one round it misses."""
    from fabrik_addon.core.model.limits import JointLimit

    cone = JointLimit(use_limit_x=True, min_x=-0.3, max_x=0.3, use_limit_z=True, min_z=-0.3, max_z=0.3)
    skeleton = body().with_limits({ARM_L: cone})
    moving = root.Root(HIPS, root.OUT_OF_REACH, 0.5, 2.0, 0.0, tuple(skeleton.rest_pose().heads[HIPS]))
    goals = [Goal(FOREARM_L, target, chain_length=2)]
    pose, report = solve(skeleton, goals, None, SolveSettings(max_iterations=100, root=moving))
    assert report.converged, report
    np.testing.assert_allclose(pose.tails[FOREARM_L], target, atol=1e-4)
    monkeypatch.setattr(root, "ROUNDS", 1)
    _, once = solve(skeleton, goals, None, SolveSettings(max_iterations=100, root=moving))
    assert not once.converged and once.max_error > 0.05


@pytest.mark.parametrize("solver", ["CCD", "JACOBIAN_TRANSPOSE", "DLS", "TWO_BONE"])
def test_the_comparison_solvers_take_the_moving_root_too(solver):
    """The plan moves the root for every solver (they solve the chains against the carried goals): the hand
    beyond the arm is reached, the hips where FABRIK's plan puts them."""
    from fabrik_addon.core.model.tree import Start

    skeleton = body()
    rest = skeleton.rest_pose()
    goals = [Goal(FOREARM_L, (1.0, 0.3, 1.4), chain_length=2)]
    poses = {}
    for name in ("FABRIK", solver):
        plan = plan_for(skeleton, goals, name)
        start = Start.of_pose(skeleton, plan.tree, rest)
        solved = plan.solve(goals, start, replace(settings(), max_iterations=300))
        poses[name] = plan.pose(start, solved)
        assert np.linalg.norm(poses[name].tails[FOREARM_L] - goals[0].target) < 1e-3, (name, solved.report)
    np.testing.assert_allclose(poses[solver].heads[HIPS], poses["FABRIK"].heads[HIPS], atol=5e-3)
    assert hips_move(poses[solver], rest) > 0.2
