# SPDX-License-Identifier: GPL-3.0-or-later
"""A chain's bend spread along it (`core.chain.bend`), and the exact answer of a two-bone limb inside its limits
(`core.solving.limb`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from limit_checks import assert_within, swing_and_twist
from skeletons import facing_error_degrees, straight_chain

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
from fabrik_addon.core.chain import bend
from fabrik_addon.core.math import quat
from fabrik_addon.core.model import limits
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.solving.plan import plan_for

SETTINGS = SolveSettings(max_iterations=200, tolerance=1e-4)


def _bent_chain(n: int, degrees: float = 5.0):
    """A chain of n unit bones up +Z, every joint bent `degrees` about X (a rig's chains are modelled a little
    bent), and that start pose."""
    skeleton = straight_chain(n)
    turn = quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), math.radians(degrees)))
    start = skeleton.with_local_rotations(skeleton.rest_pose(), {k: np.array(turn) for k in range(1, n)})
    return skeleton, start


def _bends(pose, n: int) -> list[float]:
    """The angle (degrees) between the bones meeting at each joint."""
    directions = [pose.frames[k][:, 1] for k in range(n)]
    return [math.degrees(math.acos(np.clip(a @ b, -1.0, 1.0))) for a, b in zip(directions, directions[1:])]


@pytest.mark.parametrize("n", [3, 4, 6, 8])
@pytest.mark.parametrize("pole", [None, (0.0, -4.0, 2.0)])
def test_a_chain_pulled_in_bends_evenly_in_one_step(n, pole):
    """From a start bent evenly a little, every joint takes the same share of the bend the target asks for (the
    smooth C Blender's IK makes, not a hook at the tip); the tip is on the target after the one step, and the
    pole's plane is kept."""
    skeleton, start = _bent_chain(n)
    for target in ((0.0, -1.2, 0.35 * n), (0.8, -0.9, 0.5 * n), (-0.6 * n, -0.2, 0.3 * n)):
        goal = Goal(n - 1, target) if pole is None else Goal(n - 1, target, pole=pole, pole_angle=-math.pi / 2)
        pose, report = solve(skeleton, [goal], start, SETTINGS)
        assert report.converged and report.iterations == 1, report
        assert np.linalg.norm(pose.tails[n - 1] - np.array(target)) < 1e-9
        bends = _bends(pose, n)
        assert max(bends) - min(bends) < 1e-6, bends
        if pole is not None:
            assert facing_error_degrees(pose, target, pose.heads[n // 2] - pose.heads[0], pole) < 0.5


def test_the_spread_keeps_the_start_shape_and_adds_to_it_evenly():
    """A start curved unevenly keeps its curve: each joint's bend grows by the same angle."""
    skeleton = straight_chain(4)
    bends = (0.1, 0.4, 0.2)
    start = skeleton.with_local_rotations(skeleton.rest_pose(), {
        k + 1: np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), b))) for k, b in enumerate(bends)
    })
    pose, report = solve(skeleton, [Goal(3, (0.3, -1.5, 2.4))], start, SETTINGS)
    assert report.converged and report.iterations == 1
    added = [math.radians(b) - a for a, b in zip(bends, _bends(pose, 4))]
    assert max(added) - min(added) < 1e-6 and added[0] > 0.0, added


def test_the_spread_on_rows_is_the_one_on_floats():
    """`spread_rows` puts every frame's joints where `spread` puts that frame's alone."""
    rng = np.random.default_rng(4)
    n, count = 5, 40
    length = rng.uniform(0.5, 1.5, n)
    directions = rng.normal(size=(count, n, 3)) * 0.3 + np.array([0.0, 0.0, 1.0])
    directions /= np.linalg.norm(directions, axis=2, keepdims=True)
    joints = np.concatenate((np.zeros((count, 1, 3)), np.cumsum(directions * length[None, :, None], axis=1)), axis=1)
    targets = rng.normal(size=(count, 3))
    targets *= (rng.uniform(0.2, 0.95, count) * length.sum() / np.linalg.norm(targets, axis=1))[:, None]
    heads = np.ascontiguousarray(joints[:, :-1].transpose(1, 2, 0))
    tails = np.ascontiguousarray(joints[:, 1:].transpose(1, 2, 0))
    moved = bend.spread_rows(heads, tails, length, np.ascontiguousarray(targets.T), np.ones(count, dtype=bool))
    found = 0
    for f in range(count):
        alone = bend.spread([tuple(p) for p in joints[f]], length.tolist(), tuple(targets[f]))
        assert (alone is not None) == moved[f]
        if alone is not None:
            found += 1
            np.testing.assert_allclose(tails[:, :, f], np.array(alone[0][1:]), atol=1e-9)
            np.testing.assert_allclose(tails[-1, :, f], targets[f], atol=1e-9)
    assert found > count // 2


