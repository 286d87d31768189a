# SPDX-License-Identifier: GPL-3.0-or-later
"""Refinement in the limits' own angles: clamped damped least squares from FABRIK's pose.

FABRIK moves points; joint limits act on angles. Where the two disagree --
hinges whose plane FABRIK's straight-line moves keep leaving, chains whose
limits meet head on -- FABRIK's passes can stall short of a target that a
pose inside the limits reaches. This module finishes such solves in the
coordinates the limits are written in, which is how Blender's own IK solver
works throughout.

Each limited joint is described by its swing (a rotation vector (sx, 0, sz)
in the bone's XZ plane) after a twist t about its Y axis (see `limits`). A
free joint turns about three axes of its zero frame. Axes that a limit
locks are not degrees of freedom at all, so a hinge has one, a knuckle two.
Every iteration:

1. linearises: the derivative of each effector's tip with respect to each
   degree of freedom is  w x (tip - head), where w is the world axis that the
   coordinate turns about (for swing coordinates the exact derivative of the
   rotation vector's exponential, so the step moves the joint as predicted);
   rotation goals add the derivative of the tip's orientation, w itself;
2. steps by damped least squares (Levenberg-Marquardt), leaving out the
   coordinates that sit on a bound of their range and would be pushed past it
   (Blender's solver locks those too), then clamps the rest into their ranges;
3. keeps the step if it lowered the weighted error and lowers the damping, or
   undoes it and raises the damping.

The damping carries the units of length (a fraction of the chain's reach), so
the solve behaves the same on a rig of any size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..math import lsq, quat
from ..model.stopping import Stopping
from .angles import FRAME_AXES, AngleRig, Freedom, freedom, swing_derivative
from .tree_goals import TreeGoals, goal_errors_of, rotation_error

__all__ = ["Refined", "held_basis", "linearised", "linearised_plain", "residual", "solve"]

#: Starting damping, as a fraction of the largest chain's reach.
DAMPING = 0.05
#: The damping never falls below this fraction of the reach (nor rises above the last).
DAMPING_RANGE = (1e-4, 1e3)
#: A kept step multiplies the damping by EASE, an undone one by RAISE.
EASE = 0.5
RAISE = 4.0
#: No coordinate moves by more than this (radians) in one step.
MAX_STEP = 0.75
#: Steps that each lower the squared error by less than this fraction are a crawl (a dead end of the
#: limits, approached ever more slowly); `PATIENCE` of them in a row end the refinement (`stopping.Stopping`).
CRAWL = 1e-3
PATIENCE = 3
#: An attempt that has not halved its squared error over WINDOW iterations is a crawl.
WINDOW = 6
#: Up to this many coordinates each step is worked out in plain floats: numpy's cost per call outweighs its loops
#: there.
PLAIN_COORDINATES = 48
#: A coordinate this close to a bound (radians) counts as sitting on it.
ON_BOUND = 1e-9
#: How often a step held by a bound or a cone's rim is worked out again (`held_basis`).
HELD_ROUNDS = 3


@dataclass
class Refined:
    """What a refinement did: iterations, each goal's distance and angle, and why it stopped."""

    iterations: int
    errors: list[float]
    rotation_errors: list[float]
    converged: bool
    stopped_by: str
    #: The weighted squared error it ended at (`TreeGoals.cost`).
    cost: float


def solve(rig: AngleRig, problem: TreeGoals, tolerance: float, max_iterations: int) -> Refined:
    """Levenberg-Marquardt in the limits' coordinates until every goal is reached or the budget is spent."""
    free = freedom(rig, problem)
    coordinates = free.coordinates
    # Few coordinates are stepped in plain floats (numpy's cost per call outweighs its loops there).
    plain = None
    if len(coordinates) <= PLAIN_COORDINATES:
        plain = (free.lo.tolist(), free.hi.tolist(), free.pliancy.tolist(), bool((free.pliancy != 1.0).any()))
    # The scale of the chains that pull (a goal of weight 0 asks for nothing).
    scale = max((r for r, w in zip(problem.reach, problem.weights) if w > 0.0), default=max(problem.reach))
    damping = DAMPING * scale
    errors, angles = goal_errors_of(rig, problem)
    cost = problem.cost(errors, angles) + problem.floor_cost(rig)
    # A crawl (a target out of what the limits reach, approached ever more slowly) is as close as it gets; still
    # creeping after WINDOW iterations, the budget is better spent on another start.
    stopping = Stopping(None, cost, window=WINDOW, cap=max_iterations, fraction=CRAWL, patience=PATIENCE)
    if not coordinates:
        stopping.stall()  # every joint that could move is locked or moves no goal
    while stopping.going and not _done(rig, problem, errors, angles, tolerance):
        delta = _step(rig, problem, free, damping, plain)
        before = rig.snapshot()
        rig.step(free, delta)
        new_errors, new_angles = goal_errors_of(rig, problem)
        new_cost = problem.cost(new_errors, new_angles) + problem.floor_cost(rig)
        if new_cost < cost:
            errors, angles, cost = new_errors, new_angles, new_cost
            damping = max(DAMPING_RANGE[0] * scale, damping * EASE)
            stopping.judge(cost, False)
        else:
            rig.restore(before)
            damping *= RAISE
            if damping > DAMPING_RANGE[1] * scale:
                stopping.iterations += 1
                stopping.stall()  # no step of any length helps: a dead end of the limits
                break
            stopping.undone()
    iterations = stopping.iterations
    stopped_by = "stalled" if stopping.stopped_by == "handover" else stopping.stopped_by
    converged = _done(rig, problem, errors, angles, tolerance)
    return Refined(iterations, errors, angles, converged, "converged" if converged else stopped_by, cost)


