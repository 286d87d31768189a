# SPDX-License-Identifier: GPL-3.0-or-later
"""Settling: the joints the goals leave free turned towards where they should rest, every goal kept reached.

A chain with more joints than its goals need reaches each target with many
poses. A settling step moves only in the directions that change no goal (to
first order; corrections then put the goals back), so the pose slides
along the poses that reach towards an aimed one: rest, so that a
warm-started chain does not drift and a closed path brings it back, or the
plane a pole asks for. From a pose near its targets (the last frame's, in
continuity mode) one step that also reaches them is a whole frame (`follow`).
Settling knows no floor: the refinement alone holds joints above one (`plan`).
Also here: the twists that move no goal, set back to where they started.
"""

from __future__ import annotations

import math
from operator import mul
from typing import Callable, Sequence

import numpy as np

from ..goals import pole
from ..math import lsq, quat
from ..math.quat import Quat
from ..model import limits
from ..model.limits import limited_angles
from ..model.problem import Goal
from ..model.skeleton import Skeleton
from ..model.stopping import Stopping
from ..model.tree import MovingTree, Start
from . import refine
from .angles import AngleRig, Freedom, freedom, values_after_turn
from .refine import DAMPING_RANGE, HELD_ROUNDS, ON_BOUND, held_basis, linearised, linearised_plain, residual
from .tree_goals import TreeGoals, goal_errors_of

__all__ = [
    "CRAWL", "DRIFT", "Aim", "drift_aim", "follow", "idle_twists_kept", "into_poles", "pole_aim", "random_start",
    "rest_aim", "set_idle_twists", "settle", "start_twists",
]

#: How much of the way to rest one settling step asks of the free joints at most (all of it: a step that loses
#: a goal is undone and asks half as much, one that keeps them lets the next ask twice as much again), and the
#: step (radians) below which they count as settled (0.06 degrees: a warm-started tentacle or arm that goes round
#: a closed path comes back as close to its last round's pose as with a tenth of it, at a fifth less cost a frame).
SETTLE_GAIN = 1.0
SETTLED = 1e-3
#: From the last frame's pose, how far (radians) settling moves each coordinate towards rest in one frame at most:
#: the pose stays near where the frame started, and a closed path still brings it back within a few frames.
DRIFT = math.radians(15.0)
#: Corrections one settling step may take to put the goals back. Each must leave at most SHRINK of the squared
#: error it started from (a quarter of the error itself); one that does not is followed by one with a Jacobian
#: made afresh, and where that one does not either, the step is given up.
CORRECTIONS = 4
SHRINK = 0.0625
#: Settling stops after this many steps in a row without progress (`stopping.Stopping`): undone (each asking half as
#: much as the one before), or leaving more than CRAWL of the squared distance to the aim: the pose is as near
#: its aim as the goals and limits let it come, or creeps towards one they keep it from.
STALLED = 3
CRAWL = 0.9


#: A settling step's Jacobian as its corrections reuse it: the damped least-squares step (weighted as the settling
#: step was) that corrects an error vector (`refine.residual`).
Correct = Callable[[list[float]], np.ndarray]


#: A settling step's arithmetic (`_numpy_step`, `_plain_step`): from the rig, the goals, the coordinates, the aim
#: (None: no pull), the gain and the damping, the pull left free, the whole step, and the Jacobian to reuse.
Step = Callable[
    [AngleRig, TreeGoals, Freedom, "np.ndarray | None", float, float],
    "tuple[Sequence[float], Sequence[float], Correct | None]",
]


#: What a settling pull aims at: per coordinate of the `Freedom`, the value it should go towards (NaN: leave it
#: be), in an array of its own (the caller may change it).
Aim = Callable[[AngleRig, Freedom], np.ndarray]


def rest_aim(rig: AngleRig, free: Freedom) -> np.ndarray:
    """Every limited joint towards its rest; free joints left be."""
    return free.rest.copy()


def drift_aim(anchor: AngleRig) -> Aim:
    """Every limited joint towards its rest, the whole way scaled down so that none moves further than `DRIFT` from
    where `anchor` has it (read at the first call: the pose a frame starts from); scaled, not clipped, so the
    poses settling rests in are rest's nearest as without the cap."""
    held: list[np.ndarray] = []

    def aim(rig: AngleRig, free: Freedom) -> np.ndarray:
        if not held:  # (in plain floats: a frame's few coordinates cost numpy more per call than their arithmetic)
            values = anchor.values(free)
            way = [r - v for r, v in zip(free.rest.tolist(), values)]  # (NaN, no pull, stays NaN)
            longest = max((abs(w) for w in way if w == w), default=0.0)
            share = min(1.0, DRIFT / longest) if longest > 0.0 else 1.0
            held.append(np.array([v + w * share for v, w in zip(values, way)]))
        return held[0].copy()

    return aim


