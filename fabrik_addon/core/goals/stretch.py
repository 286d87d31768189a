# SPDX-License-Identifier: GPL-3.0-or-later
"""IK stretch as Blender's IK constraint does it: bones grow so that a chain reaches a target beyond its length.

Blender (the legacy IK solver with the constraint's Stretch option) gives
every chain bone whose `ik_stretch` factor f is above 0 a degree of freedom
that slides its tail along its own Y axis, with the weight f^2 (never below
1e-3). Its damped least-squares step moves a weighted degree of freedom by
its weight times the weighted pseudo-inverse's answer, so along a straight
chain each bone takes a share of the missing length proportional to
(f^2)^1.5 = f^3: with factors 0.5 and 1, the second bone grows eight times as
much as the first. The grown bone is then scaled uniformly (X, Y and Z by
the same factor), its children inherit that scale, and the chain's own bones
cancel what they inherit, so each chain bone ends scaled by its own factor
and bones hanging below the chain grow with their parent.

Here the stretch is decided before the solve, from the start pose: a chain
whose target lies beyond its longest reach (bones and rigid offsets laid end
to end from its base) gets that missing length, shared out in Blender's
proportions, and the solve runs on the longer bones. Bones never shorten
(Blender's solver also shrinks bones, and stretches bent chains along the
way, depending on where it starts: there is no single answer to copy), and a
target within reach stretches nothing. Where Blender ends with the chain
straight at the target, the lengths here are Blender's.

A target at exactly full reach is where iterative solvers crawl (no small
turn moves the tip outwards), so after the solve a free connected chain is
laid straight at its target, and a chain that joint limits keep bent grows
by half again what it still lacks and is solved again, a few rounds at most
(so it ends a little longer than it strictly needs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from ..math import matrix_rows, quat
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, begin
from ..model.skeleton import Pose, Skeleton, pose_with
from ..model.stopping import unreached

__all__ = ["applies", "scalable", "scales", "share", "solve", "stretched", "supporting"]

#: Blender caps the stiffness of the stretch degree of freedom at 0.999, so its weight is never below this.
MIN_WEIGHT = 1e-3
#: How often a chain that limits keep bent may grow by what it still lacks and be solved again.
ROUNDS = 3
#: Such a chain grows by this much more than it lacks: grown by exactly that, its target would sit on the edge
#: of what the limits let it reach, where solvers crawl (on random limited chains: 61 % reached, 76 % with 1.5).
OVERSHOOT = 1.5

Solver = Callable[..., "tuple[Pose, SolveReport]"]


def share(factor: float) -> float:
    """A bone's part of its chain's missing length, relative to its chain's other bones (Blender: f^3)."""
    if not factor > 0.0:
        return 0.0
    return max(factor * factor, MIN_WEIGHT) ** 1.5


def chain_of(skeleton: Skeleton, goal: Goal) -> list[int]:
    """The bones a goal moves, tip first."""
    path = skeleton.path_to_root(goal.bone)
    return path if goal.chain_length == 0 else path[: goal.chain_length]


def applies(skeleton: Skeleton, goals: Sequence[Goal]) -> bool:
    """True when some goal asks for stretch and its chain has a bone that may stretch (goals naming no bone of
    the skeleton are left to the solver's own checks)."""
    n = len(skeleton)
    return any(g.stretch and 0 <= g.bone < n and skeleton.stretch[chain_of(skeleton, g)].any() for g in goals)


def scalable(skeleton: Skeleton, goals: Sequence[Goal]) -> list[int]:
    """The bones whose scale a stretch may set, parents first: in a stretching goal's chain, at or below a bone
    that may stretch (the ones below it cancel the scale they would inherit)."""
    bones: set[int] = set()
    for goal in goals:
        if not goal.stretch:
            continue
        chain = chain_of(skeleton, goal)
        stretchable = [k for k, b in enumerate(chain) if skeleton.stretch[b] > 0.0]
        if stretchable:
            bones.update(chain[: stretchable[-1] + 1])
    return [b for b in skeleton.order if b in bones]


def scales(skeleton: Skeleton, pose: Pose) -> np.ndarray:
    """Each bone's scale in a solved pose: its length there over its rest length (1 where nothing stretched)."""
    return np.asarray(pose.lengths, dtype=float) / skeleton.lengths


def _grow(skeleton: Skeleton, lengths: np.ndarray, chain: list[int], missing: float) -> None:
    """Share `missing` (of reach) out over a chain's bones in Blender's proportions; their child offsets grow
    with them, so the offsets' share of the growth counts too."""
    shares = [share(float(skeleton.stretch[b])) for b in chain]
    # chain[k - 1] is chain[k]'s child: it hangs at an offset that grows with chain[k].
    offsets = [0.0] + [float(np.linalg.norm(skeleton.offsets[b])) for b in chain[:-1]]
    growth = sum(s * (1.0 + o / skeleton.lengths[b]) for s, o, b in zip(shares, offsets, chain))
    for b, s in zip(chain, shares):
        lengths[b] += missing * s / growth


