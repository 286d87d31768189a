# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint limits: cones, hinges, twist and stiffness, checked by code independent of the solver's projection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from limit_checks import assert_within, blender_limits, swing_and_twist
from skeletons import random_chain, skeletons, straight_chain

from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
from fabrik_addon.core.math import quat
from fabrik_addon.core.math.matrix_rows import quaternion_to_matrix
from fabrik_addon.core.model.limits import JointLimit, clamp_swing, constrain

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- strategies -------------------------------------------------------------------------------------------


def random_allowed_rotation(limit: JointLimit, rng: np.random.Generator) -> np.ndarray:
    """A random local rotation that satisfies the limit (for targets that are feasible by construction)."""
    lo_x, hi_x = limit.swing_range("x")
    lo_z, hi_z = limit.swing_range("z")
    for _ in range(100):
        sx, sz = rng.uniform(lo_x, hi_x), rng.uniform(lo_z, hi_z)
        if math.hypot(sx, sz) < math.pi and clamp_swing(limit, sx, sz) == (sx, sz):
            break
    else:
        sx, sz = 0.0, 0.0
    lo, hi = limit.twist_range()
    return np.array(quat.to_matrix(quat.from_swing_twist(sx, sz, rng.uniform(lo, hi))))


# --- the limits module on its own ----------------------------------------------------------------------


def test_inside_the_cone_nothing_changes():
    """A swing inside the ellipse is kept as it is."""
    limit = JointLimit(use_limit_x=True, min_x=-0.5, max_x=1.0, use_limit_z=True, min_z=-0.3, max_z=0.3)
    assert clamp_swing(limit, 0.4, 0.1) == (0.4, 0.1)


def test_outside_the_cone_lands_on_its_edge_in_the_right_quadrant():
    """Asymmetric ranges: each quadrant has its own semi-axes, the clamped swing sits on that ellipse."""
    limit = JointLimit(use_limit_x=True, min_x=-0.5, max_x=1.0, use_limit_z=True, min_z=-0.3, max_z=0.6)
    for sx, sz, a, b in [(2.0, 1.0, 1.0, 0.6), (-2.0, 1.0, 0.5, 0.6), (-2.0, -1.0, 0.5, 0.3), (2.0, -1.0, 1.0, 0.3)]:
        x, z = clamp_swing(limit, sx, sz)
        assert (x / a) ** 2 + (z / b) ** 2 == pytest.approx(1.0)
        assert math.copysign(1, x) == math.copysign(1, sx) and math.copysign(1, z) == math.copysign(1, sz)


def test_a_locked_axis_makes_a_hinge():
    """Lock Z: the bone only swings about X, within its X range (an elbow's 0..145 degrees)."""
    elbow = JointLimit(lock_z=True, use_limit_x=True, min_x=0.0, max_x=math.radians(145))
    assert clamp_swing(elbow, 0.5, 0.7) == (0.5, 0.0)
    assert clamp_swing(elbow, -0.5, 0.2) == (0.0, 0.0)
    assert clamp_swing(elbow, 3.0, 0.0) == (pytest.approx(math.radians(145)), 0.0)


def test_twist_is_clamped_and_locked():
    """Twist about Y is kept in its range; locking Y removes it."""
    q = quat.from_swing_twist(0.3, -0.2, 1.2)
    limited = constrain(JointLimit(use_limit_y=True, min_y=-0.5, max_y=0.5), q)
    assert quat.swing_twist(limited)[2] == pytest.approx(0.5)
    locked = constrain(JointLimit(lock_y=True), q)
    assert quat.swing_twist(locked)[2] == pytest.approx(0.0, abs=1e-12)
    assert quat.swing_twist(locked)[:2] == pytest.approx((0.3, -0.2))


