# SPDX-License-Identifier: GPL-3.0-or-later
"""The limited solve's stages, each on its own; the stages the plan names for each rig class; one budget over
them all; and the nearest pose where several reach."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skeletons import arm6, finger, hinge, inside_limits, tentacle

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
from fabrik_addon.core.goals import pole
from fabrik_addon.core.math import quat
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.model.problem import SolveReport
from fabrik_addon.core.model.stopping import Budget
from fabrik_addon.core.model.tree import Joints, Start
from fabrik_addon.core.solving import methods, stages
from fabrik_addon.core.solving.parts import limited_stages
from fabrik_addon.core.solving.plan import plan_for
from fabrik_addon.core.solving.loop import JUMP, Solved, Solving

R = math.radians


def limb(pole: bool = True):
    """An arm of two bones: a shoulder in a cone, an elbow hinge; (skeleton, goal) with a target in reach."""
    shoulder = JointLimit(use_limit_x=True, min_x=R(-90), max_x=R(90), use_limit_z=True, min_z=R(-90), max_z=R(90))
    skeleton = skeleton_from_points([-1, 0], [(0, 0, 0), (0, 0, 0.5)], [(0, 0, 0.5), (0, 0, 1.0)]).with_limits(
        [shoulder, hinge(0, 150)]
    )
    return skeleton, Goal(1, (0.4, 0.2, 0.6), pole=(0.0, -2.0, 0.5) if pole else None)


def solving(skeleton, goals, settings=SolveSettings(), start=None, kept=None) -> Solving:
    """A solve of the skeleton's one limited part in progress, from `start` (default rest)."""
    plan = plan_for(skeleton, goals)
    part = plan.parts[0]
    begun = Start.of_pose(skeleton, part.tree, start if start is not None else skeleton.rest_pose())
    return Solving(skeleton, part.tree, goals, begun, settings, kept, part.free, part.stages)


def reachable(skeleton, seed: int):
    """A target some pose inside the limits reaches with the last bone's tail, and that pose."""
    pose = skeleton.pose_from_local(inside_limits(skeleton, np.random.default_rng(seed)))
    return tuple(pose.tails[len(skeleton) - 1]), pose


# The plan's choice.


def test_the_plan_names_each_rig_classes_stages():
    """A free chain runs FABRIK's passes (one with offsets hands over to the refinement), a robot arm refines its
    start first, a chain in open cones runs the free passes first, a limb with a pole
    takes its exact answer and settles into the pole's plane; from the last frame's pose a start near its targets
    settles a step onto them (not where a pole holds the plane), and a miss runs the frame's whole search."""
    s = stages
    arm, arm_goal = arm6(), [Goal(5, (0.5, 0.2, 1.0))]
    assert plan_for(arm, arm_goal).parts[0].stages == (s.refined, s.passes, s.other_starts)
    assert plan_for(arm, arm_goal).parts[0].warm == (s.followed, s.refined, s.passes, s.settled, s.searched)
    free, free_goal = skeleton_from_points([-1, 0], [(0, 0, 0), (0, 0, 1)], [(0, 0, 1), (0, 0, 2)]), [Goal(1, (1, 0, 1))]
    assert plan_for(free, free_goal).parts[0].stages == (methods.passes, methods.finished, methods.wandered)
    offset = skeleton_from_points([-1, 0], [(0, 0, 0), (0.3, 0, 1)], [(0, 0, 1), (0.3, 0, 2)])
    assert plan_for(offset, free_goal).parts[0].stages == (methods.offset_passes, methods.offsets_refined)
    chain, chain_goal = tentacle(12), [Goal(11, (0.3, 0.1, 1.0))]
    assert plan_for(chain, chain_goal).parts[0].stages == (s.free_passes, s.passes, s.refined, s.other_starts)
    assert plan_for(chain, chain_goal).parts[0].warm == (
        s.followed, s.refined_if_near, s.passes, s.settled, s.searched
    )
    bent, bent_goal = finger(), [Goal(2, (0.0, 0.06, 0.02))]
    assert plan_for(bent, bent_goal).parts[0].stages == (s.passes, s.refined, s.other_starts)
    arm_skeleton, goal = limb(pole=True)
    part = plan_for(arm_skeleton, [goal]).parts[0]
    assert part.stages == (s.exact_limb, s.passes, s.refined, s.other_starts, s.settled)
    assert part.warm == (s.exact_limb, s.refined_if_near, s.passes, s.settled, s.searched)
    unpoled = limb(pole=False)
    assert limited_stages(plan_for(unpoled[0], [unpoled[1]]).parts[0].tree, [unpoled[1]], False)[0] == s.followed


# Each stage on its own.


def test_exact_limb_answers_a_limb_in_one_step():
    """The limb's exact answer is the whole answer, reached in one iteration."""
    skeleton, goal = limb()
    s = solving(skeleton, [goal])
    stages.exact_limb(s)
    assert s.answer is not None and s.answer.report.converged and s.budget.used == 1