def _reach(skeleton: Skeleton, lengths: np.ndarray, chain: list[int]) -> float:
    """A chain's longest reach: its bones and the offsets between them laid end to end."""
    scale = lengths / skeleton.lengths
    offsets = sum(float(np.linalg.norm(skeleton.offsets[b])) * scale[p] for b, p in zip(chain[:-1], chain[1:]))
    return float(sum(lengths[b] for b in chain)) + offsets


def stretched_lengths(skeleton: Skeleton, goals: Sequence[Goal], start: Pose) -> np.ndarray | None:
    """Every bone's length for this solve, or None when nothing grows: a chain grows by what its target lies beyond
    its longest reach, and a bone shared by goals takes the longest length any asks for."""
    lengths = skeleton.lengths.copy()
    grown = False
    for goal in goals:
        chain = chain_of(skeleton, goal)
        if not goal.stretch or goal.weight <= 0.0 or not skeleton.stretch[chain].any():
            continue
        distance = float(np.linalg.norm(np.asarray(goal.target, dtype=float) - start.heads[chain[-1]]))
        own = skeleton.lengths.copy()
        longest = _reach(skeleton, own, chain)
        if distance <= longest:
            continue
        _grow(skeleton, own, chain, distance - longest)
        lengths = np.maximum(lengths, own)
        grown = True
    return lengths if grown else None


def _grown_bones(skeleton: Skeleton, goals: Sequence[Goal]) -> tuple[frozenset[int], tuple[int, ...]]:
    """The bones whose scale the stretch sets (`scalable`), and those with every bone below them, parents first:
    all a stretch changes (kept on the skeleton)."""
    key = tuple((g.bone, g.chain_length, g.stretch) for g in goals)
    found = skeleton.kept.shape.grown.get(key)
    if found is None:
        own = frozenset(scalable(skeleton, goals))
        below = set(own)
        for b in skeleton.order:
            if skeleton.parents[b] in below:
                below.add(b)
        found = skeleton.kept.shape.grown[key] = own, tuple(b for b in skeleton.order if b in below)
    return found


def with_lengths(skeleton: Skeleton, goals: Sequence[Goal], pose: Pose, lengths: np.ndarray) -> tuple[Skeleton, Pose]:
    """The skeleton with the stretching chains' bones at these lengths, and the pose on it, turned as it was: the
    bones below a grown bone follow it and inherit its scale, as Blender's do."""
    own, grown = _grown_bones(skeleton, goals)
    below = set(grown)
    scale = np.ones(len(skeleton))  # each bone's length over its rest length
    for b in grown:
        scale[b] = lengths[b] / skeleton.lengths[b] if b in own else scale[skeleton.parents[b]]
    longer = skeleton.scaled(scale)
    was = np.asarray(pose.lengths, dtype=float) / skeleton.lengths
    heads = pose.heads.copy()
    for b in grown:
        p = skeleton.parents[b]
        if p not in below:
            continue  # (hangs from a bone the stretch leaves as it is)
        # A head hangs from its parent's tail at the offset it had, grown with the parent.
        old_tail = pose.heads[p] + pose.lengths[p] * pose.frames[p][:, 1]
        heads[b] = heads[p] + longer.lengths[p] * pose.frames[p][:, 1] + scale[p] / was[p] * (pose.heads[b] - old_tail)
    return longer, Pose(heads, pose.frames.copy(), longer.lengths)


def stretched(skeleton: Skeleton, goals: Sequence[Goal], start: Pose) -> tuple[Skeleton, Pose] | None:
    """The skeleton and start pose with the bones grown that this solve stretches; None when none grows."""
    lengths = stretched_lengths(skeleton, goals, start)
    return None if lengths is None else with_lengths(skeleton, goals, start, lengths)