def test_no_spread_where_the_chain_cannot_fold_so_far_the_passes_solve_it():
    """A long first bone and two short ones: bent evenly, the chain's ends never come nearer than about 1.5, though
    folding the short bones back brings them to 1. A target 1.19 from the base: the passes start from the chain as
    it was, and reach it."""
    skeleton = skeleton_from_points([-1, 0, 1], [(0, 0, 0), (0, 0, 2), (0, 0, 2.5)], [(0, 0, 2), (0, 0, 2.5), (0, 0, 3)])
    target = (0.3, 0.0, 1.15)
    assert bend.spread([(0, 0, 0), (0, 0, 2), (0, 0, 2.5), (0, 0, 3)], [2.0, 0.5, 0.5], target) is None
    pose, report = solve(skeleton, [Goal(2, target)], settings=SETTINGS)
    assert report.converged and report.iterations > 1


# The exact limb.

SHOULDER = JointLimit(use_limit_x=True, min_x=math.radians(-45), max_x=math.radians(130), use_limit_y=True,
                      min_y=math.radians(-90), max_y=math.radians(90), use_limit_z=True, min_z=math.radians(-90),
                      max_z=math.radians(90))
ELBOW = JointLimit(lock_y=True, lock_z=True, use_limit_x=True, min_x=0.0, max_x=math.radians(150))


def _limb(bend_degrees: float):
    """An upper arm and a forearm up +Z with a shoulder cone and an elbow hinge about X, the elbow bent at start."""
    skeleton = straight_chain(2).with_limits([SHOULDER, ELBOW])
    elbow = np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), math.radians(bend_degrees))))
    return skeleton, skeleton.with_local_rotations(skeleton.rest_pose(), {1: elbow})


@pytest.mark.parametrize("target", [(0.3, -0.8, 1.2), (0.9, 0.2, 0.9), (0.2, -0.3, 1.6)])
@pytest.mark.parametrize("pole", [None, (0.0, -3.0, 1.0), (0.0, 3.0, 1.0)])
def test_a_limb_with_an_elbow_hinge_is_solved_in_one_step_inside_its_limits(target, pole):
    """The law of cosines in the pole's plane (or the limb's own), the upper arm turned about itself so that the
    elbow bends about its hinge alone: one step, on the target, every limit kept, the elbow facing the pole."""
    skeleton, start = _limb(20.0)
    goal = Goal(1, target) if pole is None else Goal(1, target, pole=pole, pole_angle=-math.pi / 2)
    pose, report = solve(skeleton, [goal], start, SETTINGS)
    assert report.converged and report.iterations == 1, report
    assert np.linalg.norm(pose.tails[1] - np.array(target)) < 1e-9
    local = skeleton.local_rotations(pose)
    assert_within(SHOULDER, local[0], "shoulder")
    assert_within(ELBOW, local[1], "elbow")
    assert abs(swing_and_twist(local[1])[1]) < 1e-9 and abs(swing_and_twist(local[1])[2]) < 1e-9  # a hinge
    if pole is not None:
        assert facing_error_degrees(pose, target, pose.heads[1] - pose.heads[0], pole) < 0.5
    # The live path (a start from local rotations) takes the same step.
    plan = plan_for(skeleton, [goal])
    rotations = [tuple(quat.from_matrix(m)) for m in skeleton.local_rotations(start)]
    begun = plan.start(rotations, [None, None], [None, None], lambda: start)
    outcome = plan.solve([goal], begun, SETTINGS)
    assert outcome.report.iterations == 1 and outcome.report.converged
    np.testing.assert_allclose(np.array(quat.to_matrix(plan.rotations(begun, outcome)[1])), local[1], atol=1e-9)


