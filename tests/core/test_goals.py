# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation goals and pole targets in the core solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skeletons import facing_error_degrees, straight_chain

from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core.math import quat
from fabrik_addon.core.solving.plan import plan_for


def up_vector(pose, angle: float) -> np.ndarray:
    """The first bone's up vector, X cos(angle) + Z sin(angle): what Blender's pole rule turns to face the pole."""
    return pose.frames[0][:, 0] * math.cos(angle) + pose.frames[0][:, 2] * math.sin(angle)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda q: sum(c * c for c in q) > 0.1))
def test_a_rotation_goal_turns_the_tip_bone_to_the_targets_frame(raw):
    """With full weight the tip bone's whole frame (direction and roll) matches the goal's.

    The target is close enough to the base that the other three bones can put
    the tip bone's head wherever the goal's direction needs it.
    """
    rotation = quat.normalized(raw)
    skeleton = straight_chain(4)
    pose, report = solve(skeleton, [Goal(3, (0.5, 0.3, 1.5), rotation=rotation)], settings=SolveSettings(max_iterations=200))
    assert report.converged, report
    np.testing.assert_allclose(pose.frames[3], quat.to_matrix(rotation), atol=1e-2)


def test_rotation_weight_blends_between_free_and_aligned():
    """Weight 0 leaves the tip free; weight 0.5 ends between the free direction and the goal's."""
    skeleton = straight_chain(4)
    goal_rotation = quat.about_axis((0.0, 0.0, 1.0), -math.pi / 2)  # the tip bone pointing along +X
    target = (1.0, 1.0, 2.0)
    free, _ = solve(skeleton, [Goal(3, target)])
    none, _ = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=0.0)])
    half, report = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=0.5)])
    full, _ = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=1.0)])
    assert report.converged
    y_goal = np.array(quat.y_axis(goal_rotation))

    def off(pose):
        return math.acos(np.clip(pose.frames[3][:, 1] @ y_goal, -1, 1))

    np.testing.assert_allclose(none.frames[3][:, 1], free.frames[3][:, 1], atol=1e-3)
    assert off(full) < 1e-2 < off(half) < off(free)


@pytest.mark.parametrize("pole", [(3.0, 0.0, 1.0), (0.0, -3.0, 1.0), (-2.0, 2.0, 0.5)])
@pytest.mark.parametrize("angle", [0.0, math.pi / 2, -math.pi / 3])
def test_the_pole_decides_which_way_the_chain_turns(pole, angle):
    """A chain straight at the start: Blender's turn puts its first bone's up vector X cos(angle) + Z sin(angle)
    on the pole (seen along the base-target line), and the chain bends that way: both knees face the pole."""
    skeleton = straight_chain(3)
    target = (0.4, 0.3, 2.2)
    pose, report = solve(skeleton, [Goal(2, target, pole=pole, pole_angle=angle)])
    assert report.converged, report
    assert facing_error_degrees(pose, target, up_vector(pose, angle), pole) < 0.5
    for knee in (pose.heads[1], pose.heads[2]):
        assert facing_error_degrees(pose, target, knee - pose.heads[0], pole) < 0.5


@pytest.mark.parametrize("pole", [(3.0, 0.0, 1.0), (0.0, -3.0, 1.0), (-2.0, 2.0, 0.5)])
def test_a_poled_limb_settles_on_its_triangle_facing_the_pole_without_passes(pole):
    """Two bones with a pole: turned by Blender's rule, the middle joint set on its triangle in that plane, the tip
    on the target. FABRIK's passes would leave them there, so none is run: 0 iterations, converged, the knee
    facing the pole, and the plan's solve from local rotations (the live path's) agreeing."""
    skeleton = straight_chain(2)
    target = (0.4, 0.3, 1.5)
    knee = np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), 0.6)))
    bent = skeleton.with_local_rotations(skeleton.rest_pose(), {1: knee})
    goal = Goal(1, target, pole=pole, pole_angle=-math.pi / 2)
    pose, report = solve(skeleton, [goal], bent)
    assert report.converged and report.iterations == 0, report
    assert np.linalg.norm(pose.tails[1] - np.array(target)) < 1e-9
    assert facing_error_degrees(pose, target, pose.heads[1] - pose.heads[0], pole) < 0.5
    # The live path's plain-float solver settles it the same way, without passes either.
    plan = plan_for(skeleton, [goal])
    rotations = [tuple(quat.from_matrix(m)) for m in skeleton.local_rotations(bent)]
    start = plan.start(rotations, [None, None], [None, None], lambda: bent)
    outcome = plan.solve([goal], start, SolveSettings())
    assert outcome.report.iterations == 0 and outcome.report.converged
    lean = plan.rotations(start, outcome)
    np.testing.assert_allclose(skeleton.local_rotations(pose)[1], quat.to_matrix(lean[1]), atol=1e-9)