def _done(rig: AngleRig, problem: TreeGoals, errors: list[float], angles: list[float], tolerance: float) -> bool:
    """Every goal reached, and no joint deeper below the floor than the tolerance."""
    return problem.reached(errors, angles, tolerance) and all(
        depth <= tolerance for *_, depth in problem.under_floor(rig)
    )


def _floor_rows(rig: AngleRig, problem: TreeGoals, free: Freedom, axes) -> tuple[list[list[float]], list[float]]:
    """A row and an error per joint below the floor: how its height changes with each coordinate (the turns of
    the joints above it: a tail moves with its own bone's, a head at an offset only with its parents'), and the
    depth it must rise by."""
    rows, errors = [], []
    under = problem.under_floor(rig)
    if not under:
        return rows, errors
    n = problem.floor.normal
    parent, nodes, heads = rig.tree.parent, free.nodes, rig.heads
    for k, tail, (px, py, pz), depth in under:
        above = set()
        node = k if tail else parent[k]
        while node >= 0:
            above.add(node)
            node = parent[node]
        row = [0.0] * len(nodes)
        for i, node in enumerate(nodes):
            if node in above:
                a, h = axes[i], heads[node]
                dx, dy, dz = px - h[0], py - h[1], pz - h[2]
                row[i] = (
                    n[0] * (a[1] * dz - a[2] * dy) + n[1] * (a[2] * dx - a[0] * dz) + n[2] * (a[0] * dy - a[1] * dx)
                )
        rows.append(row)
        errors.append(depth)
    return rows, errors


def residual(rig: AngleRig, problem: TreeGoals) -> list[float]:
    """The goals' part of `linearised`'s error vector, as the rig is posed: per goal with rows
    (`TreeGoals.rows`), its weighted tip error, then its scaled rotation error where it has rotation rows."""
    errors = []
    for g, node, w, s in problem.rows:
        tip, target = rig.tip(node), problem.targets[g]
        errors += ((target[0] - tip[0]) * w, (target[1] - tip[1]) * w, (target[2] - tip[2]) * w)
        if s > 0.0:
            r = rotation_error(rig.frames[node], problem.rotations[g])
            errors += (r[0] * s, r[1] * s, r[2] * s)
    return errors


def linearised_plain(rig: AngleRig, problem: TreeGoals, free: Freedom) -> tuple[list[list[float]], list[float]]:
    """`linearised` in plain floats (rows of the Jacobian, the error vector), for few coordinates."""
    frames, zero_frames, angles, heads = rig.frames, rig.zero_frames, rig.angles, rig.heads
    axes = []
    for c in free.coordinates:
        k, kind = c.node, c.kind
        if kind == "y":
            axes.append(quat.y_axis(frames[k]))
        elif kind == "x" or kind == "z":
            sx, sz, _ = angles[k]
            axes.append(quat.rotate(zero_frames[k], swing_derivative(sx, sz, kind == "x")))
        else:  # a free joint turns about its zero frame's own axes
            axes.append(FRAME_AXES[int(kind[4])](zero_frames[k]))
    nodes = free.nodes
    count = len(axes)
    rows = []
    for g, node, w, s in problem.rows:
        tx, ty, tz = rig.tip(node)
        moving = free.moving[g]
        jx, jy, jz = [0.0] * count, [0.0] * count, [0.0] * count
        for i in moving:
            a, h = axes[i], heads[nodes[i]]
            dx, dy, dz = tx - h[0], ty - h[1], tz - h[2]
            jx[i] = (a[1] * dz - a[2] * dy) * w
            jy[i] = (a[2] * dx - a[0] * dz) * w
            jz[i] = (a[0] * dy - a[1] * dx) * w
        rows += (jx, jy, jz)
        if s > 0.0:
            for axis in range(3):
                row = [0.0] * count
                for i in moving:
                    row[i] = axes[i][axis] * s
                rows.append(row)
    floor_rows, floor_errors = _floor_rows(rig, problem, free, axes)
    return rows + floor_rows, residual(rig, problem) + floor_errors