def test_a_limb_whose_pole_plane_leaves_a_limit_swivels_to_the_nearest_plane_inside_it():
    """Where the pole's plane asks the elbow to bend against its hinge unless the upper arm turns about itself
    further than its twist range allows, the limb swivels about its base-target line (which moves neither the tip
    nor the elbow's bend) to the plane nearest the pole's that keeps the upper arm's limit: one step, on the
    target, every limit kept, and a degree further towards the pole's plane the upper arm would leave its limit."""
    skeleton, start = _limb(20.0)
    target, pole = (-0.6, -0.5, 1.4), (0.0, -3.0, 1.0)
    pose, report = solve(skeleton, [Goal(1, target, pole=pole, pole_angle=-math.pi / 2)], start, SETTINGS)
    assert report.converged and report.iterations == 1, report
    local = skeleton.local_rotations(pose)
    assert_within(SHOULDER, local[0], "shoulder")
    assert_within(ELBOW, local[1], "elbow")
    missed = facing_error_degrees(pose, target, pose.heads[1] - pose.heads[0], pole)
    assert missed > 1.0  # (the pole's own plane is out of the limits' reach here)
    line = np.array(target) / np.linalg.norm(target)
    nearer = []
    for degrees in (1.0, -1.0):
        turn = np.array(quat.to_matrix(quat.about_axis(tuple(line), math.radians(degrees))))
        elbow = turn @ (pose.heads[1] - pose.heads[0])
        if facing_error_degrees(pose, target, elbow, pole) < missed:
            upper = skeleton.rest_frames[0].T @ turn @ pose.frames[0]
            nearer.append(limits.allows(SHOULDER, quat.normalized(quat.from_matrix(upper.tolist()))))
    assert nearer == [False]


@pytest.mark.parametrize("pole", [None, (0.0, -3.0, 1.0)])
def test_a_limb_pulled_beyond_its_reach_reaches_for_the_nearest_point_in_one_step(pole):
    """A target beyond the limb's reach: it reaches for the nearest point it can, a hair inside its reach on the
    line to the target, in one step (where FABRIK's stretch would crawl towards straight), inside its limits, the
    elbow facing the pole; the report says it could not reach and by how far."""
    skeleton, start = _limb(20.0)
    target = (1.2, -1.1, 2.0)
    goal = Goal(1, target) if pole is None else Goal(1, target, pole=pole, pole_angle=-math.pi / 2)
    pose, report = solve(skeleton, [goal], start, SETTINGS)
    assert not report.converged and report.stopped_by == "unreachable" and report.iterations == 1, report
    reach = float(skeleton.lengths.sum())
    beyond = np.linalg.norm(target) - reach
    assert report.errors[0] == pytest.approx(np.linalg.norm(pose.tails[1] - np.array(target)), abs=1e-12)
    assert beyond <= report.errors[0] <= beyond + 2.0 * SETTINGS.tolerance
    line = np.array(target) / np.linalg.norm(target)
    assert np.linalg.norm(np.cross(pose.tails[1], line)) < 1e-6  # (on the line to the target)
    local = skeleton.local_rotations(pose)
    assert_within(SHOULDER, local[0], "shoulder")
    assert_within(ELBOW, local[1], "elbow")
    if pole is not None:
        assert facing_error_degrees(pose, target, pose.heads[1] - pose.heads[0], pole) < 0.5


