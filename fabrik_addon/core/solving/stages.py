# SPDX-License-Identifier: GPL-3.0-or-later
"""The stages of a limited solve (`loop` runs them).

A part is solved by a short list of stages that its plan names (for a part
with joint limits, `parts.limited_stages`; without, `methods`). Each stage is a
small function of the solve in progress (`Solving`: the start, the goals, one
iteration budget, the poses the stages before it made); it offers a pose,
gives the whole answer, or finds it has nothing to do. A limited part's:

- `exact_limb`: a two-bone limb's exact answer (`limb`), where it keeps every limit;
- `free_passes`: FABRIK on the tree without its limits, where they are open
  cones: a pose inside every cone is the answer, and the chain's even bend
  with a joint stopped on its rim (`bend.spread_within`) is too;
- `followed`: from the last frame's pose near its targets, one settling step
  that reaches them (`settle.follow`);
- `refined`: the start as it is, refined in the limits' coordinates (`refine`);
- `passes`: FABRIK's limited passes while each iteration halves the error,
  then the refinement;
- `other_starts`: random poses inside the limits, each as `passes`;
- `settled`: the joints the goals leave free turned into the poles' planes
  and, from the last frame's pose, towards rest;
- `searched`: from the last frame's pose, where every attempt missed a target
  in reach, this frame's whole search, since a jump is better than a miss
  (not again while the targets stay near those one found nothing for).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..chain import bend, fabrik, starts
from ..chain.fabrik import SLOW_WINDOW
from ..chain.local import rotations_from_zero
from ..goals import pole
from ..joints import settle
from ..joints.angles import AngleRig
from ..joints.tree_goals import goal_errors_of
from ..math import quat
from ..math.quat import Quat
from ..math.vec import dist
from ..model import limits
from ..model.problem import Goal, SolveReport, warm_poles
from ..model.tree import Joints, MovingTree, Start
from . import limb, loop
from .loop import VAIN, Solved, Solving, after, of_joints, of_rig

__all__ = [
    "exact_limb", "followed", "free_passes", "other_starts", "passes", "refined", "refined_if_near", "searched",
    "settled",
]


# The stages.


def exact_limb(s: Solving) -> None:
    """A two-bone limb pulled at its tip takes its exact answer (`limb`) where that keeps every limit; beyond its
    reach too, the nearest point it can reach."""
    if not limb.applies(s.tree, s.asked):
        return
    exact = limb.solve(s.tree, s.asked, s.start, s.settings)
    if exact is not None:
        frames, heads, rotations, report = exact
        s.budget.spend(report.iterations)
        s.answer = Solved(report, frames, heads, rotations=rotations if s.start.fixed is not None else None)


def free_passes(s: Solving) -> None:
    """FABRIK's passes on the tree without its open cones: a pose inside every limit is the answer, and so is the
    even bend stopped on a cone's rim; else the attempts go on from FABRIK's pose, so the pose moves on smoothly
    where the limits begin to bind."""
    tree, free, start, settings = s.tree, s.free, s.start, s.settings
    joints, report = fabrik.solve_from(free, s.asked, start, settings, careful=True, window=SLOW_WINDOW)
    solved = of_joints(free, start, joints, report)
    s.budget.spend(report.iterations)
    frames = start.frames if solved.frames is None else solved.frames
    rotations = local_rotations_inside(tree, start, frames) if report.converged else None
    if rotations is None and report.converged and report.iterations == 1 and not s.budget.spent and starts.spreads(
        free, s.asked, settings
    ):
        rimmed = _spread_within(tree, free, s.asked[0], start, joints)
        if rimmed is not None:
            solved, rotations = rimmed
            s.budget.spend(1)
    if rotations is None:
        s.current, s.outside = after(s.skeleton, tree, start, solved), report.converged
        return
    if solved.frames is None:
        solved.frames, solved.heads = list(start.frames), list(start.heads)
    kept = settle.idle_twists_kept(tree, s.problem, solved.frames, start)
    for k, (before, now) in enumerate(zip(solved.frames, kept)):
        if now is not before:  # (a leaf: its parent's frame is as it was)
            p = tree.parent[k]
            zero = start.zero[k] if p < 0 else quat.mul(kept[p], start.zero[k])
            rotations[k] = quat.normalized(quat.mul(quat.conj(zero), now))
    solved.frames = kept
    if start.fixed is not None:
        solved.rotations = rotations
    s.answer = solved


def followed(s: Solving) -> None:
    """From the last frame's pose near its targets, one settling step that reaches them (`settle.follow`); what is
    left of the pull towards rest is the next frame's. FABRIK's straight-line moves would scatter the joints the
    goals leave free, which settling then brings back, at several times the cost."""
    if not s.near():
        return
    rig = s.start_rig()
    steps, reached = settle.follow(rig, s.problem, s.settings.tolerance, s.budget.left, settle.drift_aim(rig))
    s.budget.spend(steps)  # (spent on the frame too where the rig stays as it was)
    if reached:
        errors, rotation_errors = goal_errors_of(rig, s.problem)
        s.answer = of_rig(rig, SolveReport(steps, errors, True, "converged", rotation_errors=rotation_errors))
        s.stepped = True


def refined(s: Solving) -> None:
    """The start as it is, refined in the limits' coordinates: on arms that turn mostly about their own bones (a
    robot's hinges and rolls) FABRIK's moves of points lead away from where the angles would have gone."""
    if not s.may_try():
        return
    s.refined_first = s.attempts == 0
    _refined_as_is(s, s.start, s.start_rig())  # (the rig it refines is the attempt's: nothing reads it after)


def refined_if_near(s: Solving) -> None:
    """`refined`, from the last frame's pose where it is near its targets."""
    if s.near():
        refined(s)


