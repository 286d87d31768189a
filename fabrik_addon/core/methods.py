# SPDX-License-Identifier: GPL-3.0-or-later
"""How one part of a rig is solved: the methods the plan (`plan`) picks from.

Each takes a part's moving tree, its goals, where it starts (`tree.Start`) and
the settings, and gives the nodes' solved frames and heads with a report.

- `solve_free`: a tree without limits. FABRIK's careful descent
  (`fabrik.solve_from`); where frames are carried (offsets, poles, rotation
  goals) and it stops short, plain FABRIK goes on from there and may wander
  further, within what is left of the budget. Where branches with poles
  share a sub-base (`_crawls`: two arms and a head through one chest),
  every target is in reach and the frame starts from its own pose, the
  passes crawl once the chains are near their targets: after an iteration
  that does not halve the error (`CRAWL_WINDOW`) the refinement finishes,
  and settling turns the poled chains back into their poles' planes; where
  the refinement stops short, the passes go on and the better pose is kept.
- `solve_offsets`: a free tree with unconnected bones pulled by position
  goals. FABRIK's passes slow to a crawl well short of many reachable targets
  there (a finger hanging off the palm pulls the palm about its offset), so
  FABRIK hands over once its best error has not halved over
  `fabrik.SLOW_WINDOW` iterations, and the refinement in the joints' angles
  (`refine`) finishes, from there and, where that stalls, from the start.
- `solve_limited`: a tree with joint limits. A two-bone limb pulled at its
  tip first takes its exact answer (`limb`) where that keeps every limit
  (not where the free passes below take it, nor in continuity mode without
  a pole, where settling pulls the limb's free swivel towards rest).
  Where the limits are open cones FABRIK first runs as on the free tree: a
  pose it converges to inside every limit is the answer; where the chain's
  even bend (`bend`) leaves a cone, its joints stop on their cones' rims and
  the bones after them bend evenly (`bend.spread_within`); a pose on the
  targets that still leaves some limit is refined from there first. Else each attempt runs FABRIK while every iteration
  still halves the error, then hands the pose to the refinement, which
  finishes in the coordinates the limits are written in; dead ends of the
  limits get other start poses inside them. Where every joint is a hinge
  (`hinged`: a robot arm), FABRIK's moves of points leave the hinges' planes
  at every pass, so the refinement starts from the pose as it is, and
  FABRIK's attempt follows only where that stalls. In continuity mode (warm starts)
  a start near its targets moves by one settling step where that reaches
  (`_followed`), else is refined as it is first; where the warm attempts
  stall short of a target in reach, the frame's whole search runs (other
  starts inside the limits), since a jump is better than a miss.

One iteration cap covers everything a method does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from . import bend, fabrik, limb, limits, pole, quat, refine, settle
from .angles import AngleRig, Freedom, TreeGoals, goal_errors_of, values_after_turn
from .fabrik import SLOW_WINDOW
from .local import rotations_from_zero
from .problem import Goal, SolveReport, SolveSettings
from .quat import Quat
from .skeleton import Pose, Skeleton
from .stopping import unreached
from .tree import Joints, MovingTree, Start
from .vec import Vec, dist

__all__ = [
    "CRAWL_WINDOW", "NEAR", "Solved", "hinged", "local_rotations_inside", "open_cones_as_free", "solve_free",
    "solve_limited", "solve_offsets",
]

#: In continuity mode, a limited solve whose start has every goal within this share of its chain's reach moves
#: by one settling step where that reaches, else is refined from the start as it is before FABRIK runs.
NEAR = 0.1
#: Where FABRIK's passes crawl (`_crawls`), the refinement finishes once an iteration has not halved the best
#: error.
CRAWL_WINDOW = 1


@dataclass
class Solved:
    """What a solve made of a tree (a method of one part, or the plan of a whole rig): the report, and the nodes'
    frames (unit quaternions) and heads (None: the nodes stay where they start); where it ended in the limits'
    coordinates, that rig (`rig`); where a method of the whole rig made the whole pose (IK stretch, another
    solver), that pose (`pose`); the nodes' local rotations where the plan has worked them out (`rotations`); where
    the rig's root moved (`root`), its move (`root.Move`): the rest is where the chains stand before it moves them."""

    report: SolveReport
    frames: list[Quat] | None = None
    heads: list[Vec] | None = None
    rig: AngleRig | None = None
    pose: Pose | None = None
    rotations: list[Quat] | None = None
    root: object = None