def _hinge_limb(case: str):
    """A limb whose elbow hinge keeps its tip from some targets (`test_a_target_the_elbow_hinge_keeps_...`): the
    skeleton, its start, the elbow's limit, a target, and the nearest the tip can come to the base or furthest it can
    go from it (whichever the target is beyond)."""
    folds = case == "too near"
    elbow = ELBOW if folds else JointLimit(
        lock_y=True, lock_z=True, use_limit_x=True, min_x=math.radians(40), max_x=math.radians(150)
    )
    skeleton = straight_chain(2).with_limits([SHOULDER, elbow])
    turn = np.array(quat.to_matrix(quat.about_axis((1.0, 0.0, 0.0), math.radians(60.0))))
    start = skeleton.with_local_rotations(skeleton.rest_pose(), {1: turn})
    target = {"too near": (0.0, 0.15, 0.25), "too far": (0.3, -0.5, 1.86), "beyond its length": (0.4, -0.6, 2.2)}[case]
    bound = math.radians(150 if folds else 40)
    return skeleton, start, elbow, np.array(target), math.sqrt(2.0 + 2.0 * math.cos(bound))


@pytest.mark.parametrize(
    "pole, explore", [(None, True), ((0.0, -3.0, 1.0), True), ((0.0, -3.0, 1.0), False)],
    ids=["this frame's pose", "pole", "pole, previous solution"],
)
@pytest.mark.parametrize("case", ["too near", "too far", "beyond its length"])
def test_a_target_the_elbow_hinge_keeps_the_tip_from_is_reached_for_in_one_step(case, pole, explore):
    """Too near: the elbow folds 150 degrees at most, and the target is nearer the shoulder than the folded arm's
    tip. Too far: an elbow that cannot straighten past 40 degrees, and a target inside the arm's length but
    beyond that bend's reach (or beyond its length too). Either way the tip goes to the nearest point it can
    reach, on the line from the shoulder to the target, the elbow at the end of its range, in one step (where the limited method's descent stalls short of it), every limit kept, the elbow facing the pole; the
    report says it could not reach, by how far the target lies from that point: no pose of the arm comes nearer."""
    skeleton, start, elbow, target, tip_from_base = _hinge_limb(case)
    span = float(np.linalg.norm(target))
    assert (span < tip_from_base) if case == "too near" else (tip_from_base < span)
    goal = Goal(1, tuple(target)) if pole is None else Goal(1, tuple(target), pole=pole, pole_angle=-math.pi / 2)
    settings = SolveSettings(tolerance=SETTINGS.tolerance, explore=explore)
    pose, report = solve(skeleton, [goal], start, settings)
    assert not report.converged and report.stopped_by == "unreachable" and report.iterations == 1, report
    assert report.errors[0] == pytest.approx(np.linalg.norm(pose.tails[1] - target), abs=1e-12)
    assert report.errors[0] == pytest.approx(abs(span - tip_from_base), abs=2.0 * settings.tolerance)
    assert np.linalg.norm(np.cross(pose.tails[1], target / span)) < 1e-6  # (on the line to the target)
    local = skeleton.local_rotations(pose)
    assert_within(SHOULDER, local[0], "shoulder")
    assert_within(elbow, local[1], "elbow")
    bound = math.radians(150 if case == "too near" else 40)
    assert swing_and_twist(local[1])[0] == pytest.approx(bound, abs=1e-6)
    if pole is not None:
        assert facing_error_degrees(pose, target, pose.heads[1] - pose.heads[0], pole) < 0.5