def pole_aim(tree: MovingTree, holds: Sequence[pole.PoleHold], anchor: AngleRig | None) -> Aim:
    """Each pole chain's first bone turned about its base-target line into the pole's plane (the rest of the chain
    follows it unchanged), and where an `anchor` is given (the pose the frame started from) every other limited
    joint towards rest as `drift_aim` pulls."""
    drift = drift_aim(anchor) if anchor is not None else None

    def aim(rig: AngleRig, free: Freedom) -> np.ndarray:
        coordinates = free.coordinates
        wanted = drift(rig, free) if drift is not None else np.full(len(coordinates), np.nan)
        for hold in holds:
            top = hold.chain[-1]
            turn = pole.turn_for(hold, rig.heads[top], rig.frames[top])
            if turn is None:
                continue
            for i, value in values_after_turn(rig, coordinates, top, turn).items():
                wanted[i] = value
            for k in hold.chain[:-1]:  # the rest of the chain keeps its shape
                for i, c in enumerate(coordinates):
                    if c.node == k:
                        wanted[i] = np.nan
        return wanted

    return aim


def settle(
    rig: AngleRig, problem: TreeGoals, tolerance: float, max_iterations: int, aim: Aim = rest_aim, crawl: float = CRAWL
) -> int:
    """Turn the joints the goals leave free towards `aim`, keeping every goal reached, in steps that change no goal
    to first order; the iterations used. It stops once `STALLED` steps in a row are undone or keep more than `crawl`
    of the squared distance."""
    free = freedom(rig, problem)
    if not free.coordinates:
        return 0
    damping = DAMPING_RANGE[0] * max(problem.reach)
    gain = SETTLE_GAIN
    iteration = 0
    away = _away(rig.values(free), aim(rig, free), free.settling_weight)
    # (its steps judged by the stopping rules: one undone, or one that crawls, is one without progress)
    stopping = Stopping(None, away, cap=max_iterations, fraction=1.0 - crawl, patience=STALLED)
    while iteration < max_iterations and stopping.going:
        used, outcome, away = _settling_step(
            rig, problem, free, aim, gain, damping, tolerance, max_iterations - iteration, SETTLED * gain / SETTLE_GAIN,
            away,
        )
        iteration += used
        if outcome is None:
            break
        stopping.judge(away, False)
        gain = min(SETTLE_GAIN, 2.0 * gain) if outcome else 0.5 * gain
    return iteration


def into_poles(
    rig: AngleRig, problem: TreeGoals, tolerance: float, max_iterations: int, holds: Sequence[pole.PoleHold],
    anchor: AngleRig | None,
) -> int:
    """`settle` with `pole_aim`: into each pole's plane all the way (the side the chain bends to), elsewhere until
    its steps crawl; the iterations used."""
    aim = pole_aim(rig.tree, holds, anchor)
    return settle(rig, problem, tolerance, max_iterations, aim, 1.0 if holds else CRAWL)


def follow(
    rig: AngleRig, problem: TreeGoals, tolerance: float, max_iterations: int, aim: Aim = rest_aim
) -> tuple[int, bool]:
    """From a pose near its targets (a warm start), one settling step that also reaches them, where a solve would
    spend an iteration on each: the iterations it took, and whether it did (else the rig is put back)."""
    free = freedom(rig, problem)
    if not free.coordinates or max_iterations < 1:
        return 0, False
    damping = DAMPING_RANGE[0] * max(problem.reach)
    used, outcome, _ = _settling_step(rig, problem, free, aim, SETTLE_GAIN, damping, tolerance, max_iterations, -1.0)
    return used, bool(outcome)


def _settling_step(
    rig: AngleRig, problem: TreeGoals, free: Freedom, aim: Aim, gain: float, damping: float, tolerance: float,
    max_iterations: int, settled: float, away: float | None = None,
) -> tuple[int, bool | None, float | None]:
    """One step of `settle`: the iterations used; whether every goal is still reached and the joints came nearer the
    aim (else the rig is put back; None where the free pull is under `settled`); and the distance after it.
    Stiffness weighs it as it weighs the refinement."""
    step = _plain_step if len(free.coordinates) <= refine.PLAIN_COORDINATES else _numpy_step
    wanted = aim(rig, free)
    free_pull, reaching, correct = step(rig, problem, free, wanted, gain, damping)
    if max(map(abs, free_pull), default=0.0) < settled:
        return 1, None, away
    before = rig.snapshot()
    rig.step(free, reaching)
    # The null space is flat only to first order: corrections put the goals back.
    most = min(CORRECTIONS, max_iterations - 1)
    used, reached = _put_back(rig, problem, free, step, correct, damping, tolerance, most)
    # A step that lost a goal, or that left the joints no nearer their aim (where the poses that reach curve away
    # from the pull, a whole step can overshoot it, and each one after it further), is undone.
    now = None if away is None or not reached else _away(rig.values(free), aim(rig, free), free.settling_weight)
    if not reached or (away is not None and now >= away):
        rig.restore(before)
        return 1 + used, False, away
    return 1 + used, True, now