def _of_joints(tree: MovingTree, start: Start, joints: Joints | None, report: SolveReport) -> Solved:
    """What FABRIK's joints make of the nodes (None: the start as it was)."""
    if joints is None:
        return Solved(report)
    return Solved(report, joints.final_frames(tree, start), list(joints.heads))


def _of_rig(rig: AngleRig, report: SolveReport) -> Solved:
    """What a rig in the limits' coordinates makes of the nodes."""
    return Solved(report, list(rig.frames), list(rig.heads), rig)


def _after(skeleton: Skeleton, tree: MovingTree, start: Start, solved: Solved) -> Start:
    """The start a method goes on from once another left the nodes as `solved` has them."""
    return start if solved.frames is None else start.moved(skeleton, tree, solved.frames, solved.heads)


def solve_free(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings
) -> Solved:
    """A tree without limits (see the module)."""
    problem = _crawls(skeleton, tree, goals, start, settings)
    joints, report = fabrik.solve_from(
        tree, goals, start, settings, careful=True, window=CRAWL_WINDOW if problem is not None else 0
    )
    solved = _of_joints(tree, start, joints, report)
    if report.stopped_by == "handover":
        solved = _finished(skeleton, tree, problem, start, settings, joints, solved)
        report = solved.report
    if report.converged or report.stopped_by == "unreachable" or not settings.explore:
        return solved
    framed = tree.needs_frames or any(g.rotation is not None or g.pole is not None for g in goals)
    left = settings.max_iterations - report.iterations
    if not framed or left <= 0:
        return solved
    # The careful descent found no way on from where it started; plain FABRIK may wander further and find the
    # target, within what is left of the budget. It wins where it is better by more than the stall fraction (what
    # the stopping rules count as progress: two attempts that both stopped at a pose agree to rounding).
    after = _after(skeleton, tree, start, solved)
    joints, other = fabrik.solve_from(tree, goals, after, replace(settings, max_iterations=left), careful=False)
    total = report.iterations + other.iterations
    if other.converged or sum(other.errors) < sum(report.errors) * (1.0 - settings.stall_fraction):
        solved = Solved(other, after.frames, after.heads) if joints is None else _of_joints(tree, after, joints, other)
    solved.report.iterations, solved.report.restarts = total, 1
    return solved


def _crawls(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings
) -> TreeGoals | None:
    """The goals as the refinement sees them where FABRIK's passes crawl on the tree and the refinement finishes
    (else None): branches with poles that share a sub-base (each pass moves the sub-base a share of the way its
    branches ask, so the error falls by a steady share per iteration), every target in reach (beyond it,
    stretching towards the targets is FABRIK's own move), each frame solved from its own pose (from the previous
    solution the passes start near the answer, and the refinement's steps on many coordinates cost more than the
    passes they save)."""
    if not settings.explore or len(goals) < 2 or any(g.rotation is not None for g in goals) or all(
        g.pole is None for g in goals
    ):
        return None
    # Two goals' branches meet where the tree has fewer bases than goals: a chain shares a bone with another, or
    # hangs from one (an arm from the collar, from the chest a head's chain moves).
    if sum(p < 0 for p in tree.parent) >= len(goals):
        return None
    problem = TreeGoals(tree, goals)
    return None if problem.out_of_reach(start.heads, skeleton, settings.tolerance) else problem


def _finished(
    skeleton: Skeleton, tree: MovingTree, problem: TreeGoals, start: Start, settings: SolveSettings,
    joints: Joints | None, solved: Solved,
) -> Solved:
    """FABRIK's pose (`solved`, where it crawled) refined in the joints' angles until every goal is reached, then
    settled into the poles' planes (`joints.holds`). Where the refinement does not reach, FABRIK's passes go on
    from where they handed over, and the better of the two is the answer. Every iteration is counted."""
    used, budget = solved.report.iterations, settings.max_iterations
    refined_solved = None
    if used < budget and joints is not None:
        rig = AngleRig(tree, _after(skeleton, tree, start, solved))
        refined = refine.solve(rig, problem, settings.tolerance, budget - used)
        used += refined.iterations
        if refined.converged:
            if used < budget:
                aim = _settling_aim(tree, joints.holds, to_rest=False)
                used += settle.settle(rig, problem, settings.tolerance, budget - used, aim)
            errors, rotation_errors = goal_errors_of(rig, problem)
            report = SolveReport(used, errors, True, "converged", rotation_errors=rotation_errors)
            return Solved(report, list(rig.frames), list(rig.heads), rig)
        refined_solved = Solved(
            SolveReport(used, refined.errors, False, refined.stopped_by, rotation_errors=refined.rotation_errors),
            list(rig.frames), list(rig.heads), rig,
        )
    best = solved
    if used < budget:
        after = _after(skeleton, tree, start, solved)
        joints, report = fabrik.solve_from(
            tree, problem.goals, after, replace(settings, max_iterations=budget - used), careful=True
        )
        used += report.iterations
        best = Solved(report, after.frames, after.heads) if joints is None else _of_joints(tree, after, joints, report)
    if refined_solved is not None and not best.report.converged and (
        problem.cost(refined_solved.report.errors, refined_solved.report.rotation_errors)
        < problem.cost(best.report.errors, best.report.rotation_errors)
    ):
        best = refined_solved
    best.report.iterations = used
    if not best.report.converged:
        best.report.stopped_by = unreached(used, budget)
    return best