def passes(s: Solving) -> None:
    """FABRIK's limited passes from where the stage before left the pose, while each iteration halves the error,
    then the refinement, which finishes in the coordinates the limits are written in; a pose on its targets
    already (the free passes', outside some limit) is refined as it is."""
    if not s.may_try():
        return
    start = s.current
    s.current = s.start  # (an attempt after this one starts afresh)
    if s.outside:
        s.outside = False
        s.refined_first = s.attempts == 0
        _refined_as_is(s, start, AngleRig(s.tree, start))
        return
    _passed(s, start)


def other_starts(s: Solving) -> None:
    """Other start poses inside the limits, where the start's own attempts reach no pose: each as `passes`. The
    first that reaches ends the search, unless it jumps from the last frame's pose (`Solving.nearest`); of those
    that reach, the one nearest the start is kept."""
    rng = None
    while s.may_try(nearer=True):
        rng = rng or np.random.default_rng(len(s.tree.bones))
        _passed(s, settle.random_start(s.skeleton, s.tree, s.goals, s.start, rng))


def settled(s: Solving) -> None:
    """The joints the goals leave free turned into the plane each pole asks for (the refinement and the other
    starts know nothing of poles) and, from the last frame's pose, towards rest, at most `settle.DRIFT` a frame,
    so paths that close, close; every goal kept reached."""
    best = s.best
    if s.answer is not None or best is None or not best.report.converged or s.budget.spent:
        return
    poled = any(g.pole for g in s.goals)
    joints = Joints(s.tree, s.start, framed=True) if poled else None
    holds = pole.holds(s.tree, joints, s.goals, s.settings.tolerance, warm_poles(s.settings)) if poled else []
    if not holds and s.settings.explore:
        return
    rig = best.rig or AngleRig(s.tree, s.start, (best.heads, best.frames))
    anchor = None if s.settings.explore else AngleRig(s.tree, s.start)
    s.budget.spend(settle.into_poles(rig, s.problem, s.settings.tolerance, s.budget.left, holds, anchor))
    settle.set_idle_twists(rig, s.problem, s.twists())
    # Settling moves the tips within the tolerance: the report says where they ended, not where they were.
    errors, rotation_errors = goal_errors_of(rig, s.problem)
    reached = s.problem.reached(errors, rotation_errors, s.settings.tolerance)
    s.best = Solved(replace(best.report, errors=errors, rotation_errors=rotation_errors, converged=reached,
                            stopped_by=best.report.stopped_by if reached else "stalled"), rig=rig)


def searched(s: Solving) -> None:
    """From the last frame's pose, where the limits hold every attempt away from a target in reach: this frame's
    whole search (other starts inside the limits), which finds a pose that reaches where one exists."""
    if s.answer is not None or s.reached or s.out_of_reach or s.budget.spent or s.settings.explore or not s.search:
        return
    targets = tuple(tuple(float(c) for c in g.target) for g in s.asked)
    if s.vain is not None and len(s.vain) == len(targets) and all(
        dist(a, b) <= VAIN * size for a, b, size in zip(targets, s.vain, s.problem.reach)
    ):
        return  # (a search for targets this near found nothing lately: they lie outside what the limits reach)
    found = loop.run(
        s.search, s.skeleton, s.tree, s.asked, s.start, replace(s.settings, explore=True, max_iterations=s.budget.left),
        free=s.free, nearest=True,
    )
    s.budget.spend(found.report.iterations)
    if found.report.converged:
        s.answer = found
    else:
        s.vain_now = targets


# What the stages share.


def _refined_as_is(s: Solving, start: Start, rig: AngleRig) -> None:
    """An attempt that refines a pose as it is, without FABRIK's passes."""
    errors, rotation_errors = goal_errors_of(rig, s.problem)
    converged = s.problem.reached(errors, rotation_errors, s.settings.tolerance)
    report = SolveReport(0, errors, converged, "converged" if converged else "stalled", rotation_errors=rotation_errors)
    s.offer(s.attempt(start, None, report, rig))


def _passed(s: Solving, start: Start) -> None:
    """An attempt of FABRIK's limited passes from `start`, then the refinement."""
    joints, report = fabrik.solve_from(
        s.tree, s.goals, start, s.budget.settings(s.settings), careful=True, halving=not s.out_of_reach
    )
    s.budget.spend(report.iterations)
    s.offer(s.attempt(start, joints, report, None))


def local_rotations_inside(tree: MovingTree, start: Start, frames: list[Quat]) -> list[Quat] | None:
    """Each node's rotation from the frame it has with no rotation of its own to these frames, where every limited
    node is inside its limit; else None."""
    rotations = rotations_from_zero(tree, start.zero, frames)
    if all(limit is None or limits.allows(limit, q) for limit, q in zip(tree.limits, rotations)):
        return rotations
    return None


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
