# SPDX-License-Identifier: GPL-3.0-or-later
"""The stages of a part without joint limits, as the plan (`parts.FREE_STAGES`) names them.

Like a limited part's (`stages`), each is a small function of the solve in
progress (`loop.Solving`) that gives the whole answer or leaves it to the
next, and one budget carries the iterations through them.

- `passes`: FABRIK's careful descent (`fabrik.solve_from`). Where branches
  with poles share a sub-base (`_crawls`: two arms and a head through one
  chest), every target is in reach and the frame starts from its own pose,
  the passes crawl once the chains are near their targets: after an
  iteration that does not halve the error (`CRAWL_WINDOW`) they hand over.
- `finished`: where the passes handed over, the refinement finishes and
  settling turns the poled chains back into their poles' planes; where the
  refinement stops short, the passes go on and the better pose is kept.
- `wandered`: where frames are carried (offsets, poles, rotation goals) and
  the careful descent stopped short, plain FABRIK goes on from there and may
  wander further, within what is left of the budget.
- `offset_passes`: a free tree with unconnected bones pulled by position
  goals. FABRIK's passes slow to a crawl well short of many reachable
  targets there (a finger hanging off the palm pulls the palm about its
  offset), so they hand over once their best error has not halved over
  `fabrik.SLOW_WINDOW` iterations;
- `offsets_refined`: the refinement in the joints' angles (`refine`)
  finishes, from there and, where that stalls, from the start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..chain import fabrik
from ..chain.fabrik import SLOW_WINDOW
from ..joints import refine, settle
from ..joints.angles import AngleRig
from ..joints.tree_goals import TreeGoals, goal_errors_of
from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Skeleton
from ..model.stopping import unreached
from ..model.tree import Joints, MovingTree, Start
from .loop import Solved, Solving, after, of_joints, of_rig

__all__ = ["CRAWL_WINDOW", "finished", "offset_passes", "offsets_refined", "passes", "wandered"]

#: Where FABRIK's passes crawl (`_crawls`), the refinement finishes once an iteration has not halved the best
#: error.
CRAWL_WINDOW = 1


def passes(s: Solving) -> None:
    """FABRIK's careful descent; handing over to the refinement where the passes crawl (`_crawls`)."""
    s.crawling = _crawls(s.skeleton, s.tree, s.goals, s.start, s.settings)
    joints, report = fabrik.solve_from(
        s.tree, s.goals, s.start, s.budget.settings(s.settings), careful=True,
        window=CRAWL_WINDOW if s.crawling is not None else 0,
    )
    s.budget.spend(report.iterations)
    s.joints, s.best = joints, of_joints(s.tree, s.start, joints, report)


def finished(s: Solving) -> None:
    """Where the passes handed over: the refinement finishes, then settling into the poles' planes
    (`_finished`)."""
    if s.best.report.stopped_by != "handover":
        return
    s.best = _finished(s.skeleton, s.tree, s.crawling, s.start, s.settings, s.joints, s.best)
    s.budget.used = s.best.report.iterations


def wandered(s: Solving) -> None:
    """Where frames are carried and the careful descent stopped short in a frame that searches from its own start:
    plain FABRIK from there, kept where it is better by more than the stall fraction. The answer."""
    tree, goals, settings, solved = s.tree, s.goals, s.settings, s.best
    report = solved.report
    s.answer = solved
    if report.converged or report.stopped_by == "unreachable" or not settings.explore or s.budget.spent:
        return
    if not (tree.needs_frames or any(g.rotation is not None or g.pole is not None for g in goals)):
        return
    begun = after(s.skeleton, tree, s.start, solved)
    joints, other = fabrik.solve_from(tree, goals, begun, s.budget.settings(settings), careful=False)
    s.budget.spend(other.iterations)
    if other.converged or sum(other.errors) < sum(report.errors) * (1.0 - settings.stall_fraction):
        solved = Solved(other, begun.frames, begun.heads) if joints is None else of_joints(tree, begun, joints, other)
    solved.report.restarts = 1
    s.answer = solved