def _put_back(
    rig: AngleRig, problem: TreeGoals, free: Freedom, step: Step, correct: Correct | None, damping: float,
    tolerance: float, most: int,
) -> tuple[int, bool]:
    """Up to `most` corrections of the goals' errors after a settling step, reusing the step's Jacobian (`correct`)
    while each cuts the squared error to `SHRINK`: the corrections taken, and whether every goal is reached."""
    used = 0
    last = math.inf
    renewed = False  # whether the last correction made its Jacobian afresh
    while True:
        errors = goal_errors_of(rig, problem)
        if problem.reached(*errors, tolerance):
            return used, True
        cost = problem.cost(*errors)
        shrunk = cost <= SHRINK * last
        if used >= most or (renewed and not shrunk):
            return used, False
        renewed = correct is None or not shrunk
        if renewed:
            _, correction, correct = step(rig, problem, free, None, 0.0, damping)
        else:
            values = rig.get(free, rig.table(free))
            correction = np.clip(values + correct(residual(rig, problem)), free.lo, free.hi) - values
        rig.step(free, correction)
        last = cost
        used += 1


def _away(values: list[float], wanted: np.ndarray, weight: np.ndarray | None) -> float:
    """How far the coordinates are from the aim (NaN: no aim), in the metric settling steps in (a stiff
    coordinate's distance counts for more)."""
    total = 0.0
    for i, (v, w) in enumerate(zip(values, wanted.tolist())):
        if w == w:
            total += (w - v) ** 2 / (1.0 if weight is None else weight[i])
    return total


def _numpy_step(
    rig: AngleRig, problem: TreeGoals, free: Freedom, wanted: np.ndarray | None, gain: float, damping: float
) -> tuple[np.ndarray, np.ndarray, Correct]:
    """The pull towards `wanted` with what it would change of the goals removed, the step that also corrects
    the goals, clamped into the limits (None wanted: the correction alone), and the correction its Jacobian makes
    of an error vector, for the corrections after it (`Correct`)."""
    table = rig.table(free)
    j, e = linearised(rig, problem, free, table)
    values = rig.get(free, table)
    pull = None if wanted is None else gain * (np.where(np.isnan(wanted), values, wanted) - values)  # (NaN: none)
    return _bounded(j, e, values, pull, free, rig.rims(free), damping)


def _bounded(
    j: np.ndarray, e: np.ndarray, values: np.ndarray, pull: np.ndarray | None, free: Freedom, rims: list,
    damping: float,
) -> tuple[np.ndarray, np.ndarray, Correct]:
    """`_numpy_step`'s arithmetic. A coordinate on a bound that the step would push past is held, and a swing on
    its cone's rim that the step would push outwards may only slide along the rim, and the step is worked out
    again (as the refinement's: clamped afterwards, the step would move the goals)."""
    lo, hi = free.lo, free.hi
    ones = np.ones(len(values))
    weight = ones if free.settling_weight is None else free.settling_weight
    basis = None  # columns: the directions the step may take (None: every coordinate's own, until one is held)
    held: set[int] = set()
    rimmed: set[int] = set()
    for round_ in range(HELD_ROUNDS + 1):
        jb = j if basis is None else j @ basis
        jw = jb * weight
        gram = lsq.damped_gram(jb, jw, damping)
        if pull is None:
            kept, correction = np.zeros(jb.shape[1]), jw.T @ np.linalg.solve(gram, e)
            along = kept
        else:
            along = pull if basis is None else basis.T @ pull
            kept, correction = (jw.T @ np.linalg.solve(gram, np.stack((jb @ along, e), axis=1))).T  # (one solve)
        free_pull = along - kept  # the pull with what it would change removed
        moved = free_pull + correction if basis is None else basis @ (free_pull + correction)
        if round_ == HELD_ROUNDS:
            break  # (the step worked out with the last basis: the one it is taken in)
        basis, changed = held_basis(basis, held, rimmed, values, moved, lo, hi, rims, ones)
        if not changed:
            break
    if basis is not None:
        free_pull = basis @ free_pull
    final = basis

    def correct(errors: list[float]) -> np.ndarray:
        step = jw.T @ np.linalg.solve(gram, errors)
        return step if final is None else final @ step

    return free_pull, np.clip(values + moved, lo, hi) - values, correct