def solve_offsets(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings
) -> Solved:
    """A free tree with unconnected bones, pulled by position goals (see the module); FABRIK's part is what the
    passes on numpy rows give too (`rows`)."""
    budget = settings.max_iterations
    joints, report = fabrik.solve_from(tree, goals, start, settings, careful=True, window=SLOW_WINDOW)
    best = _of_joints(tree, start, joints, report)
    if report.converged or all(g.weight <= 0.0 for g in goals):  # (goals of no weight pull nothing)
        if report.stopped_by == "handover":
            report.stopped_by = "stalled"
        return best
    problem = TreeGoals(tree, goals)
    if problem.out_of_reach(start.heads, skeleton, settings.tolerance):
        # No pose reaches every target: FABRIK's stretch towards them is as good an answer, and the bake's
        # passes on numpy rows need not solve such frames again.
        report.stopped_by = "unreachable"
        return best
    used = report.iterations
    for attempt, attempt_start in enumerate((_after(skeleton, tree, start, best), start)):
        if used >= budget or (attempt > 0 and not settings.explore):
            break
        rig = AngleRig(tree, attempt_start)
        refined = refine.solve(rig, problem, settings.tolerance, budget - used)
        used += refined.iterations
        if refined.converged or refined.cost < problem.cost(best.report.errors, []):
            stopped_by = "converged" if refined.converged else refined.stopped_by
            best = _of_rig(rig, SolveReport(used, refined.errors, refined.converged, stopped_by))
        if best.report.converged:
            break
    report = best.report
    report.iterations, report.restarts = used, attempt
    if not report.converged:
        report.stopped_by = unreached(used, budget)
    return best


def open_cones_as_free(tree: MovingTree) -> MovingTree | None:
    """The tree without its limits, where every bone hangs from its parent's tail and every limit leaves the rest
    direction a cone to swing in and the rest twist a range to turn in (no lock, hinge or stiffness); else None.
    Where no limit binds, a limited pass moves every joint as the free pass does, so such a chain (a tentacle, a
    spine) is solved as the free one first. (Kept with the tree.)"""
    if "free" not in tree.derived:
        tree.derived["free"] = _without_open_cones(tree)
    return tree.derived["free"]


def _without_open_cones(tree: MovingTree) -> MovingTree | None:
    """`open_cones_as_free`, worked out."""
    if not all(c for c, p in zip(tree.connected, tree.parent) if p >= 0):
        return None
    for limit in tree.limits:
        if limit is None:
            continue
        (lo_x, hi_x), (lo_z, hi_z), (lo_y, hi_y) = limit.x_range, limit.z_range, limit.y_range
        # (a locked twist: the free passes' shortest turns would leave it a hair off, at every solve)
        if limit.is_stiff or not (lo_x < 0.0 < hi_x and lo_z < 0.0 < hi_z and lo_y < 0.0 < hi_y):
            return None
    n = len(tree.bones)
    return replace(tree, limits=(None,) * n, limited_child=(-1,) * n)


