# SPDX-License-Identifier: GPL-3.0-or-later
"""The solve in progress that a part's stages share (`Solving`), what a solve leaves (`Solved`), and the loop that
runs the stages (`run`).

Each stage is a small function of the solve in progress: the start, the
goals, one iteration budget, the poses the stages before it made. It offers a
pose, gives the whole answer, or finds it has nothing to do. Where several
poses reach, the nearest to the start in joint angles is kept, as TRAC-IK's
distance mode does: other starts are tried only where the start's own
attempts do not reach, and ranked by that distance. A frame that goes on from
the last one and turns a joint further than `JUMP` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..chain.local import rotations_from_zero
from ..joints import refine, settle
from ..joints.angles import AngleRig
from ..joints.tree_goals import TreeGoals, goal_errors_of
from ..math import quat
from ..math.quat import Quat
from ..math.vec import Vec, dist
from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Pose, Skeleton
from ..model.stopping import Budget
from ..model.tree import Joints, MovingTree, Start

__all__ = ["JUMP", "NEAR", "VAIN", "Solved", "Solving", "Stage", "after", "of_joints", "of_rig", "run"]

#: From the last frame's pose, a solve whose start has every goal within this share of its chain's reach is near:
#: one settling step may reach, else the start is refined as it is before FABRIK's passes move it.
NEAR = 0.1


#: A joint turned further than this (radians) from where a frame that goes on from the last one started is a jump.
JUMP = math.radians(30.0)


#: From the last frame's pose, a whole search is not run again for targets each within this share of its chain's
#: reach of those a recent one found nothing for: along a path through what the limits do not reach, every frame
#: would search in vain.
VAIN = 0.05


@dataclass
class Solved:
    """What a solve made of a tree (a stage, a part's method, or a whole rig's plan): the report, and the nodes'
    frames and heads (None: they stay where they start); with what some solves leave besides (`rig`, `pose`,
    `rotations`, `root`, `vain`: see each field)."""

    report: SolveReport
    frames: list[Quat] | None = None
    heads: list[Vec] | None = None
    rig: AngleRig | None = None
    pose: Pose | None = None
    rotations: list[Quat] | None = None
    root: object = None
    #: Where this frame's whole search (`stages.searched`) found no pose that reaches: the targets it searched for.
    vain: tuple[Vec, ...] | None = None


def of_rig(rig: AngleRig, report: SolveReport) -> Solved:
    """What a rig in the limits' coordinates makes of the nodes."""
    return Solved(report, list(rig.frames), list(rig.heads), rig)


def of_joints(tree: MovingTree, start: Start, joints: Joints | None, report: SolveReport) -> Solved:
    """What FABRIK's joints make of the nodes from `start` (None: they stay where the part's start has them)."""
    return Solved(report) if joints is None else Solved(report, joints.final_frames(tree, start), list(joints.heads))


def after(skeleton: Skeleton, tree: MovingTree, start: Start, solved: Solved) -> Start:
    """The start a stage goes on from once another left the nodes as `solved` has them."""
    return start if solved.frames is None else start.moved(skeleton, tree, solved.frames, solved.heads)


