# SPDX-License-Identifier: GPL-3.0-or-later
"""How one free part of a rig is solved: the methods the plan (`plan`) picks from besides the limited stages.

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
- limited trees are solved by stages (`stages`), which the plan names.

One iteration cap covers everything a method does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from . import fabrik, refine, settle
from .angles import AngleRig, TreeGoals, goal_errors_of
from .fabrik import SLOW_WINDOW
from .problem import Goal, SolveReport, SolveSettings
from .skeleton import Skeleton
from .stages import Solved, after as _after, of_rig as _of_rig
from .stopping import unreached
from .tree import Joints, MovingTree, Start

__all__ = ["CRAWL_WINDOW", "solve_free", "solve_offsets"]

#: Where FABRIK's passes crawl (`_crawls`), the refinement finishes once an iteration has not halved the best
#: error.
CRAWL_WINDOW = 1


def _of_joints(tree: MovingTree, start: Start, joints: Joints | None, report: SolveReport) -> Solved:
    """What FABRIK's joints make of the nodes (None: the start as it was)."""
    if joints is None:
        return Solved(report)
    return Solved(report, joints.final_frames(tree, start), list(joints.heads))


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
                aim = settle.pole_aim(tree, joints.holds, None)
                crawl = 1.0 if joints.holds else settle.CRAWL  # (into a pole's plane all the way)
                used += settle.settle(rig, problem, settings.tolerance, budget - used, aim, crawl)
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