@pytest.mark.parametrize("axis", ["x", "z"])
def test_the_hinge_sets_how_near_and_how_far_the_limbs_tip_can_be(axis):
    """How near the shoulder and how far from it the tip can be, as the limb works it out from the hinge's range
    and the forearm's rest (`limb._reaches`), against the tip's distance posed by forward kinematics over the
    range: random rests bent out of line and random ranges, some of which fold the forearm fully back or take it
    straight (the bend between the range's ends), most of which do not."""
    from fabrik_addon.core.model.tree import Start, moving_tree
    from fabrik_addon.core.solving import limb

    rng = np.random.default_rng(3 if axis == "x" else 4)
    for sample in range(20):
        bend = rng.uniform(-1.2, 1.2)
        lower = rng.uniform(0.3, 1.5)
        tail = (0.0, lower * math.sin(bend), 1.0 + lower * math.cos(bend)) if axis == "x" else (
            lower * math.sin(bend), 0.0, 1.0 + lower * math.cos(bend))
        low, high = sorted(rng.uniform(-math.pi, math.pi, 2))
        elbow = JointLimit(lock_y=True, **(
            dict(lock_z=True, use_limit_x=True, min_x=low, max_x=high) if axis == "x"
            else dict(lock_x=True, use_limit_z=True, min_z=low, max_z=high)
        ))
        skeleton = skeleton_from_points([-1, 0], [(0, 0, 0), (0, 0, 1)], [(0, 0, 1), tail]).with_limits([None, elbow])
        goal = Goal(1, (0.0, 0.5, 0.5))
        tree = moving_tree(skeleton, [goal])
        hinge = limb.hinge_axis(elbow)
        assert hinge == ((1.0, 0.0, 0.0) if axis == "x" else (0.0, 0.0, 1.0))
        nearest, furthest = limb._reaches(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()), hinge)
        distances = []
        for t in np.linspace(low, high, 2001):
            turn = np.array(quat.to_matrix(quat.about_axis(hinge, float(t))))
            pose = skeleton.pose_from_local(np.array([np.eye(3), turn]))
            distances.append(float(np.linalg.norm(pose.tails[1] - pose.heads[0])))
        assert nearest == pytest.approx(min(distances), abs=1e-4), sample
        assert furthest == pytest.approx(max(distances), abs=1e-4), sample
        assert nearest <= min(distances) + 1e-12 and max(distances) <= furthest + 1e-12, sample


def _cone(degrees: float) -> JointLimit:
    """A round swing cone of this half angle, twist free."""
    r = math.radians(degrees)
    return JointLimit(use_limit_x=True, min_x=-r, max_x=r, use_limit_z=True, min_z=-r, max_z=r)


def test_a_joint_the_even_bend_takes_out_of_its_cone_stops_on_the_rim_and_the_rest_bend_evenly():
    """A chain in open cones pulled in towards its base: the even bend would tilt the first joint back by half the
    whole bend (over 50 degrees), its cone allows 20. That joint stops on its cone's rim, the bones after it bend
    evenly onto the target (and so on down the chain): two steps, on the target, every cone kept; and on rows,
    the same joints."""
    n = 12
    skeleton = straight_chain(n, 0.2).with_limits([_cone(20.0)] * n)
    target = (0.2, 0.1, 1.9)
    free_pose, _ = solve(straight_chain(n, 0.2), [Goal(n - 1, target)], settings=SETTINGS)
    first = math.degrees(math.hypot(*swing_and_twist(straight_chain(n, 0.2).local_rotations(free_pose)[0])[:2]))
    assert first > 25.0  # (the case: the even bend leaves the first cone)
    pose, report = solve(skeleton, [Goal(n - 1, target)], settings=SETTINGS)
    assert report.converged and report.iterations == 2, report
    assert np.linalg.norm(pose.tails[n - 1] - np.array(target)) < 1e-9
    local = skeleton.local_rotations(pose)
    for b in range(n):
        assert_within(skeleton.limits[b], local[b], f"bone {b}")
    assert math.degrees(math.hypot(*swing_and_twist(local[0])[:2])) == pytest.approx(20.0, abs=1e-6)
    # (here the second joint leaves its cone too and stops on its rim: the joints after it bend evenly)
    assert math.degrees(math.hypot(*swing_and_twist(local[1])[:2])) == pytest.approx(20.0, abs=1e-6)
    later = _bends(pose, n)[2:]
    assert max(later) - min(later) < 1e-6, later
    # The rows' twin, from the same start.
    plan = plan_for(skeleton, [Goal(n - 1, target)])
    start = skeleton.rest_pose()
    points = np.concatenate((start.heads, start.tails[-1:]))[:, :, None].copy()
    frames = start.frames[None].copy()
    zero = skeleton.rest_in_parent[0][None]
    rest = np.array([skeleton.rest_in_parent[b] for b in range(n)])
    moved = bend.spread_within_rows(
        points, np.asarray(plan.tree.length), np.array(target)[:, None], frames, zero, rest, skeleton.limits,
        np.array([True]),
    )
    assert moved[0]
    np.testing.assert_allclose(points[1:, :, 0], pose.tails, atol=1e-9)
