# SPDX-License-Identifier: GPL-3.0-or-later
"""The refinement's swing derivatives against finite differences of the swing itself."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabrik_addon.core.joints import refine, settle
from fabrik_addon.core.joints.angles import _swing_derivatives
from fabrik_addon.core.math import quat


def finite_difference(sx: float, sz: float, about_x: bool, step: float = 1e-6) -> np.ndarray:
    """The angular velocity of the swing exp(sx X + sz Z) when sx (or sz) grows, by central differences."""
    lower = quat.from_swing_twist(sx - step if about_x else sx, sz if about_x else sz - step, 0.0)
    upper = quat.from_swing_twist(sx + step if about_x else sx, sz if about_x else sz + step, 0.0)
    return np.array(quat.log(quat.mul(upper, quat.conj(lower)))) / (2.0 * step)


@pytest.mark.parametrize("about_x", [True, False])
def test_swing_derivatives_match_finite_differences(about_x):
    rng = np.random.default_rng(7)
    sx, sz = rng.uniform(-2.5, 2.5, 60), rng.uniform(-2.5, 2.5, 60)
    sx[:3], sz[:3] = 0.0, 0.0  # no swing at all: the axis itself
    sx[3], sz[3] = 1e-7, 0.0
    got = _swing_derivatives(sx, sz, np.full(60, about_x))
    want = np.array([finite_difference(a, b, about_x) for a, b in zip(sx, sz)])
    assert np.abs(got - want).max() < 1e-6


def test_start_twists_are_the_twists_a_whole_angle_rig_reads():
    """`start_twists` reads only the twists that move no goal (a leaf's roll), as `AngleRig` would from the
    whole start pose (the solver no longer poses the whole tree for them)."""
    from fabrik_addon.core import Goal, skeleton_from_points
    from fabrik_addon.core.joints.angles import AngleRig
    from fabrik_addon.core.joints.settle import start_twists
    from fabrik_addon.core.joints.tree_goals import TreeGoals
    from fabrik_addon.core.model.limits import JointLimit
    from fabrik_addon.core.model.tree import Start, moving_tree, posed

    count = 6
    heads = [(0.0, 0.0, 0.5 * i) for i in range(count)]
    tails = [(0.0, 0.0, 0.5 * (i + 1)) for i in range(count)]
    cone = JointLimit(use_limit_x=True, min_x=-0.6, max_x=0.6, use_limit_z=True, min_z=-0.4, max_z=0.4,
                      use_limit_y=True, min_y=-0.5, max_y=0.5)
    skeleton = skeleton_from_points(list(range(-1, count - 1)), heads, tails).with_limits({i: cone for i in range(count)})
    goals = [Goal(bone=count - 1, target=(0.5, 0.2, 2.0))]
    tree = moving_tree(skeleton, goals)
    problem = TreeGoals(tree, goals)
    assert problem.idle_twists  # the tip bone's roll moves no goal
    rng = np.random.default_rng(3)
    for _ in range(5):
        turned = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
        for k in range(len(tree.bones)):  # every joint turned inside its cone, the roll of the tip too
            turned.angles[k] = [rng.uniform(-0.4, 0.4), rng.uniform(-0.3, 0.3), rng.uniform(-0.45, 0.45)]
            turned.local[k] = quat.from_swing_twist(*turned.angles[k])
        turned.forward()
        start = Start.of_pose(skeleton, tree, posed(skeleton, tree, skeleton.rest_pose(), turned.frames, turned.heads))
        whole = AngleRig(tree, start)
        twists = start_twists(tree, problem, start)
        assert set(twists) == {k for k in problem.idle_twists if tree.limits[k] is not None}
        for k, twist in twists.items():
            assert abs(twist) > 1e-3  # (a roll to read back, not the rest's zero)
            assert twist == pytest.approx(whole.angles[k][2], abs=1e-12)


@pytest.mark.parametrize("limited, rotation_goal", [(True, False), (True, True), (False, False), (False, True)])
def test_the_plain_float_jacobian_is_numpys(limited, rotation_goal):
    """Small rigs build the refinement's Jacobian in plain floats, large ones in numpy: both give one matrix
    and one error vector (cones, hinges, free joints, a branch that moves only some coordinates, a rotation goal)."""
    from fabrik_addon.core import Goal, skeleton_from_points
    from fabrik_addon.core.joints.angles import AngleRig, freedom
    from fabrik_addon.core.joints.refine import linearised_plain
    from fabrik_addon.core.joints.tree_goals import TreeGoals
    from fabrik_addon.core.model.limits import JointLimit
    from fabrik_addon.core.model.tree import Start, moving_tree

    # A trunk of four bones and two branches of three: each goal is moved by the trunk and its own branch only.
    parents = [-1, 0, 1, 2, 3, 4, 5, 3, 7, 8]
    heads, tails = [], []
    for k, p in enumerate(parents):
        head = (0.0, 0.0, 0.0) if p < 0 else tails[p]
        side = 0.0 if k < 4 else (0.3 if k < 7 else -0.3)
        heads.append(head)
        tails.append((head[0] + side, head[1] + 0.1 * (k % 3), head[2] + 0.5))
    skeleton = skeleton_from_points(parents, heads, tails)
    if limited:
        cone = JointLimit(use_limit_x=True, min_x=-0.6, max_x=0.6, use_limit_z=True, min_z=-0.4, max_z=0.4,
                          use_limit_y=True, min_y=-0.5, max_y=0.5)
        hinge = JointLimit(lock_y=True, lock_z=True, use_limit_x=True, min_x=0.0, max_x=1.5)
        skeleton = skeleton.with_limits({k: (hinge if k % 2 else cone) for k in range(len(parents))})
    goals = [
        Goal(bone=6, target=(0.8, 0.2, 2.5), rotation=quat.about_axis((0.0, 0.0, 1.0), 0.4) if rotation_goal else None),
        Goal(bone=9, target=(-0.7, 0.1, 2.6), weight=0.5),
    ]
    tree = moving_tree(skeleton, goals)
    problem = TreeGoals(tree, goals)
    rng = np.random.default_rng(11)
    for _ in range(5):
        rig = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
        for k in range(len(tree.bones)):
            if rig.angles[k] is not None:
                rig.angles[k] = [rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.3), rng.uniform(-0.4, 0.4)]
                rig.local[k] = quat.from_swing_twist(*rig.angles[k])
            else:
                rig.local[k] = quat.exp(tuple(rng.uniform(-0.4, 0.4, 3)))
        rig.forward()
        free = freedom(rig, problem)
        table = rig.table(free)
        plain_j, plain_e = (np.array(a) for a in linearised_plain(rig, problem, free))
        plain_j = plain_j.reshape(-1, len(free.coordinates))
        saved = refine.PLAIN_COORDINATES
        refine.PLAIN_COORDINATES = -1  # the numpy path, whatever the size
        try:
            numpy_j, numpy_e = refine.linearised(rig, problem, free, table)
        finally:
            refine.PLAIN_COORDINATES = saved
        rows = 9 if rotation_goal else 6  # each goal's tip, then the rotation goal
        assert plain_j.shape == numpy_j.shape == (rows, len(free.coordinates))
        assert plain_e.shape == numpy_e.shape == (rows,)
        assert np.abs(plain_j).max() > 0.1 and (plain_j == 0.0).any()  # (something to compare, masked columns too)
        assert np.abs(plain_j - numpy_j).max() < 1e-12
        assert np.abs(plain_e - numpy_e).max() < 1e-12


@pytest.mark.parametrize("damping", [0.05, 1e-4])
def test_the_plain_float_step_is_numpys(damping):
    """Small refinements step in plain floats, large ones in numpy: from one Jacobian both take one step, with
    coordinates held on the bounds they are pushed past, swings sliding along their cones' rims, stiff columns,
    the longest move capped, and the smallest damping the refinement uses on a Jacobian that holding leaves short
    of full rank; with no rows (no goal pulls), no step."""
    from fabrik_addon.core.joints.refine import _bounded_step, _bounded_step_plain

    held = rimmed = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        m, n = (3, 6) if seed % 2 else (6, 9)
        if seed % 5 == 4:
            n = 4  # (three of four held: what is left has rank one)
        j = rng.normal(size=(m, n))
        e = rng.normal(size=m) * (0.05 if seed % 3 else 2.0)  # (the larger errors make steps that get capped)
        pliancy = np.where(rng.uniform(size=n) < 0.3, 0.2, 1.0)
        lo, hi = -np.ones(n), np.ones(n)
        values = rng.uniform(-0.5, 0.5, n)
        values[0], values[1] = lo[0], hi[1]  # on bounds, which the step may push past
        if n == 4:
            values[2] = lo[2]
        cones = []
        if n > 4:
            lo[2], hi[2] = -np.inf, np.inf  # a free joint's coordinate
            # A swing on its cone's rim (coordinates 3 and 4), its outward normal, either way round.
            cones = [(3, 4, tuple(np.array([0.6, 0.8]) * (1.0 if seed % 3 else -1.0)))]
        scaled = j * pliancy
        free = pliancy * np.linalg.lstsq(scaled, e, rcond=None)[0]  # (an unconstrained step, to see what holds)
        expected = pliancy * _bounded_step(scaled, e, damping, values, lo, hi, cones, pliancy)
        got = _bounded_step_plain(
            scaled.tolist(), e.tolist(), damping, values.tolist(), lo.tolist(), hi.tolist(), cones, pliancy.tolist()
        )
        assert np.abs(np.array(got) - expected).max() <= 1e-9 * max(1.0, np.abs(expected).max()), seed
        held += any(expected[i] == 0.0 and abs(free[i]) > 1e-6 for i in (0, 1))
        rimmed += bool(cones) and abs(expected[3]) > 1e-9 and abs(expected[4]) > 1e-9 and abs(
            cones[0][2][0] * expected[3] + cones[0][2][1] * expected[4]
        ) < 1e-9
    assert held >= 5 and rimmed >= 5, (held, rimmed)  # (the cases the test is for)
    assert _bounded_step_plain([], [], damping, [0.1, 0.2], [-1.0, -1.0], [1.0, 1.0], [], [1.0, 1.0]) == [0.0, 0.0]


@pytest.mark.parametrize("path", ["plain", "numpy"])
def test_the_jacobian_is_the_derivative_of_the_error_vector(path, monkeypatch):
    """Each column of the refinement's Jacobian is how the error vector changes as its coordinate turns (minus:
    the error is target less tip), row for row: a goal's tip rows, then its rotation rows where its rotation
    weighs (rotation weight 0.3, not 0), and no rows for a goal of weight 0 (cones with twists, hinges, a free
    joint; measured by central differences)."""
    from fabrik_addon.core import Goal, skeleton_from_points
    from fabrik_addon.core.joints.angles import AngleRig, freedom
    from fabrik_addon.core.joints.tree_goals import TreeGoals
    from fabrik_addon.core.model import limits
    from fabrik_addon.core.model.limits import JointLimit
    from fabrik_addon.core.model.tree import Start, moving_tree

    if path == "numpy":
        monkeypatch.setattr(refine, "PLAIN_COORDINATES", -1)
    # A trunk of two bones and three branches of two; bone 2 has no limit (a free joint).
    parents = [-1, 0, 1, 2, 1, 4, 1, 6]
    heads, tails = [], []
    for k, p in enumerate(parents):
        head = (0.0, 0.0, 0.0) if p < 0 else tails[p]
        dx, dy = {2: (0.3, 0.0), 3: (0.3, 0.1), 4: (-0.3, 0.0), 5: (-0.3, 0.1), 6: (0.0, -0.3), 7: (0.1, -0.3)}.get(
            k, (0.0, 0.1 * k)
        )
        heads.append(head)
        tails.append((head[0] + dx, head[1] + dy, head[2] + 0.5))
    cone = JointLimit(use_limit_x=True, min_x=-0.8, max_x=0.8, use_limit_z=True, min_z=-0.6, max_z=0.6,
                      use_limit_y=True, min_y=-0.9, max_y=0.9)
    hinge = JointLimit(lock_y=True, lock_z=True, use_limit_x=True, min_x=-1.5, max_x=1.5)
    skeleton = skeleton_from_points(parents, heads, tails).with_limits(
        {k: (hinge if k % 2 else cone) for k in range(len(parents)) if k != 2}
    )
    tree_goals = [
        Goal(bone=3, target=(0.8, 0.2, 2.0), rotation=(1.0, 0.0, 0.0, 0.0), rotation_weight=0.3),
        Goal(bone=5, target=(-0.7, 0.1, 1.6), weight=0.5, rotation=(1.0, 0.0, 0.0, 0.0), rotation_weight=0.0),
        Goal(bone=7, target=(0.1, -0.6, 1.5), weight=0.0, rotation=(1.0, 0.0, 0.0, 0.0)),
    ]
    tree = moving_tree(skeleton, tree_goals)
    rng = np.random.default_rng(4)
    rig = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
    for k, limit in enumerate(tree.limits):
        if limit is not None:  # (inside the limit, so that a step's clamp changes nothing else)
            swing = limits.clamp_swing(limit, rng.uniform(-0.4, 0.4), rng.uniform(-0.3, 0.3))
            rig.angles[k] = [*swing, limits.clamp_twist(limit, rng.uniform(-0.4, 0.4))]
            rig.local[k] = quat.from_swing_twist(*rig.angles[k])
        else:
            rig.local[k] = quat.exp(tuple(rng.uniform(-0.4, 0.4, 3)))
    rig.forward()
    # Rotation goals where the tips' frames are: the rotation error's derivative is then its axis exactly.
    goals = [
        g if g.rotation is None else dataclasses.replace(g, rotation=rig.frames[tree.tips[i]])
        for i, g in enumerate(tree_goals)
    ]
    problem = TreeGoals(tree, goals)
    free = freedom(rig, problem)
    j, e = refine.linearised(rig, problem, free, rig.table(free))
    assert (len(free.coordinates) <= refine.PLAIN_COORDINATES) == (path == "plain")
    assert j.shape == (9, len(free.coordinates)) and e.shape == (9,)  # 3 + 3 rotation rows, 3; none for weight 0
    np.testing.assert_allclose(e, refine.residual(rig, problem))
    h = 1e-6
    for i in range(len(free.coordinates)):
        changes = []
        for sign in (1.0, -1.0):
            moved = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
            moved.angles = [None if a is None else list(a) for a in rig.angles]
            moved.local = list(rig.local)
            moved.forward()
            delta = np.zeros(len(free.coordinates))
            delta[i] = sign * h
            moved.step(free, delta)
            changes.append(np.array(refine.residual(moved, problem)))
        np.testing.assert_allclose((changes[0] - changes[1]) / (2.0 * h), -j[:, i], atol=1e-6, err_msg=str(free.coordinates[i]))
    assert np.abs(j).max() > 0.1 and (j == 0.0).any()  # (something measured, and masked columns)


@pytest.mark.parametrize("stiff", [False, True])
def test_the_plain_float_settling_step_is_numpys(stiff):
    """Settling steps small rigs in plain floats and large ones in numpy: from one pose both pull the joints the
    goal leaves free towards rest by the same step, weighed by stiffness, and put the goal back alike (numpy's
    corrections by the step's own Jacobian, at its pose the same)."""
    from fabrik_addon.core import Goal, skeleton_from_points
    from fabrik_addon.core.joints.angles import AngleRig, freedom
    from fabrik_addon.core.joints.tree_goals import TreeGoals
    from fabrik_addon.core.model.limits import JointLimit
    from fabrik_addon.core.model.tree import Start, moving_tree

    parents = [-1, 0, 1, 2, 3]
    heads = [(0.0, 0.0, 0.5 * k) for k in range(5)]
    tails = [(0.0, 0.0, 0.5 * (k + 1)) for k in range(5)]
    skeleton = skeleton_from_points(parents, heads, tails)
    cone = JointLimit(use_limit_x=True, min_x=-0.8, max_x=0.8, use_limit_z=True, min_z=-0.8, max_z=0.8,
                      use_limit_y=True, min_y=-0.5, max_y=0.5, stiffness_x=0.6 if stiff else 0.0)
    skeleton = skeleton.with_limits({k: cone for k in range(5)})
    goals = [Goal(bone=4, target=(0.6, 0.3, 2.0))]
    tree = moving_tree(skeleton, goals)
    problem = TreeGoals(tree, goals)
    rng = np.random.default_rng(5)
    start = Start.of_pose(skeleton, tree, skeleton.rest_pose())
    poses = []
    for k in range(5):
        poses.append([rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(-0.3, 0.3)])
    steps = {}
    for path, step in (("plain", settle._plain_step), ("numpy", settle._numpy_step)):
        rig = AngleRig(tree, start)
        for k, angles in enumerate(poses):
            rig.angles[k] = list(angles)
            rig.local[k] = quat.from_swing_twist(*angles)
        rig.forward()
        free = freedom(rig, problem)
        assert (free.settling_weight is not None) == stiff
        *pulled, correct = step(rig, problem, free, settle.rest_aim(rig, free), 0.5, 0.01)
        *back, _ = step(rig, problem, free, None, 0.0, 0.01)
        steps[path] = [np.array(a, dtype=float) for a in (*pulled, *back)]
        if path == "numpy":  # a correction reusing the step's Jacobian: from where it was made, the step's own
            values = np.array(rig.values(free))
            again = np.clip(values + correct(refine.residual(rig, problem)), free.lo, free.hi) - values
            np.testing.assert_allclose(again, steps[path][3], atol=1e-12)
        else:
            assert correct is None  # (small rigs linearise each correction afresh)
    assert np.abs(steps["plain"][0]).max() > 1e-3 and np.abs(steps["plain"][1]).max() > 1e-3
    for plain, numpy_ in zip(steps["plain"], steps["numpy"]):
        assert np.abs(plain - numpy_).max() < 1e-10


@pytest.mark.parametrize("bones", [4, 20])
def test_a_limited_chain_whose_only_goal_has_no_weight_is_left_as_it_is(bones):
    """A goal of weight 0 asks for nothing (no row of the Jacobian): the refinement takes no step on either path
    (4 bones: plain floats; 20: numpy), the solve stops and the chain stays where it started; settling's pull is
    then wholly free, the same on both paths."""
    from fabrik_addon.core import Goal, SolveSettings, skeleton_from_points, solve
    from fabrik_addon.core.joints.angles import AngleRig, freedom
    from fabrik_addon.core.joints.tree_goals import TreeGoals
    from fabrik_addon.core.model.limits import JointLimit
    from fabrik_addon.core.model.tree import Start, moving_tree

    cone = JointLimit(use_limit_x=True, min_x=-0.3, max_x=0.5, use_limit_z=True, min_z=-0.4, max_z=0.4)
    size = 2.0 / bones
    skeleton = skeleton_from_points(list(range(-1, bones - 1)), [(0, 0, k * size) for k in range(bones)],
                                    [(0, 0, (k + 1) * size) for k in range(bones)]).with_limits([cone] * bones)
    goals = [Goal(bones - 1, (0.6, 0.2, 1.2), weight=0.0)]
    pose, report = solve(skeleton, goals, settings=SolveSettings(max_iterations=60))
    np.testing.assert_allclose(pose.tails, skeleton.rest_pose().tails, atol=1e-12)
    assert not report.converged and report.iterations <= 60
    tree = moving_tree(skeleton, goals)
    problem = TreeGoals(tree, goals)
    rig = AngleRig(tree, Start.of_pose(skeleton, tree, skeleton.rest_pose()))
    rig.angles[1] = [0.2, 0.1, 0.0]
    rig.local[1] = quat.from_swing_twist(*rig.angles[1])
    rig.forward()
    free = freedom(rig, problem)
    assert (len(free.coordinates) <= refine.PLAIN_COORDINATES) == (bones == 4)
    plain = settle._plain_step(rig, problem, free, settle.rest_aim(rig, free), 1.0, 0.01)[:2]
    numpy_ = settle._numpy_step(rig, problem, free, settle.rest_aim(rig, free), 1.0, 0.01)[:2]
    for a, b in zip(plain, numpy_):  # (nothing to keep: the whole pull is free, and it is the step)
        np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float), atol=1e-12)
    at = free.coordinates.index(next(c for c in free.coordinates if c.node == 1 and c.kind == "x"))
    assert plain[0][at] == pytest.approx(-0.2)