def _crawls(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings
) -> TreeGoals | None:
    """The goals as the refinement sees them where FABRIK's passes crawl and the refinement finishes, else None:
    branches with poles that share a sub-base (each pass moves the sub-base only a share of the way), every target
    in reach, each frame solved from its own pose."""
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
        rig = AngleRig(tree, after(skeleton, tree, start, solved))
        refined = refine.solve(rig, problem, settings.tolerance, budget - used)
        used += refined.iterations
        if refined.converged:
            if used < budget:
                used += settle.into_poles(rig, problem, settings.tolerance, budget - used, joints.holds, None)
            errors, rotation_errors = goal_errors_of(rig, problem)
            report = SolveReport(used, errors, True, "converged", rotation_errors=rotation_errors)
            return Solved(report, list(rig.frames), list(rig.heads), rig)
        refined_solved = Solved(
            SolveReport(used, refined.errors, False, refined.stopped_by, rotation_errors=refined.rotation_errors),
            list(rig.frames), list(rig.heads), rig,
        )
    best = solved
    if used < budget:
        begun = after(skeleton, tree, start, solved)
        joints, report = fabrik.solve_from(
            tree, problem.goals, begun, replace(settings, max_iterations=budget - used), careful=True
        )
        used += report.iterations
        best = Solved(report, begun.frames, begun.heads) if joints is None else of_joints(tree, begun, joints, report)
    if refined_solved is not None and not best.report.converged and (
        problem.cost(refined_solved.report.errors, refined_solved.report.rotation_errors)
        < problem.cost(best.report.errors, best.report.rotation_errors)
    ):
        best = refined_solved
    best.report.iterations = used
    if not best.report.converged:
        best.report.stopped_by = unreached(used, budget)
    return best


def offset_passes(s: Solving) -> None:
    """FABRIK's careful descent, handing over once its best error has not halved over `SLOW_WINDOW` iterations;
    FABRIK's part is what the passes on numpy rows give too (`fabrik_rows`). Converged, pulled by no goal, or with a
    target beyond reach (FABRIK's stretch towards it is as good an answer): the answer."""
    tree, goals, start, settings = s.tree, s.goals, s.start, s.settings
    joints, report = fabrik.solve_from(
        tree, goals, start, s.budget.settings(settings), careful=True, window=SLOW_WINDOW
    )
    s.budget.spend(report.iterations)
    s.best = of_joints(tree, start, joints, report)
    if report.converged or all(g.weight <= 0.0 for g in goals):  # (goals of no weight pull nothing)
        if report.stopped_by == "handover":
            report.stopped_by = "stalled"
        s.answer = s.best
    elif s.problem.out_of_reach(start.heads, s.skeleton, settings.tolerance):
        # (and the bake's passes on numpy rows need not solve such frames again)
        report.stopped_by = "unreachable"
        s.answer = s.best


def offsets_refined(s: Solving) -> None:
    """The refinement from where the passes left the tree and, where that stalls and this frame searches from
    its own start, from the start. The answer."""
    problem, settings, best = s.problem, s.settings, s.best
    attempt = 0
    for attempt, attempt_start in enumerate((after(s.skeleton, s.tree, s.start, best), s.start)):
        if s.budget.spent or (attempt > 0 and not settings.explore):
            attempt = max(0, attempt - 1)  # (the attempts made: this one is not)
            break
        rig = AngleRig(s.tree, attempt_start)
        refined = refine.solve(rig, problem, settings.tolerance, s.budget.left)
        s.budget.spend(refined.iterations)
        if refined.converged or refined.cost < problem.cost(best.report.errors, []):
            stopped_by = "converged" if refined.converged else refined.stopped_by
            best = of_rig(rig, SolveReport(s.budget.used, refined.errors, refined.converged, stopped_by))
        if best.report.converged:
            break
    report = best.report
    report.restarts = attempt
    if not report.converged:
        report.stopped_by = s.budget.why()
    s.answer = best