def test_free_passes_answer_a_chain_whose_cones_do_not_bind():
    """Wide open cones: FABRIK's free passes reach a target near the chain's line inside every cone."""
    skeleton = tentacle(12, 40.0)
    s = solving(skeleton, [Goal(11, (0.1, 0.05, 1.15))], SolveSettings(tolerance=1e-4))
    stages.free_passes(s)
    assert s.answer is not None and s.answer.report.converged


def test_free_passes_that_leave_a_cone_hand_their_pose_on():
    """Narrow cones: the free passes' pose leaves some cone, so it is not the answer; the next attempt goes on
    from it."""
    skeleton = tentacle(12, 5.0)
    s = solving(skeleton, [Goal(11, (0.6, 0.0, 0.8))], SolveSettings(tolerance=1e-4))
    stages.free_passes(s)
    assert s.answer is None and s.current is not s.start and s.budget.used > 0


def test_refined_reaches_from_the_start_as_it_is():
    """The refinement of the start in the limits' coordinates reaches a target in reach, with no FABRIK pass."""
    skeleton = arm6()
    target, _ = reachable(skeleton, 1)
    s = solving(skeleton, [Goal(5, target)], SolveSettings(tolerance=1e-4))
    stages.refined(s)
    assert s.reached and s.attempts == 1 and s.refined_first and s.best.rig is not None


def test_passes_reach_with_fabrik_then_the_refinement():
    """FABRIK's limited passes, finished by the refinement, reach a finger's target inside its limits."""
    skeleton = finger()
    target, _ = reachable(skeleton, 4)
    s = solving(skeleton, [Goal(2, target)], SolveSettings(tolerance=1e-5))
    stages.passes(s)
    assert s.reached and s.attempts == 1


def test_other_starts_try_random_poses_until_one_reaches():
    """Other starts inside the limits (after a first attempt that missed) find a pose that reaches; each counts
    as an attempt, within `restarts`."""
    skeleton = arm6()
    target, _ = reachable(skeleton, 2)
    s = solving(skeleton, [Goal(5, target)], SolveSettings(tolerance=1e-4, restarts=3))
    s.attempts, s.best = 1, Solved(SolveReport(0, [1.0], False, "stalled", rotation_errors=[0.0]), rig=None)
    stages.other_starts(s)
    assert s.reached and 2 <= s.attempts <= 4


def test_no_other_start_runs_beyond_reach_or_once_one_reached():
    """Beyond reach stretching is FABRIK's own move, and a pose that reached ends the search."""
    skeleton = arm6()
    s = solving(skeleton, [Goal(5, (5.0, 0.0, 0.0))])
    stages.passes(s)
    stages.other_starts(s)
    assert s.out_of_reach and s.attempts == 1
    target, _ = reachable(skeleton, 1)
    s = solving(skeleton, [Goal(5, target)], SolveSettings(tolerance=1e-4))
    stages.refined(s)
    stages.other_starts(s)
    assert s.reached and s.attempts == 1


def test_settled_turns_a_limb_into_its_poles_plane():
    """A pose that reaches turned off the plane its pole asks for (the refinement knows nothing of poles) is turned
    into it, still reaching."""
    skeleton, goal = limb()
    s = solving(skeleton, [goal], SolveSettings(tolerance=1e-5))
    stages.refined(s)
    assert s.reached

    def off_plane() -> float:
        rig = s.best.rig
        (hold,) = pole.holds(s.tree, Joints(s.tree, s.start, framed=True), s.goals, s.settings.tolerance)
        turn = pole.turn_for(hold, rig.heads[hold.chain[-1]], rig.frames[hold.chain[-1]])
        return 0.0 if turn is None else quat.angle_between(turn, quat.IDENTITY)

    assert off_plane() > R(1)
    stages.settled(s)
    assert s.best.report.converged and off_plane() < 1e-3


def test_followed_settles_a_kept_pose_one_step_onto_a_near_target():
    """From the last frame's pose near its target, one settling step reaches it: the whole answer."""
    skeleton = tentacle(12, 15.0)
    target, pose = reachable(skeleton, 3)
    nudged = (target[0] + 0.01, target[1], target[2])
    s = solving(skeleton, [Goal(11, nudged)], SolveSettings(tolerance=1e-4, explore=False), start=pose)
    stages.followed(s)
    assert s.answer is not None and s.answer.report.converged and s.budget.used <= 5


def test_searched_finds_what_the_warm_attempts_missed():
    """From the last frame's pose, where the warm attempts missed a target in reach, the frame's whole search
    reaches it, its iterations counted."""
    skeleton = arm6()
    target, _ = reachable(skeleton, 5)
    s = solving(skeleton, [Goal(5, target)], SolveSettings(tolerance=1e-4, explore=False))
    s.aim()
    s.best = Solved(SolveReport(7, [1.0], False, "stalled", rotation_errors=[0.0]), rig=None)
    s.budget.spend(7)
    stages.searched(s)
    assert s.answer is not None and s.answer.report.converged and s.budget.used > 7