def test_small_damped_systems_are_solved_to_their_digits():
    """The refinement's and settling's small systems (a damped Gram matrix: nearly singular where holding leaves
    the Jacobian short of rank, at the smallest damping) solved in plain floats as exactly as by numpy."""

    from fabrik_addon.core.math import lsq

    rng = np.random.default_rng(2)
    for case in range(200):
        m = 3 if case % 2 else 4
        j = rng.normal(size=(m, 1)) @ rng.normal(size=(1, 5))  # (rank one)
        gram = (j @ j.T + 1e-8 * np.eye(m)).tolist()
        b = rng.normal(size=m).tolist()
        exact = _exact_solution(gram, b)
        got = lsq.solve(gram, b)
        scale = max(abs(x) for x in exact)
        assert max(abs(g - x) for g, x in zip(got, exact)) <= 1e-6 * scale, case
    assert lsq.solve([], []) == []


def test_damped_steps_of_any_size_are_the_damped_least_squares_step():
    """The refinement's step, J^T (J J^T + d^2 I)^-1 e, and settling's with weighted rows, the same whether their
    few rows are solved in plain floats or their more by numpy; a system with no solution (no damping, no rank)
    takes no step."""
    from fabrik_addon.core.math import lsq

    rng = np.random.default_rng(4)
    for rows in range(1, 10):
        for count in (1, 4, 7):
            j, e, d = rng.normal(size=(rows, count)), rng.normal(size=rows), 0.05
            expected = j.T @ np.linalg.solve(j @ j.T + d * d * np.eye(rows), e)
            got = lsq.damped_step(j.tolist(), e.tolist(), d, count)
            assert len(got) == count
            assert np.allclose(got, expected, rtol=1e-9, atol=1e-12), (rows, count)
    for rows in (2, 6):
        assert lsq.damped_step([[0.0, 0.0]] * rows, [1.0] * rows, 0.0, 2) == [0.0, 0.0]
    # Settling's: weighted rows, two right-hand sides through one Gram matrix.
    for rows in (2, 3, 5, 8):
        j, w = rng.normal(size=(rows, 6)), rng.uniform(0.1, 1.0, size=6)
        sides = rng.normal(size=(2, rows))
        gram = (j * w) @ j.T + 0.01 * np.eye(rows)
        expected = [(j * w).T @ np.linalg.solve(gram, b) for b in sides]
        got = lsq.damped_steps(j.tolist(), (j * w).tolist(), 0.1, sides.tolist(), 6)
        assert np.allclose(got, expected, rtol=1e-9, atol=1e-12), rows


def _exact_solution(a: list[list[float]], b: list[float]) -> list[float]:
    """a x = b in exact fractions (the floats as they are), by Gauss-Jordan elimination."""
    from fractions import Fraction

    m = len(b)
    rows = [[Fraction(v) for v in row] + [Fraction(c)] for row, c in zip(a, b)]
    for col in range(m):
        pivot = next(r for r in range(col, m) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        for r in range(m):
            if r != col and rows[r][col] != 0:
                f = rows[r][col] / rows[col][col]
                rows[r] = [x - f * y for x, y in zip(rows[r], rows[col])]
    return [float(rows[k][m] / rows[k][k]) for k in range(m)]