def test_stiffness_holds_back_part_of_a_turn():
    """With stiffness s, a pass turns the bone (1 - s) of the way from where it was."""
    limit = JointLimit(stiffness_x=0.75)
    turned = constrain(limit, quat.from_swing_twist(0.8, 0.0, 0.0), previous=quat.IDENTITY)
    assert quat.swing_twist(turned)[0] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "values, message",
    [
        ({"min_x": 0.5, "max_x": 0.1}, "min 28.6 > max 5.7"),
        ({"min_z": float("nan")}, "not a finite number"),
        ({"max_y": float("inf")}, "not a finite number"),
        ({"stiffness_x": 1.5}, "outside 0..1"),
        ({"stiffness_z": -0.1}, "outside 0..1"),
    ],
)
def test_nonsense_limits_are_refused_with_a_clear_message(values, message):
    """min > max, NaN and stiffness outside 0..1 raise ValueError naming the axis."""
    with pytest.raises(ValueError, match=message):
        JointLimit(**values)


# --- the solver under limits -------------------------------------------------------------------------


@PROPERTY
@given(
    skeletons(max_bones=10, trees=True, offsets=True),
    st.lists(st.one_of(st.none(), blender_limits()), min_size=10, max_size=10),
    st.data(),
)
def test_every_solved_pose_satisfies_every_limit(skeleton, limits, data):
    """Random rigs, limits and targets: each moving bone's local rotation is inside its limit."""
    n = len(skeleton)
    skeleton = skeleton.with_limits(limits[:n])
    tips = data.draw(st.lists(st.sampled_from(range(n)), min_size=1, max_size=3, unique=True))
    goals = [Goal(t, data.draw(st.tuples(*[st.floats(-8, 8)] * 3)), 1.0, data.draw(st.integers(0, 3))) for t in tips]
    pose, report = solve(skeleton, goals, settings=SolveSettings(max_iterations=40))
    assert all(math.isfinite(e) for e in report.errors)
    local = skeleton.local_rotations(pose)
    np.testing.assert_allclose(np.linalg.norm(pose.tails - pose.heads, axis=1), skeleton.lengths, rtol=1e-9)
    for bone, limit in enumerate(skeleton.limits):
        if limit is not None:
            assert_within(limit, local[bone], f"bone {bone}")


def test_feasible_targets_are_reached_in_most_cases():
    """Targets made by FK from random poses inside the limits: at least 95 % reached (chains up to 10 bones)."""
    rng = np.random.default_rng(42)
    reached = trials = 0
    for _ in range(300):
        n = int(rng.integers(2, 11))
        skeleton = _limited_chain(rng, n)
        local = np.array([random_allowed_rotation(skeleton.limits[i], rng) for i in range(n)])
        target = skeleton.pose_from_local(local).tails[n - 1]
        tolerance = 1e-3 * skeleton.lengths.sum()
        _, report = solve(skeleton, [Goal(n - 1, tuple(target))], settings=SolveSettings(max_iterations=200, tolerance=tolerance))
        trials += 1
        reached += report.converged
    rate = reached / trials
    print(f"feasible targets reached: {reached}/{trials} = {rate:.1%}")
    assert rate >= 0.95


def _limited_chain(rng: np.random.Generator, n: int):
    """A connected chain with random directions and random Blender-style limits on every bone."""
    skeleton = random_chain(rng, n)
    limits = []
    for _ in range(n):
        kind = rng.integers(0, 3)
        if kind == 0:  # a cone
            limits.append(JointLimit(use_limit_x=True, min_x=-rng.uniform(0.2, 1.5), max_x=rng.uniform(0.2, 1.5),
                                     use_limit_z=True, min_z=-rng.uniform(0.2, 1.5), max_z=rng.uniform(0.2, 1.5)))
        elif kind == 1:  # a hinge
            limits.append(JointLimit(lock_z=True, use_limit_x=True, min_x=-rng.uniform(0.0, 2.0), max_x=rng.uniform(0.3, 2.5)))
        else:  # a cone with a twist range
            limits.append(JointLimit(use_limit_x=True, min_x=-1.0, max_x=1.0, use_limit_z=True, min_z=-0.6, max_z=0.6,
                                     use_limit_y=True, min_y=-0.5, max_y=0.5))
    return skeleton.with_limits(limits)