def test_a_straight_chain_with_its_target_on_its_own_line_still_bends():
    """The paper's degenerate case: every joint and the target on one line. The chain bends (towards the pole)."""
    skeleton = straight_chain(3)
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 2.0))])
    assert report.converged, report
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 2.0), pole=(0.0, -3.0, 1.0))])
    assert report.converged and facing_error_degrees(pose, (0.0, 0.0, 2.0), pose.heads[1], (0.0, -3.0, 1.0)) < 0.5


def _bent_chain(rng: np.random.Generator, bones: int) -> tuple:
    """A straight chain of equal bones and a start pose bent at random (each joint up to 60 degrees)."""
    skeleton = straight_chain(bones)
    turns = {b: np.array(quat.to_matrix(quat.about_axis(tuple(_unit(rng.normal(size=3))), rng.uniform(0.1, 1.0))))
             for b in range(bones)}
    return skeleton, skeleton.with_local_rotations(skeleton.rest_pose(), turns)


def _unit(v: np.ndarray) -> np.ndarray:
    """v scaled to length 1."""
    return v / np.linalg.norm(v)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 4), st.floats(-math.pi, math.pi))
def test_holding_the_pole_never_changes_the_tips_distance_to_its_target(seed, bones, angle):
    """The pole's turn inside an iteration is about the base-target line: no tip gets nearer or farther.

    Checked on the step itself, after a forward pass (tip on the target) and
    after a backward one (tip anywhere), on bent chains with random targets
    (some out of reach), poles and pole angles.
    """
    from fabrik_addon.core.chain.fabrik import backward_reaching, forward_reaching
    from fabrik_addon.core.goals.pole import holds as pole_holds
    from fabrik_addon.core.goals.pole import turn_about_pole
    from fabrik_addon.core.model.tree import Joints, Start, moving_tree

    rng = np.random.default_rng(seed)
    skeleton, start = _bent_chain(rng, bones)
    target = tuple(rng.uniform(-1.5, 1.5, 3) * bones)
    goal = Goal(bones - 1, target, pole=tuple(rng.uniform(-3, 3, 3)), pole_angle=angle)
    tree = moving_tree(skeleton, [goal])
    joints = Joints(tree, Start.of_pose(skeleton, tree, start), framed=True)
    holds = pole_holds(tree, joints, [goal])
    for _ in range(3):
        forward_reaching(tree, joints, [goal.target], [1.0], [1.0] * bones)
        for reaching in (None, backward_reaching):
            before = np.linalg.norm(np.subtract(joints.tails[-1], goal.target))
            for hold in holds:
                turn_about_pole(tree, joints, hold)
            assert np.linalg.norm(np.subtract(joints.tails[-1], goal.target)) == pytest.approx(before, abs=1e-12)
            if reaching is not None:
                reaching(tree, joints)


@pytest.mark.parametrize("seed", range(12))
def test_a_pole_costs_no_reach(seed):
    """With a pole a chain still reaches every target in reach, and gets as near as its length allows to one out
    of reach: the pole only decides how it turns about the line to the target.

    (Out of reach, FABRIK straightens a chain that carries frames, as a pole
    needs, a little more every iteration, so the check lets it run on.)
    """
    rng = np.random.default_rng(seed)
    bones = 2 + seed % 3
    skeleton, start = _bent_chain(rng, bones)
    target = tuple(_unit(rng.normal(size=3)) * rng.uniform(0.3, 1.4) * bones)
    goal = Goal(bones - 1, target, pole=tuple(rng.uniform(-3, 3, 3)), pole_angle=rng.uniform(-3, 3))
    pose, report = solve(skeleton, [goal], start, SolveSettings(max_iterations=500, stall_fraction=0.0, patience=1000))
    if np.linalg.norm(target) >= bones:
        assert report.errors[0] == pytest.approx(np.linalg.norm(target) - bones, abs=1e-9)
    else:
        assert report.converged, report