def linearised(rig: AngleRig, problem: TreeGoals, free: Freedom, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The weighted Jacobian (rows: per goal with rows (`TreeGoals.rows`), its tip's, then its rotation's; then a
    row per joint below the floor) and the error vector (`table`: `AngleRig.table`)."""
    if len(free.coordinates) <= PLAIN_COORDINATES:
        rows, errors = linearised_plain(rig, problem, free)
        return np.array(rows).reshape(-1, len(free.coordinates)), np.array(errors)
    axes = rig.axes(free, table)
    heads = np.array(rig.heads)[free.nodes]
    rows = []
    for g, node, w, s in problem.rows:
        mask = free.moves[g]
        d = np.array(rig.tip(node)) - heads
        # axes x d, row by row (np.cross's arithmetic without its cost per call)
        block = np.array((
            axes[:, 1] * d[:, 2] - axes[:, 2] * d[:, 1],
            axes[:, 2] * d[:, 0] - axes[:, 0] * d[:, 2],
            axes[:, 0] * d[:, 1] - axes[:, 1] * d[:, 0],
        )) * (mask * w)
        rows.append(block)
        if s > 0.0:
            rows.append((axes * (mask[:, None] * s)).T)
    floor_rows, floor_errors = _floor_rows(rig, problem, free, axes)
    if floor_rows:
        rows.append(np.array(floor_rows))
    if not rows:  # (no goal pulls)
        return np.zeros((0, len(free.coordinates))), np.zeros(0)
    return np.vstack(rows), np.array(residual(rig, problem) + floor_errors)


def _step(
    rig: AngleRig, problem: TreeGoals, free: Freedom, damping: float, plain: tuple[list, list, list, bool] | None
) -> list[float] | np.ndarray:
    """The next step of the coordinates from the rig's pose (`_bounded_step`); `plain`: the coordinates' ranges and
    pliancy as lists and whether any is stiff, where the step is worked out in plain floats."""
    # Stiffness as Blender weighs it: a stiff coordinate's column shrinks, so the others take the motion.
    if plain is not None:
        lo, hi, pliancy, stiff = plain
        rows, e = linearised_plain(rig, problem, free)
        if stiff:
            rows = [[a * p for a, p in zip(row, pliancy)] for row in rows]
        return _bounded_step_plain(rows, e, damping, rig.values(free), lo, hi, rig.rims(free), pliancy)
    table = rig.table(free)
    j, e = linearised(rig, problem, free, table)
    values = rig.get(free, table)
    pliancy = free.pliancy
    return pliancy * _bounded_step(j * pliancy, e, damping, values, free.lo, free.hi, rig.rims(free), pliancy)


def _bounded_step(
    j: np.ndarray,
    e: np.ndarray,
    damping: float,
    values: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    cones: list,
    pliancy: np.ndarray,
) -> np.ndarray:
    """A damped least-squares step (in coordinates scaled by `pliancy`) that leaves out a coordinate a bound holds
    and slides a swing along its cone's rim (`held_basis`), then clamps into the limits."""
    n = j.shape[1]
    basis = None  # columns: the directions the step may take (None: every coordinate's own, until one is held)
    held: set[int] = set()
    rims: set[int] = set()
    delta = np.zeros(n)
    for round_ in range(HELD_ROUNDS + 1):
        jb = j if basis is None else j @ basis
        d = jb.T @ np.linalg.solve(lsq.damped_gram(jb, jb, damping), e)
        delta = d if basis is None else basis @ d
        moved = delta * pliancy  # the step in the coordinates themselves
        if round_ == HELD_ROUNDS:
            break  # (the step worked out with the last basis: the one it is taken in)
        basis, changed = held_basis(basis, held, rims, values, moved, lo, hi, cones, pliancy)
        if not changed:
            break
    largest = np.abs(delta * pliancy).max(initial=0.0)
    if largest > MAX_STEP:
        delta *= MAX_STEP / largest
    return (np.clip(values + delta * pliancy, lo, hi) - values) / pliancy


def held_basis(
    basis: np.ndarray | None, held: set[int], rims: set[int], values: np.ndarray, moved: np.ndarray, lo: np.ndarray,
    hi: np.ndarray, cones: list, scale: np.ndarray,
) -> tuple[np.ndarray | None, bool]:
    """The directions a step may take, as columns (None: every coordinate's own), once a step `moved` is held: a
    coordinate on a bound it would push past is left out, a swing on its cone's rim slides along it. The basis, and
    whether it changed (`held`, `rims`: what is held so far)."""
    pushed = np.flatnonzero(((values <= lo + ON_BOUND) & (moved < 0.0)) | ((values >= hi - ON_BOUND) & (moved > 0.0)))
    changed = False
    for i in pushed.tolist():
        if i not in held:
            basis = np.eye(len(values)) if basis is None else basis
            held.add(i)
            basis[:, i] = 0.0
            changed = True
    for c, (ix, iz, normal) in enumerate(cones):
        if c in rims or normal[0] * moved[ix] + normal[1] * moved[iz] <= 0.0:
            continue
        basis = np.eye(len(values)) if basis is None else basis
        rims.add(c)
        basis[:, ix] = basis[:, iz] = 0.0
        if ix not in held and iz not in held:
            basis[ix, ix], basis[iz, ix] = -normal[1] / scale[ix], normal[0] / scale[iz]
        changed = True
    return basis, changed


def _bounded_step_plain(
    rows: list[list[float]],
    e: list[float],
    damping: float,
    values: list[float],
    lo: list[float],
    hi: list[float],
    cones: list,
    pliancy: list[float],
) -> list[float]:
    """`_bounded_step` in plain floats (`rows`: the scaled Jacobian's), already multiplied by the pliancy: the
    step of the coordinates themselves."""
    n = len(values)
    if not rows:
        return [0.0] * n  # (no goal pulls: no step)
    # The basis' columns, each as (coordinate, coefficient) pairs: the coordinate's own at first, none once it is
    # held on a bound, a rim's tangent for a swing on its cone's rim (made where the first step needs it).
    basis: list[tuple] | None = None
    held: set[int] = set()
    rims: set[int] = set()
    delta = [0.0] * n
    for attempt in range(HELD_ROUNDS + 1):
        if basis is None:
            delta = lsq.damped_step(rows, e, damping, n)
        else:
            d = lsq.damped_step([_in_basis(row, basis) for row in rows], e, damping, n)
            delta = [0.0] * n
            for i, column in enumerate(basis):
                for r, c in column:
                    delta[r] += c * d[i]
        moved = [a * p for a, p in zip(delta, pliancy)]
        if attempt == HELD_ROUNDS:
            break  # (the step worked out with the last basis: the one it is taken in)
        changed = False
        for i in range(n):
            if i not in held and (
                (values[i] <= lo[i] + ON_BOUND and moved[i] < 0.0) or (values[i] >= hi[i] - ON_BOUND and moved[i] > 0.0)
            ):
                if basis is None:
                    basis = [((k, 1.0),) for k in range(n)]
                held.add(i)
                basis[i] = ()
                changed = True
        for c, (ix, iz, normal) in enumerate(cones):
            if c in rims or normal[0] * moved[ix] + normal[1] * moved[iz] <= 0.0:
                continue
            if basis is None:
                basis = [((k, 1.0),) for k in range(n)]
            rims.add(c)
            basis[iz] = ()
            basis[ix] = () if ix in held or iz in held else (
                (ix, -normal[1] / pliancy[ix]), (iz, normal[0] / pliancy[iz])
            )
            changed = True
        if not changed:
            break
    largest = max((abs(a * p) for a, p in zip(delta, pliancy)), default=0.0)
    shrink = MAX_STEP / largest if largest > MAX_STEP else 1.0
    return [min(max(v + a * p * shrink, low), high) - v for v, a, p, low, high in zip(values, delta, pliancy, lo, hi)]


def _in_basis(row: list[float], basis: list[tuple]) -> list[float]:
    """A row of the Jacobian in the basis' columns (`_bounded_step_plain`)."""
    out = []
    for column in basis:
        if not column:
            out.append(0.0)
        elif len(column) == 1:
            out.append(column[0][1] * row[column[0][0]])
        else:
            (i, a), (k, b) = column
            out.append(a * row[i] + b * row[k])
    return out