def _spread_within(
    tree: MovingTree, free: MovingTree, goal: Goal, start: Start, spread: Joints
) -> tuple[Solved, list[Quat]] | None:
    """The chain's even bend (`spread`: the free passes' joints, which made it) with every joint it takes out of its
    cone stopped on the rim (`bend.spread_within`), and the local rotations, where every joint keeps its limit;
    else None."""
    target = (float(goal.target[0]), float(goal.target[1]), float(goal.target[2]))
    points = bend.spread_within(
        spread.heads + [spread.tails[-1]], free.length, target, start.frames, start.zero, tree.limits
    )
    if points is None:
        return None
    joints = Joints(free, start)
    joints.heads, joints.tails = points[:-1], points[1:]
    frames = joints.final_frames(free, start)
    rotations = local_rotations_inside(tree, start, frames)
    if rotations is None:
        return None
    return Solved(SolveReport(1, [dist(points[-1], target)], True, "converged", rotation_errors=[0.0]), frames,
                  list(joints.heads)), rotations


def solved_as_free(tree: MovingTree, goals: Sequence[Goal], settings: SolveSettings) -> MovingTree | None:
    """The free tree `solve_limited` first solves this limited tree as (`open_cones_as_free`), or None where it
    does not: poles and rotation goals need the frames, and continuity mode settles the limited solve's pose."""
    if not settings.explore or any(g.rotation is not None or g.pole is not None for g in goals):
        return None
    return open_cones_as_free(tree)


def local_rotations_inside(tree: MovingTree, start: Start, frames: list[Quat]) -> list[Quat] | None:
    """Each node's rotation from the frame it has with no rotation of its own to these frames
    (`local.rotations_from_zero`: from a start forward kinematics made, the channels'), where every limited node is
    inside its limit; else None."""
    rotations = rotations_from_zero(tree, start.zero, frames)
    if all(limit is None or limits.allows(limit, q) for limit, q in zip(tree.limits, rotations)):
        return rotations
    return None


def hinged(tree: MovingTree) -> bool:
    """Whether every joint of the tree turns about one axis at most (a robot arm's); kept with the tree."""
    if "hinged" not in tree.derived:
        tree.derived["hinged"] = all(
            limit is not None and sum(hi - lo > 1e-12 for lo, hi in (limit.x_range, limit.z_range, limit.y_range)) <= 1
            for limit in tree.limits
        )
    return tree.derived["hinged"]