def solve(
    solver: Solver, skeleton: Skeleton, goals: Sequence[Goal], start: Pose | None, settings: SolveSettings
) -> tuple[Pose, SolveReport]:
    """Solve with IK stretch: grow the bones, solve aimed a hair beyond the targets (at exactly full reach solvers
    crawl), then lay free chains straight and grow a chain held bent by what it lacks, a few rounds at most."""
    start, nothing_to_do = begin(skeleton, goals, start, settings)
    if nothing_to_do:
        return nothing_to_do
    plain = [replace(g, stretch=False) for g in goals]
    longer = stretched(skeleton, goals, start)
    if longer is None:
        return solver(skeleton, plain, start, settings)
    stretching = [g for g, goal in enumerate(goals) if applies(skeleton, [goal])]
    beyond = list(plain)
    for g in stretching:
        chain = chain_of(skeleton, goals[g])
        base = longer[1].heads[chain[-1]]
        away = np.asarray(goals[g].target, dtype=float) - base
        distance = float(np.linalg.norm(away))
        if distance > 0.0 and distance >= _reach(skeleton, longer[0].lengths, chain) * (1.0 - 1e-9):  # a grown chain
            push = max(settings.tolerance, 1e-9 * distance)
            beyond[g] = replace(plain[g], target=tuple((base + away * (1.0 + push / distance)).tolist()))
    first = settings.max_iterations - settings.max_iterations // 2  # the rest is for the rounds
    pose, report = solver(longer[0], beyond, longer[1], replace(settings, max_iterations=first))
    pose = _lay_straight(skeleton, goals, stretching, pose)
    used, tolerance = report.iterations, settings.tolerance
    for attempt in range(ROUNDS):
        tails = pose.tails
        missed = [g for g, goal in enumerate(goals) if np.linalg.norm(tails[goal.bone] - goal.target) > tolerance]
        if not missed or used >= settings.max_iterations:
            break
        lengths = np.asarray(pose.lengths, dtype=float).copy()
        grew = False
        for g in set(missed) & set(stretching):
            goal, chain = goals[g], chain_of(skeleton, goals[g])
            base = pose.heads[chain[-1]]
            target = np.asarray(goal.target, dtype=float)
            missing = float(np.linalg.norm(target - base) - np.linalg.norm(tails[goal.bone] - base))
            if missing > 0.5 * tolerance:  # held short of its target by its bend: grow by what it lacks, and more
                _grow(skeleton, lengths, chain, missing * OVERSHOOT)
                grew = True
        if not grew and attempt > 0:
            break  # (the first round solves again anyway: the first solve aimed past the targets)
        longer_skeleton, grown = with_lengths(skeleton, goals, pose, lengths)
        left = replace(settings, max_iterations=settings.max_iterations - used)
        pose, report = solver(longer_skeleton, plain, grown, left)
        used += report.iterations
    report.iterations = used
    report = _rechecked(skeleton, goals, pose, report, settings.tolerance)
    if report.stopped_by == "unreachable":  # (the first solve's word: its targets lay past the grown chains)
        report.stopped_by = unreached(used, settings.max_iterations)
    return pose, report


def _lay_straight(skeleton: Skeleton, goals: Sequence[Goal], stretching: list[int], pose: Pose) -> Pose:
    """Lay each stretching chain that nothing holds bent straight at its target, where its grown length reaches it
    exactly (the solve only gets near, crawling): connected chains without a rotation goal or a shared bone, where
    the straight pose keeps every limit."""
    for g in stretching:
        goal, chain = goals[g], chain_of(skeleton, goals[g])
        others = {b for h, other in enumerate(goals) if h != g for b in chain_of(skeleton, other)}
        if (
            goal.rotation is not None
            or others & set(chain)
            or any(skeleton.offsets[b].any() for b in chain[:-1])
        ):
            continue
        base = pose.heads[chain[-1]]
        away = np.asarray(goal.target, dtype=float) - base
        distance = float(np.linalg.norm(away))
        if distance <= 0.0 or abs(distance - sum(pose.lengths[b] for b in chain)) > 1e-6 * distance:
            continue  # not grown to exactly its target's distance (another goal grew it further, say)
        bones = chain[::-1]
        frames = matrix_rows.swung_frames(pose.frames[bones], np.broadcast_to(away / distance, (len(bones), 3)))
        along = np.concatenate(([0.0], np.cumsum([pose.lengths[b] for b in bones])[:-1]))
        straight = pose_with(skeleton, pose, bones, base + along[:, None] * (away / distance), frames)
        if _within_limits(skeleton, straight, chain):
            pose = straight
    return pose


def _within_limits(skeleton: Skeleton, pose: Pose, bones: list[int]) -> bool:
    """True when every listed bone's local rotation keeps its joint limit (to 1e-6 rad)."""
    limited = [b for b in bones if skeleton.limits[b] is not None]
    if not limited:
        return True
    for b, local in zip(limited, skeleton.local_rotations(pose, limited)):
        q = quat.from_matrix(local.tolist())
        if quat.angle_between(q, limits.constrain(skeleton.limits[b], q)) > 1e-6:
            return False
    return True


def _rechecked(
    skeleton: Skeleton, goals: Sequence[Goal], pose: Pose, report: SolveReport, tolerance: float
) -> SolveReport:
    """The report with each goal's error measured on the final pose."""
    tails = pose.tails
    report.errors = [float(np.linalg.norm(tails[g.bone] - np.asarray(g.target, dtype=float))) for g in goals]
    turned = all(
        angle * sum(pose.lengths[b] for b in chain_of(skeleton, g)) <= tolerance
        for g, angle in zip(goals, report.rotation_errors or [0.0] * len(goals))
        if g.rotation is not None and g.rotation_weight >= 1.0
    )
    report.converged = max(report.errors) <= tolerance and turned
    if report.converged:
        report.stopped_by = "converged"
    elif report.stopped_by == "converged":
        report.stopped_by = "stalled"
    return report


def supporting(solver: Solver) -> Solver:
    """The solver with IK stretch (see `solve`), for solvers that do not apply it themselves."""

    def solve_stretched(
        skeleton: Skeleton, goals: Sequence[Goal], start: Pose | None = None, settings: SolveSettings = SolveSettings()
    ) -> tuple[Pose, SolveReport]:
        if not applies(skeleton, goals):
            return solver(skeleton, goals, start, settings)
        return solve(solver, skeleton, goals, start, settings)

    solve_stretched.__doc__ = solver.__doc__
    solve_stretched.__name__ = solver.__name__
    return solve_stretched