@pytest.mark.parametrize("seed", range(10))
def test_small_target_steps_give_small_joint_steps(seed):
    """Along a smooth path (warm-started, continuity mode) no joint flips between neighbouring frames.

    The path is made by forward kinematics from a smooth, periodic pose inside
    the limits, so every target is reachable and a nearby solution exists.
    """
    cone = JointLimit(use_limit_x=True, min_x=-1.0, max_x=1.0, use_limit_z=True, min_z=-0.7, max_z=0.7)
    n = 6
    skeleton = straight_chain(n, 0.5).with_limits([cone] * n)
    rng = np.random.default_rng(seed)
    phase, amplitude = rng.uniform(0, 2 * np.pi, (n, 2)), rng.uniform(0.2, 0.6, (n, 2))
    continuity = SolveSettings(explore=False)
    pose, worst, reached = None, 0.0, 0
    for step in range(300):
        a = 2 * np.pi * step / 300
        local = np.array([
            quat.to_matrix(quat.from_swing_twist(amplitude[i, 0] * math.sin(a + phase[i, 0]),
                                                 amplitude[i, 1] * math.sin(2 * a + phase[i, 1]), 0.0))
            for i in range(n)
        ])
        target = skeleton.pose_from_local(local).tails[n - 1]
        if pose is None:
            pose = skeleton.pose_from_local(local)
            continue
        previous = skeleton.local_rotations(pose)
        pose, report = solve(skeleton, [Goal(n - 1, tuple(target))], start=pose, settings=continuity)
        reached += report.converged
        change = np.einsum("nij,nik->njk", previous, skeleton.local_rotations(pose))
        worst = max(worst, float(np.arccos(np.clip((np.trace(change, axis1=1, axis2=2) - 1) / 2, -1, 1)).max()))
    print(f"seed {seed}: largest joint change between frames {math.degrees(worst):.1f} degrees, reached {reached}/299")
    assert worst < math.radians(45)
    assert reached >= 0.8 * 299


@pytest.mark.parametrize("degrees", [60, 90])
def test_planar_arm_with_hinges_stays_in_its_plane_and_range(degrees):
    """The seeds' playground: a planar arm, every joint a hinge about Z limited to +-60 (or +-90) degrees."""
    n = 4
    skeleton = skeleton_from_points([-1] + list(range(n - 1)), [(i, 0, 0) for i in range(n)], [(i + 1, 0, 0) for i in range(n)])
    hinge = JointLimit(lock_x=True, lock_y=True, use_limit_z=True, min_z=math.radians(-degrees), max_z=math.radians(degrees))
    axis = skeleton.rest_frames[0][:, 2]
    skeleton = skeleton.with_limits([hinge] * n)
    rng = np.random.default_rng(9)
    reached = 0
    for _ in range(100):
        local = [np.array(quat.to_matrix(quat.from_swing_twist(0.0, rng.uniform(-1.0, 1.0) * math.radians(degrees), 0.0))) for _ in range(n)]
        target = skeleton.pose_from_local(np.array(local)).tails[n - 1]
        pose, report = solve(skeleton, [Goal(n - 1, tuple(target))], settings=SolveSettings(max_iterations=200))
        reached += report.converged
        # Every joint stays in the plane the hinges span.
        np.testing.assert_allclose((pose.tails - skeleton.rest_heads[0]) @ axis, 0.0, atol=1e-9)
        for bone, matrix in enumerate(skeleton.local_rotations(pose)):
            assert_within(hinge, matrix, f"bone {bone}")
    assert reached >= 95


def test_a_stiff_bone_turns_less_and_the_target_is_still_reached():
    """Stiffness on the first bone moves the bend into the others."""
    free = straight_chain(4)
    stiff = free.with_limits({0: JointLimit(stiffness_x=0.9, stiffness_z=0.9)})
    goal = [Goal(3, (2.0, 0.0, 2.0))]
    loose_pose, loose_report = solve(free, goal, settings=SolveSettings(max_iterations=300))
    stiff_pose, stiff_report = solve(stiff, goal, settings=SolveSettings(max_iterations=300))
    assert loose_report.converged and stiff_report.converged

    def bend(pose):
        return math.acos(np.clip(pose.frames[0][:, 1] @ free.rest_frames[0][:, 1], -1, 1))

    assert bend(stiff_pose) < 0.5 * bend(loose_pose)