def solve_limited(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings,
    start_rig: AngleRig | None = None,
) -> Solved:
    """A tree with joint limits (see the module); in continuity mode `start_rig` is the start in the limits'
    coordinates where the caller keeps it (the rig the last frame left)."""
    # The limb's exact step: where the free passes do not take it (open cones, which bakes solve on numpy rows),
    # and, in continuity mode, where a pole holds its plane (without one, settling pulls the limb to rest).
    problem = TreeGoals(tree, goals)
    if limb.applies(tree, goals) and solved_as_free(tree, goals, settings) is None and (
        settings.explore or goals[0].pole is not None
    ):
        # (beyond its reach too: the nearest point it can reach, as the limited solve below aims)
        exact = limb.solve(tree, goals, start, settings)
        if exact is not None:
            frames, heads, rotations, report = exact
            return Solved(report, frames, heads, rotations=rotations if start.fixed is not None else None)
    budget = settings.max_iterations
    used, attempt_start = 0, start
    reached_free = False  # whether the free passes reached the targets, leaving some limit
    free = solved_as_free(tree, goals, settings)
    if free is not None:
        joints, report = fabrik.solve_from(free, goals, start, settings, careful=True, window=SLOW_WINDOW)
        solved = _of_joints(free, start, joints, report)
        used = report.iterations
        frames = start.frames if solved.frames is None else solved.frames
        rotations = local_rotations_inside(tree, start, frames) if report.converged else None
        if rotations is None and report.converged and used == 1 and used < budget and fabrik.spreads(free, goals, settings):
            # The even bend took a joint out of its cone: that joint on its rim, the bones after it bent evenly.
            rimmed = _spread_within(tree, free, goals[0], start, joints)
            if rimmed is not None:
                solved, rotations = rimmed
                used = solved.report.iterations = used + 1
        if rotations is not None:
            if solved.frames is None:
                solved.frames, solved.heads = list(start.frames), list(start.heads)
            kept = settle.idle_twists_kept(tree, problem, solved.frames, start)
            for k, (before, after) in enumerate(zip(solved.frames, kept)):
                if after is not before:  # (a leaf: its parent's frame is as it was)
                    p = tree.parent[k]
                    zero = start.zero[k] if p < 0 else quat.mul(kept[p], start.zero[k])
                    rotations[k] = quat.normalized(quat.mul(quat.conj(zero), after))
            solved.frames = kept
            if start.fixed is not None:
                solved.rotations = rotations
            return solved
        # Some joint left its limit: the limited solve goes on from FABRIK's pose, so that where the limits
        # begin to bind from one frame to the next, the pose moves on from where the free passes had it.
        attempt_start = _after(skeleton, tree, start, solved)
        reached_free = report.converged
    # (a kept rig's base heads are the start's: it was made on the same fixed frames)
    aims = problem.out_of_reach((start if start_rig is None else start_rig).heads, skeleton, settings.tolerance)
    asked = goals
    if aims:
        # Beyond reach: get as close as the limits allow, aiming at the nearest point in reach.
        goals = [replace(g, target=aims[i]) if i in aims else g for i, g in enumerate(goals)]
        problem = TreeGoals(tree, goals)
    out_of_reach = bool(aims)
    # In continuity mode the start is the last frame's settled solution: near its targets, one settling step
    # may reach them; else it is refined as it is first (below). FABRIK's straight-line moves would scatter the
    # joints the goals leave free, which settling then brings back, at several times the cost.
    if settings.explore or out_of_reach:
        start_rig = None
    elif start_rig is None:
        start_rig = AngleRig(tree, start)
    near_first = start_rig is not None and _near(problem, start_rig)
    # A pose on the targets that leaves a limit is refined as it is first: where the limits begin to bind from one
    # frame to the next, the pose moves on from the free chain's (FABRIK's limited passes would move it further).
    unpassed = near_first or reached_free or hinged(tree)
    if near_first and all(g.pole is None for g in goals):
        steps, report = _followed(problem, start_rig, settings)
        if report is not None:
            return _of_rig(start_rig, report)
        used += steps  # (spent on the frame too, though the rig is as it was)
    rng = None  # (made when a random start is first needed)
    attempt = 0
    # Per attempt: (the rig it ended in, or else its frames and heads, and the report).
    best: tuple[AngleRig | None, tuple | None, SolveReport] | None = None
    # Every attempt's idle twists go back to the start pose's.
    twists = settle.start_twists(tree, problem, start)
    while True:
        left = replace(settings, max_iterations=budget - used)
        joints = None  # FABRIK's result, where it ran and moved the attempt's start
        rig = None
        if attempt == (0 if unpassed else 1):
            # The first other start is the same pose without FABRIK: on arms that turn mostly about their
            # own bones (twists) FABRIK's moves can lead away from where the angles would have gone.
            rig = start_rig if near_first and attempt == 0 else AngleRig(tree, attempt_start)
            errors, rotation_errors = goal_errors_of(rig, problem)
            converged = problem.reached(errors, rotation_errors, settings.tolerance)
            report = SolveReport(
                0, errors, converged, "converged" if converged else "stalled", rotation_errors=rotation_errors
            )
        else:
            # Stretching towards a target out of reach is FABRIK's own move: let it go on until it stalls there.
            joints, report = fabrik.solve_from(
                tree, goals, attempt_start, left, careful=True, halving=not out_of_reach
            )
        moved = None if joints is None else (joints.heads, joints.frames)
        used += report.iterations
        refined_rig = None
        if not report.converged and rig is None:
            # What is kept is the pose as the limits' coordinates read it (the refinement starts from it too):
            # where FABRIK's best was a start outside the limits (a pole's turn can take the first bone out of
            # them) that no pass beat, that start comes back inside and its tip moves, so its errors are measured
            # again.
            rig = AngleRig(tree, attempt_start, moved)
            report.errors, report.rotation_errors = goal_errors_of(rig, problem)
        if not report.converged and used < budget:
            refined = refine.solve(rig, problem, settings.tolerance, budget - used)
            used += refined.iterations
            if refined.cost <= problem.cost(report.errors, report.rotation_errors) or refined.converged:
                refined_rig = rig
                report = SolveReport(
                    used, refined.errors, refined.converged, "converged" if refined.converged else refined.stopped_by,
                    rotation_errors=refined.rotation_errors,
                )
        if refined_rig is None and not report.converged:
            refined_rig = AngleRig(tree, attempt_start, moved)  # (again: the refinement moved `rig`)
        elif refined_rig is None and joints is None and rig is not None:
            refined_rig = rig  # (reached as the limits' coordinates read the start: that pose, inside them)
        placed = None  # (a refined attempt is kept as its rig)
        if refined_rig is not None:
            settle.set_idle_twists(refined_rig, problem, twists)
        else:
            frames, heads = (
                (joints.final_frames(tree, attempt_start), list(joints.heads)) if joints is not None
                else (list(attempt_start.frames), list(attempt_start.heads))
            )
            placed = settle.idle_twists_kept(tree, problem, frames, start, twists), heads
        if best is None or report.converged or problem.cost(report.errors, report.rotation_errors) < problem.cost(
            best[2].errors, best[2].rotation_errors
        ):
            best = refined_rig, placed, report
        fallback = unpassed and attempt == 0  # (FABRIK's attempt after the refinement's own, in any mode)
        if best[2].converged or out_of_reach or used >= budget or (
            not fallback and (not settings.explore or attempt >= settings.restarts)
        ):
            break
        attempt += 1
        if attempt > 1 and rng is None:
            rng = np.random.default_rng(len(tree.bones))
        attempt_start = start if attempt == 1 else settle.random_start(skeleton, tree, goals, start, rng)
    rig, placed, report = best
    holds = pole.holds(tree, Joints(tree, start, framed=True), goals, settings.tolerance) if any(
        g.pole for g in goals
    ) else []
    if report.converged and (holds or not settings.explore) and used < budget:
        # The joints the goals leave free settle: into the plane the poles ask for (the refinement and the
        # restarts know nothing of poles), and in continuity mode (warm starts) towards rest, so paths that
        # close, close.
        rig = rig or AngleRig(tree, start, (placed[1], placed[0]))
        aim = _settling_aim(tree, holds, to_rest=not settings.explore)
        used += settle.settle(rig, problem, settings.tolerance, budget - used, aim)
        settle.set_idle_twists(rig, problem, twists)
    solved = _of_rig(rig, report) if rig is not None else Solved(report, *placed)
    report.iterations, report.restarts = used, attempt
    if aims:
        report.errors = [dist(_tail(tree, solved, tree.tips[i]), g.target) for i, g in enumerate(asked)]
        report.converged = max(report.errors) <= settings.tolerance
    if not report.converged and not out_of_reach and not settings.explore and used < budget:
        # A warm start that the limits hold away from a target in reach: this frame's whole search (other starts
        # inside the limits) finds a pose that reaches, where one exists; a jump is better than a miss.
        searched = solve_limited(skeleton, tree, asked, start, replace(settings, explore=True, max_iterations=budget - used))
        used += searched.report.iterations
        if searched.report.converged:
            searched.report.iterations = used
            return searched
        report.iterations = used  # (the search found nothing better: the warm pose stays, its cost counted)
    if not report.converged:
        report.stopped_by = "unreachable" if out_of_reach else unreached(used, budget)
    return solved