class Solving:
    """One part's solve in progress: what every stage reads, the budget, and the best pose so far."""

    def __init__(
        self, skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings,
        kept: AngleRig | None = None, free: MovingTree | None = None, search: Sequence[Stage] = (),
        nearest: bool = False, vain: tuple[Vec, ...] | None = None,
    ) -> None:
        self.skeleton, self.tree, self.start, self.settings = skeleton, tree, start, settings
        #: The targets a recent frame's whole search found nothing for (continuity mode), and this frame's, if so.
        self.vain, self.vain_now = vain, None
        #: The goals as asked; `goals` and `problem` aim at the nearest point in reach where a target is beyond it.
        self.asked = self.goals = goals
        self._problem: TreeGoals | None = None
        self.aims: dict[int, Vec] = {}
        self.budget = Budget(settings.max_iterations)
        #: The rig the last frame left, in continuity mode (where the caller keeps it).
        self.kept = None if settings.explore else kept
        #: The tree without its open cones (`stages.free_passes`), and the stages of the frame's whole search.
        self.free, self.search = free, search
        #: Whether other starts go on past one that reaches but jumps (the search of a frame that goes on from the
        #: last one, where a jump shows), to keep the nearest.
        self.nearest = nearest
        #: Where the next attempt goes on from, and whether that pose reaches its targets outside some limit.
        self.current, self.outside = start, False
        #: FABRIK's joints as the passes of a free part left them (`methods`), and the goals as the refinement
        #: sees them where those passes crawl (else None).
        self.joints: Joints | None = None
        self.crawling: TreeGoals | None = None
        #: The attempts made (FABRIK's and the refinement's from some start), and whether the first refined the
        #: start as it was (then FABRIK's attempt follows it in any mode).
        self.attempts, self.refined_first = 0, False
        self.best: Solved | None = None
        #: A stage's whole answer (the limb's, the free passes', a settling step's, the search's), and whether it
        #: is one settling step (which moves no coordinate much further than `settle.DRIFT`: no jump to look for).
        self.answer: Solved | None = None
        self.stepped = False
        self._aimed = False
        self._near: bool | None = None
        self._start_rig: AngleRig | None = None
        self._twists: dict[int, float] | None = None
        self._start_local: list[Quat] | None = None

    # What the stages share.

    @property
    def problem(self) -> TreeGoals:
        """The goals as the refinement and settling see them (made when first asked for: FABRIK's own stages on
        a free part need none)."""
        if self._problem is None:
            self._problem = TreeGoals(self.tree, self.goals)
        return self._problem

    def aim(self) -> None:
        """Beyond reach, aim at the nearest point in reach: the limited attempts get as close as the limits allow."""
        if self._aimed:
            return
        self._aimed = True
        heads = (self.start if self.kept is None else self.kept).heads  # (a kept rig's base heads are the start's)
        self.aims = self.problem.out_of_reach(heads, self.skeleton, self.settings.tolerance)
        if self.aims:
            self.goals = [replace(g, target=self.aims[i]) if i in self.aims else g for i, g in enumerate(self.goals)]
            self._problem = TreeGoals(self.tree, self.goals)

    @property
    def out_of_reach(self) -> bool:
        """Whether some target lies beyond its chain's reach."""
        return bool(self.aims)

    @property
    def reached(self) -> bool:
        """Whether some attempt reached every goal."""
        return self.best is not None and self.best.report.converged

    def may_try(self, nearer: bool = False) -> bool:
        """Whether another attempt runs: the first does; then only where none reached (or, `nearer`, the one that
        reached jumped), iterations are left and every target is in reach; and further starts only where this frame
        searches, up to `restarts`."""
        self.aim()
        if self.attempts == 0:
            return True
        if self.budget.spent or self.out_of_reach:
            return False
        if self.reached and not (nearer and self.nearest and self.jumps(self.best)):
            return False
        return (self.attempts == 1 and self.refined_first) or (
            self.settings.explore and self.attempts <= self.settings.restarts
        )

    def start_rig(self) -> AngleRig:
        """The start in the limits' coordinates: the rig the last frame left, where kept."""
        if self._start_rig is None:
            self._start_rig = self.kept if self.kept is not None else AngleRig(self.tree, self.start)
        return self._start_rig

    def near(self) -> bool:
        """Continuity mode: whether every goal that pulls is within NEAR of its chain's reach of its target at the
        start (then it is refined as it is first, and no other start is needed)."""
        if self._near is None:
            self.aim()
            rig, problem = self.start_rig(), self.problem
            self._near = not self.settings.explore and not self.out_of_reach and all(
                w <= 0.0 or dist(rig.tip(node), target) <= NEAR * size
                for node, target, w, size in zip(problem.nodes, problem.targets, problem.weights, problem.reach)
            )
        return self._near

    def twists(self) -> dict[int, float]:
        """The start's twists that move no goal: every attempt's go back to them."""
        if self._twists is None:
            self._twists = settle.start_twists(self.tree, self.problem, self.start)
        return self._twists

    def _locals(self, solved: Solved) -> tuple[list[Quat], list[Quat]]:
        """Each node's local rotation at the start and as a pose leaves it."""
        if self._start_local is None:
            start = self.start
            # (a start forward kinematics made carries its rotations: the channels')
            self._start_local = [quat.normalized(q) for q in start.rotations] if start.fixed is not None else (
                rotations_from_zero(self.tree, start.zero, start.frames)
            )
        local = solved.rig.local if solved.rig is not None else (
            self._start_local if solved.frames is None else rotations_from_zero(self.tree, self.start.zero, solved.frames)
        )
        return self._start_local, local

    def turns(self, solved: Solved) -> list[float]:
        """Per node, how far (radians) a pose turns it from where it started."""
        return [quat.angle_between(a, b) for a, b in zip(*self._locals(solved))]

    def jumps(self, solved: Solved) -> bool:
        """Whether a pose turns some node further than `JUMP` from where it started."""
        least = math.cos(0.5 * JUMP)  # (the turn's quaternion's scalar part, at JUMP)
        return any(
            abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]) < least for a, b in zip(*self._locals(solved))
        )

    def offer(self, solved: Solved) -> None:
        """Keep an attempt's pose where it is the best so far: one that reaches over one that does not, of two that
        reach the one nearer the start in joint angles, of two that miss the one nearer its goals."""
        best = self.best
        if best is None or (solved.report.converged and not best.report.converged):
            self.best = solved
        elif solved.report.converged and best.report.converged:
            if sum(t * t for t in self.turns(solved)) < sum(t * t for t in self.turns(best)):
                self.best = solved
        elif not best.report.converged:
            report, than = solved.report, best.report
            if self.problem.cost(report.errors, report.rotation_errors) < self.problem.cost(
                than.errors, than.rotation_errors
            ):
                self.best = solved

    def attempt(self, start: Start, joints: Joints | None, report: SolveReport, rig: AngleRig | None) -> Solved:
        """One attempt's pose from where FABRIK's passes left it (`joints`; None: as `start` has it) or from a rig:
        refined where it misses, and kept as the limits' coordinates read it, its idle twists as they began."""
        self.attempts += 1
        moved = None if joints is None else (joints.heads, joints.frames)
        problem, tolerance = self.problem, self.settings.tolerance
        if not report.converged and rig is None:
            # What is kept is the pose as the limits' coordinates read it (the refinement starts from it too): a
            # start outside the limits (a pole's turn can take the first bone out of them) comes back inside and
            # its tip moves, so its errors are measured again.
            rig = AngleRig(self.tree, start, moved)
            report.errors, report.rotation_errors = goal_errors_of(rig, problem)
        kept = None
        if not report.converged and not self.budget.spent:
            refined_ = refine.solve(rig, problem, tolerance, self.budget.left)
            self.budget.spend(refined_.iterations)
            if refined_.converged or refined_.cost <= problem.cost(report.errors, report.rotation_errors):
                kept = rig
                report = SolveReport(
                    self.budget.used, refined_.errors, refined_.converged,
                    "converged" if refined_.converged else refined_.stopped_by, rotation_errors=refined_.rotation_errors,
                )
        if kept is None and not report.converged:
            kept = AngleRig(self.tree, start, moved)  # (again: the refinement moved `rig`)
        elif kept is None and joints is None and rig is not None:
            kept = rig  # (reached as the limits' coordinates read the start: that pose, inside them)
        if kept is not None:
            settle.set_idle_twists(kept, problem, self.twists())
            return Solved(report, rig=kept)
        frames, heads = (
            (joints.final_frames(self.tree, start), list(joints.heads)) if joints is not None
            else (list(start.frames), list(start.heads))
        )
        return Solved(report, settle.idle_twists_kept(self.tree, problem, frames, self.start, self.twists()), heads)

    def finish(self) -> Solved:
        """The answer: the best pose, its report over every stage, its errors measured against the goals as
        asked, and whether it jumped."""
        if self.answer is not None:
            solved = self.answer
            solved.report.iterations = self.budget.used
        else:
            best = self.best
            solved = of_rig(best.rig, best.report) if best.rig is not None else best
            report = solved.report
            report.iterations, report.restarts = self.budget.used, max(0, self.attempts - 1)
            if self.aims:
                report.errors = [dist(_tail(self.tree, solved, self.tree.tips[i]), g.target) for i, g in enumerate(self.asked)]
                report.converged = max(report.errors) <= self.settings.tolerance
            if not report.converged:
                report.stopped_by = "unreachable" if self.out_of_reach else self.budget.why()
        if not self.settings.explore and not self.stepped and solved.frames is not None and self.tree.is_limited:
            solved.report.jumped = self.jumps(solved)
        solved.vain = self.vain_now
        return solved


#: A stage: it offers a pose to the solve in progress, or gives its whole answer.
Stage = Callable[[Solving], None]


def run(
    stages: Sequence[Stage], skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Start,
    settings: SolveSettings, kept: AngleRig | None = None, free: MovingTree | None = None,
    search: Sequence[Stage] = (), nearest: bool = False, vain: tuple[Vec, ...] | None = None,
) -> Solved:
    """Solve a part by its stages, in order, until one gives the whole answer; in continuity mode `kept` is
    the rig the last frame left, where the caller keeps it, `search` the stages of this frame's whole search
    (`nearest`: see `Solving`) and `vain` the targets a recent one found nothing for."""
    solving = Solving(skeleton, tree, goals, start, settings, kept, free, search, nearest, vain)
    for stage in stages:
        stage(solving)
        if solving.answer is not None:
            break
    return solving.finish()


def _tail(tree: MovingTree, solved: Solved, k: int) -> Vec:
    """Node k's tail as `solved` places it."""
    h, y, n = solved.heads[k], quat.y_axis(solved.frames[k]), tree.length[k]
    return (h[0] + n * y[0], h[1] + n * y[1], h[2] + n * y[2])