def _plain_step(
    rig: AngleRig, problem: TreeGoals, free: Freedom, wanted: np.ndarray | None, gain: float, damping: float
) -> tuple[list[float], list[float], Correct | None]:
    """`_numpy_step` in plain floats, for few coordinates: there a fresh Jacobian costs about what a step does,
    so each correction linearises afresh (no `Correct`) and converges as fast as it can. A step held by a bound or
    a cone's rim is worked out in numpy (`_bounded`)."""
    rows, e = linearised_plain(rig, problem, free)
    values = rig.values(free)
    count = len(values)
    weight = free.settling_weight
    weighted = rows if weight is None else [[a * w for a, w in zip(row, weight.tolist())] for row in rows]
    free_pull = [0.0] * count
    pull = None
    if wanted is None:
        (correction,) = lsq.damped_steps(rows, weighted, damping, [e], count)
    else:
        pull = [0.0 if w != w else gain * (w - v) for v, w in zip(values, wanted.tolist())]  # (NaN: no pull)
        kept, correction = lsq.damped_steps(
            rows, weighted, damping, [[sum(map(mul, row, pull)) for row in rows], e], count
        )
        free_pull = [p - k for p, k in zip(pull, kept)]  # the pull with what it would change removed
    lo, hi = free.lo.tolist(), free.hi.tolist()
    moved = [c + f for c, f in zip(correction, free_pull)]
    rims = rig.rims(free)
    if any(
        (v <= low + ON_BOUND and m < 0.0) or (v >= high - ON_BOUND and m > 0.0)
        for v, m, low, high in zip(values, moved, lo, hi)
    ) or any(normal[0] * moved[ix] + normal[1] * moved[iz] > 0.0 for ix, iz, normal in rims):
        free_pull_, step, correct = _bounded(
            np.array(rows).reshape(len(rows), count), np.array(e), np.array(values),
            None if pull is None else np.array(pull), free, rims, damping,
        )
        return free_pull_.tolist(), step.tolist(), correct
    return free_pull, [min(max(v + m, low), high) - v for v, m, low, high in zip(values, moved, lo, hi)], None


def idle_twists_kept(
    tree: MovingTree, problem: TreeGoals, frames: list[Quat], start: Start, twists: dict[int, float] | None = None
) -> list[Quat]:
    """The nodes' frames with every twist that moves no goal (see `AngleRig.coordinates`) set back to its start
    value.

    FABRIK turns bones by shortest arcs, which drifts a tool's roll a little;
    turning it back moves no tip. `twists` are the start values (`start_twists`), when the caller has them.
    """
    idle = [k for k in sorted(problem.idle_twists) if tree.limits[k] is not None]
    if not idle:
        return frames
    twists = twists if twists is not None else start_twists(tree, problem, start)
    # Each of them a leaf: turning it about its own axis moves nothing but it (and bones that follow it rigidly).
    frames = list(frames)
    for k in idle:
        p = tree.parent[k]
        zero_frame = start.zero[k] if p < 0 else quat.mul(frames[p], start.zero[k])
        sx, sz, _ = limited_angles(tree.limits[k], zero_frame, frames[k])
        frames[k] = quat.mul(zero_frame, quat.from_swing_twist(sx, sz, twists[k]))
    return frames


def start_twists(tree: MovingTree, problem: TreeGoals, start: Start) -> dict[int, float]:
    """Per limited node whose twist moves no goal, its twist at the start as `AngleRig` reads it (clamped into the
    limit), without posing the whole tree."""
    out = {}
    for k in sorted(problem.idle_twists):
        if tree.limits[k] is None:
            continue
        p = tree.parent[k]
        zero_frame = start.zero[k] if p < 0 else quat.mul(start.frames[p], start.zero[k])
        out[k] = limited_angles(tree.limits[k], zero_frame, start.frames[k])[2]
    return out


def set_idle_twists(rig: AngleRig, problem: TreeGoals, twists: dict[int, float]) -> None:
    """`idle_twists_kept` on a rig: its twists that move no goal take the values of `twists`."""
    idle = [k for k in problem.idle_twists if rig.limits[k] is not None]
    for k in idle:
        rig.angles[k][2] = twists[k]
        rig.local[k] = quat.from_swing_twist(*rig.angles[k])
    if idle:
        rig.forward(min(idle))  # (leaves: nothing else moves)


def random_start(skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, rng) -> Start:
    """The start with every limited node turned to a random rotation inside its limit.

    Twists that move no goal (see `AngleRig.coordinates`) keep the value they start with.
    """
    problem = TreeGoals(tree, goals)
    rig = AngleRig(tree, start)
    for k, limit in enumerate(tree.limits):
        if limit is None:
            continue
        sx, sz, tw = quat.swing_twist(limits.sample(limit, rng))
        rig.angles[k] = [sx, sz, rig.angles[k][2] if k in problem.idle_twists else tw]
        rig.local[k] = quat.from_swing_twist(*rig.angles[k])
    rig.forward()
    return rig.placed(skeleton, start)