def test_the_root_bone_is_limited_relative_to_the_armature():
    """A root with a 20-degree cone keeps within 20 degrees of its rest direction, whatever the target."""
    cone = JointLimit(use_limit_x=True, min_x=-math.radians(20), max_x=math.radians(20),
                      use_limit_z=True, min_z=-math.radians(20), max_z=math.radians(20))
    skeleton = straight_chain(3).with_limits({0: cone})
    pose, _ = solve(skeleton, [Goal(2, (3.0, 0.0, 0.5))])
    tilt = math.degrees(math.acos(np.clip(pose.frames[0][:, 1] @ skeleton.rest_frames[0][:, 1], -1, 1)))
    assert tilt <= 20.0 + 1e-6
    assert tilt > 19.0  # it leans as far as it may towards a target far to the side


def test_quaternion_matrices_agree_with_numpy():
    """The tuple quaternion helpers agree with the numpy conversion used for poses."""
    rng = np.random.default_rng(1)
    for q in rng.normal(size=(50, 4)):
        q = quat.normalized(tuple(q))
        np.testing.assert_allclose(quat.to_matrix(q), quaternion_to_matrix(np.array(q)), atol=1e-12)
        sx, sz, twist = quat.swing_twist(q)
        assert swing_and_twist(np.array(quat.to_matrix(q))) == pytest.approx((sx, sz, twist), abs=1e-7)


def _cone(degrees: float) -> JointLimit:
    """A round swing cone of this half angle, twist free."""
    r = math.radians(degrees)
    return JointLimit(use_limit_x=True, min_x=-r, max_x=r, use_limit_z=True, min_z=-r, max_z=r)


def test_open_cones_solve_as_the_free_chain_does():
    """Where no cone binds, the limited passes would move every joint as the free passes do: the joints end where
    the paper's free chain puts them, in as many iterations, every joint inside its cone (the tentacle's case)."""
    free = straight_chain(20, 0.2)
    limited = free.with_limits([_cone(30.0)] * 20)
    settings = SolveSettings(max_iterations=200, tolerance=1e-4)
    for target in ((1.2, 0.3, 3.3), (-0.8, 1.0, 3.4), (0.9, -0.9, 3.2)):
        pose, report = solve(limited, [Goal(19, target)], settings=settings)
        free_pose, free_report = solve(free, [Goal(19, target)], settings=settings)
        swings = [math.hypot(*swing_and_twist(local)[:2]) for local in free.local_rotations(free_pose)]
        assert max(swings) < math.radians(30.0)  # (the case: the free chain's answer keeps inside the cones)
        assert report.converged and report.restarts == 0
        assert report.iterations == free_report.iterations
        np.testing.assert_allclose(pose.heads, free_pose.heads, atol=1e-12)
        np.testing.assert_allclose(pose.tails, free_pose.tails, atol=1e-12)
        local = limited.local_rotations(pose)
        for b in range(20):
            assert_within(limited.limits[b], local[b], f"bone {b}")


def test_where_cones_begin_to_bind_the_pose_moves_on_smoothly():
    """A target swept from where the free passes stay inside 10-degree cones to where the cones must bind: every
    solve reaches and keeps the limits, and no joint jumps between neighbouring targets where the solve changes
    from the free chain's answer to the limited one's (it goes on from the free chain's pose)."""
    n = 20
    skeleton = straight_chain(n, 0.2).with_limits([_cone(10.0)] * n)
    settings = SolveSettings(max_iterations=200, tolerance=1e-4)
    previous, worst = None, 0.0
    for step in range(200):
        angle = 0.2 + 1.3 * step / 199  # 0.37 degrees a step, round the base at 3.2 units
        target = (3.2 * math.sin(angle), 0.0, 3.2 * math.cos(angle))
        pose, report = solve(skeleton, [Goal(n - 1, target)], settings=settings)
        assert report.converged, f"step {step}: {report.stopped_by}"
        local = skeleton.local_rotations(pose)
        for b in range(n):
            assert_within(skeleton.limits[b], local[b], f"step {step}, bone {b}")
        if previous is not None:
            change = np.einsum("nij,nik->njk", previous, local)
            worst = max(worst, float(np.arccos(np.clip((np.trace(change, axis1=1, axis2=2) - 1) / 2, -1, 1)).max()))
        previous = local
    # (Measured: 1.4 degrees; 3.8 where the limited solve started again from the start pose instead.)
    assert worst < math.radians(2.0)