def test_searched_is_not_run_again_for_targets_near_those_it_found_nothing_for():
    """From the last frame's pose, a target the limits keep the finger from (beside it, past the knuckle's spread,
    inside its reach): the whole search finds nothing and says for which targets. A later frame whose targets lie
    within `VAIN` of its chain's reach of those does not search again (along a path through what the limits do not
    reach, every frame would search in vain); one whose targets lie further off does, and reaches them."""
    skeleton = finger()
    settings = SolveSettings(tolerance=1e-5, explore=False)
    plan = plan_for(skeleton, [Goal(2, (0.0, 0.05, 0.0))])
    part = plan.parts[0]
    begun = Start.of_pose(skeleton, part.tree, skeleton.rest_pose())

    def searched(target, vain=None) -> Solving:
        s = Solving(skeleton, part.tree, [Goal(2, target)], begun, settings, None, part.free, part.stages, vain=vain)
        s.aim()
        assert not s.out_of_reach
        s.best = Solved(SolveReport(1, [1.0], False, "stalled", rotation_errors=[0.0]))
        s.budget.spend(1)
        stages.searched(s)
        return s

    beside = (0.07, 0.03, 0.0)
    first = searched(beside)
    assert first.answer is None and first.vain_now == (beside,) and first.budget.used > 1
    near = (0.07, 0.033, 0.0)  # (3 mm on: within VAIN of the finger's 9 cm reach)
    again = searched(near, vain=first.vain_now)
    assert again.budget.used == 1 and again.answer is None and again.vain_now is None
    target, _ = reachable(skeleton, 3)
    elsewhere = searched(target, vain=first.vain_now)
    assert elsewhere.answer is not None and elsewhere.answer.report.converged and elsewhere.vain_now is None


# The budget, and the nearest pose.


def test_one_budget_covers_every_stage():
    """Whatever the cap, a solve's iterations over all its stages stay within it."""
    skeleton = arm6()
    for cap in range(0, 12):
        for seed in range(4):
            target, _ = reachable(skeleton, 10 + seed)
            for explore in (True, False):
                _, report = solve(skeleton, [Goal(5, target)], None, SolveSettings(max_iterations=cap, explore=explore))
                assert report.iterations <= cap, (cap, seed, explore, report)
    budget = Budget(3)
    budget.spend(2)
    assert budget.left == 1 and not budget.spent and budget.why() == "stalled"
    budget.spend(2)
    assert budget.left == 0 and budget.spent and budget.why() == "max_iterations"


def test_of_two_poses_that_reach_the_nearer_the_start_is_kept():
    """`Solving.offer`: one that reaches beats one that misses; of two that reach, the nearer in joint angles."""
    skeleton = arm6()
    target, _ = reachable(skeleton, 1)
    s = solving(skeleton, [Goal(5, target)])
    tree, start = s.tree, s.start

    def turned(angle: float, report: SolveReport) -> Solved:
        frames = [quat.mul(quat.about_axis((0.0, 0.0, 1.0), angle), f) for f in start.frames]
        return Solved(report, frames, list(start.heads))

    missing = turned(0.0, SolveReport(1, [0.5], False, "stalled", rotation_errors=[0.0]))
    far = turned(R(90), SolveReport(1, [0.0], True, rotation_errors=[0.0]))
    near = turned(R(20), SolveReport(1, [0.0], True, rotation_errors=[0.0]))
    s.offer(missing)
    s.offer(far)
    assert s.best is far
    s.offer(near)
    assert s.best is near
    s.offer(far)
    assert s.best is near and max(s.turns(near)) == pytest.approx(R(20)) and len(s.turns(near)) == len(tree.bones)


def test_a_frame_that_jumps_from_the_last_says_so():
    """From the last frame's pose, an answer that turns a joint further than `JUMP` is reported as a jump; one
    near the start is not."""
    skeleton = arm6()
    target, pose = reachable(skeleton, 6)
    _, report = solve_from(skeleton, Goal(5, target), pose)
    assert report.converged and not report.jumped
    far = skeleton.pose_from_local(inside_limits(skeleton, np.random.default_rng(99)))
    solved, report = solve_from(skeleton, Goal(5, tuple(far.tails[5])), skeleton.rest_pose())
    turned = max(
        math.acos(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0)) for m in skeleton.local_rotations(solved)
    )
    assert turned > JUMP and report.jumped


def solve_from(skeleton, goal, start):
    """One solve from the last frame's pose."""
    return solve(skeleton, [goal], start, SolveSettings(tolerance=1e-4, explore=False))