def _tail(tree: MovingTree, solved: Solved, k: int) -> Vec:
    """Node k's tail as `solved` places it."""
    h, y, n = solved.heads[k], quat.y_axis(solved.frames[k]), tree.length[k]
    return (h[0] + n * y[0], h[1] + n * y[1], h[2] + n * y[2])


def _near(problem: TreeGoals, rig: AngleRig) -> bool:
    """Whether every goal that pulls is within NEAR of its chain's reach of its target as the rig is posed."""
    return all(
        w <= 0.0 or dist(rig.tip(node), target) <= NEAR * size
        for node, target, w, size in zip(problem.nodes, problem.targets, problem.weights, problem.reach)
    )


def _followed(problem: TreeGoals, rig: AngleRig, settings: SolveSettings) -> tuple[int, SolveReport | None]:
    """Continuity mode's move on a limited tree (`solve_limited`): from the rig the last frame left, where every
    goal is near its target and in reach and no pole turns a chain, one settling step that reaches every goal
    (`settle.follow`); what is left of the pull towards rest is the next frame's. The iterations it took, and the
    report, or None where the step does not reach (the rig as it was), and the whole solve runs."""
    steps, followed = settle.follow(rig, problem, settings.tolerance, settings.max_iterations)
    if not followed:
        return steps, None
    errors, rotation_errors = goal_errors_of(rig, problem)
    return steps, SolveReport(steps, errors, True, "converged", rotation_errors=rotation_errors)


def _settling_aim(tree: MovingTree, holds: list[pole.PoleHold], to_rest: bool) -> settle.Aim:
    """Where settling pulls: each pole chain's first bone turned about its base-target line into the pole's
    plane (the rest of the chain follows it unchanged), and with `to_rest` every other limited joint to rest."""

    def aim(rig: AngleRig, free: Freedom) -> np.ndarray:
        coordinates = free.coordinates
        wanted = settle.rest_aim(rig, free) if to_rest else np.full(len(coordinates), np.nan)
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