@pytest.mark.parametrize(
    "goal, message",
    [
        (Goal(0, (0.0, 0.0, 1.0), rotation=(2.0, 0.0, 0.0, 0.0)), "unit quaternion"),
        (Goal(0, (0.0, 0.0, 1.0), rotation=(1.0, 0.0, 0.0, 0.0), rotation_weight=1.5), "rotation weight"),
        (Goal(0, (0.0, 0.0, 1.0), pole=(0.0, float("nan"), 0.0)), "pole that is not a finite"),
        (Goal(0, (0.0, 0.0, 1.0), pole=(0.0, 1.0, 0.0), pole_angle=float("inf")), "pole angle"),
    ],
)
def test_bad_rotation_and_pole_goals_are_refused(goal, message):
    """Nonsense rotations, weights and poles raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        solve(straight_chain(2), [goal])


def _torso():
    """Two arms from the collar (collar, upper arm, forearm) and a neck and head, all from one chest."""
    from fabrik_addon.core import skeleton_from_points

    parents = [-1, 0, 1, 0, 3, 4, 0, 6, 7]
    heads = [(0.0, 0.0, 0.0), (0.0, 0.0, 0.3), (0.0, 0.0, 0.4)]
    tails = [(0.0, 0.0, 0.3), (0.0, 0.0, 0.4), (0.0, 0.0, 0.6)]
    for side in (1.0, -1.0):  # collar (off the chest's tail), upper arm, forearm
        heads += [(0.02 * side, 0.0, 0.28), (0.18 * side, 0.0, 0.28), (0.46 * side, 0.0, 0.28)]
        tails += [(0.18 * side, 0.0, 0.28), (0.46 * side, 0.0, 0.28), (0.72 * side, 0.0, 0.28)]
    return skeleton_from_points(parents, heads, tails)


def test_a_poled_torso_with_a_target_beyond_reach_stretches_as_fabrik_does(monkeypatch):
    """With the head's target beyond all its chain could reach, stretching towards it is FABRIK's own move: the
    refinement does not take over (it would stop short of the best stretch), and the solve is FABRIK's."""
    from fabrik_addon.core.solving import methods

    skeleton = _torso()
    goals = [
        Goal(5, (0.35, -0.3, 0.05), chain_length=4, pole=(0.4, 0.6, 0.3)),
        Goal(8, (-0.3, -0.35, 0.1), chain_length=4, pole=(-0.4, 0.6, 0.3)),
        Goal(2, (0.1, -0.2, 0.68), chain_length=3),  # (the chest, neck and head reach 0.6)
    ]
    pose, report = solve(skeleton, goals)
    monkeypatch.setattr(methods, "CRAWL_WINDOW", 0)  # (FABRIK's passes alone)
    alone, alone_report = solve(skeleton, goals)
    assert not report.converged and report.errors == pytest.approx(alone_report.errors, abs=1e-12)
    np.testing.assert_allclose(pose.tails, alone.tails, atol=1e-12)


@pytest.mark.parametrize(
    "arm, head", [(4, (0.08, -0.1, 0.55)), (3, (0.2, -0.1, 0.52))], ids=["arms-through-the-chest", "arms-from-the-collar"]
)
def test_branches_with_poles_sharing_a_chest_converge_in_a_handful_of_iterations(arm, head):
    """Two arms from the collar with poles and a head chain through the chest, the arms' chains through the chest
    too or hanging from it: FABRIK's passes move the chest a share of the way its branches ask each iteration
    (here 35 to 40 iterations to converge), so once they crawl the refinement finishes and settling turns the arms
    back into their poles' planes: every goal reached in ten iterations at most, each arm turned the way its pole
    holds it."""
    from fabrik_addon.core.goals import pole
    from fabrik_addon.core.model.tree import Joints, Start

    skeleton = _torso()
    goals = [
        Goal(5, (0.35, -0.3, 0.05), chain_length=arm, pole=(0.4, 0.6, 0.3)),
        Goal(8, (-0.3, -0.35, 0.1), chain_length=arm, pole=(-0.4, 0.6, 0.3)),
        Goal(2, head, chain_length=3),
    ]
    pose, report = solve(skeleton, goals)
    assert report.converged and report.iterations <= 10, report
    for goal in goals:
        assert np.linalg.norm(pose.tails[goal.bone] - np.array(goal.target)) <= 1e-3 * 0.72
    plan = plan_for(skeleton, goals)
    (part,) = plan.parts
    tree = part.tree
    holds = pole.holds(tree, Joints(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()), framed=True), goals)
    assert len(holds) == 2
    for hold in holds:
        top = tree.bones[hold.chain[-1]]
        turn = pole.turn_for(hold, tuple(pose.heads[top]), quat.from_matrix(pose.frames[top]))
        assert turn is not None and math.degrees(2.0 * math.acos(min(1.0, abs(turn[0])))) < 1.0


def test_a_poled_torso_under_a_small_iteration_cap_keeps_the_cap_and_reports_what_it_reached(monkeypatch):
    """Under caps too small for the refinement to finish, the better of its pose and FABRIK's is kept: whatever
    the cap, the iterations counted stay within it, a solve reported converged has every tip on its target, and
    one that is not says why it stopped."""
    from fabrik_addon.core import SolveSettings
    from fabrik_addon.core.joints import refine

    skeleton = _torso()
    goals = [
        Goal(5, (0.35, -0.3, 0.05), chain_length=4, pole=(0.4, 0.6, 0.3)),
        Goal(8, (-0.3, -0.35, 0.1), chain_length=4, pole=(-0.4, 0.6, 0.3)),
        Goal(2, (0.08, -0.1, 0.55), chain_length=3),
    ]
    refined = []
    refine_solve = refine.solve
    monkeypatch.setattr(refine, "solve", lambda *a: refined.append(refine_solve(*a)) or refined[-1])
    for cap in range(1, 15):
        settings = SolveSettings(max_iterations=cap)
        pose, report = solve(skeleton, goals, settings=settings)
        assert report.iterations <= cap, (cap, report)
        errors = [np.linalg.norm(pose.tails[g.bone] - np.array(g.target)) for g in goals]
        assert report.converged == (max(errors) <= settings.tolerance), (cap, report)
        assert report.converged or report.stopped_by in ("stalled", "max_iterations"), (cap, report)
    # (the caps the refinement ran under, stopped short and finished)
    assert any(not r.converged for r in refined) and any(r.converged for r in refined)
