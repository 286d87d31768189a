# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan: the one place that decides how a rig is solved.

A plan is made once per skeleton, goal layout (which bones the goals pull,
how far up their chains reach, which carry rotation goals, poles or IK
stretch) and solver, and kept until one of them changes (`plan_for` keeps it
on the skeleton). It splits the bones the goals move into parts that share no
bones -- each stops when it has reached, not when the slowest has -- and
names for each the stages that solve it (`parts`).

IK stretch (`stretch`) and the solvers beside FABRIK (`alternatives`) take the
whole rig. Everything that solves goes through the plan: live frames, each
frame of a bake, many frames of a bake at once (`many_frames`), a root that
moves (`rooted`), and continuous bakes and warm live frames, which carry what
the last frame left (`Carry`).
"""

from __future__ import annotations

from typing import Callable, Sequence

from ..chain.local import LocalTree, local_tree, rotations_from_zero, start_of
from ..compared.alternatives import ALTERNATIVES
from ..goals import floor, stretch
from ..joints.angles import AngleRig
from ..math import blas, matrix_rows, quat
from ..math.quat import Quat
from ..math.vec import Vec
from ..model.problem import Goal, SolveReport, SolveSettings, begin, joined_report, validate_goals, validate_settings
from ..model.skeleton import Pose, Skeleton
from ..model.tree import Start, moving_tree, posed, tails_of
from . import loop, rooted
from .parts import LIMITED, Part, above_floor, layout_of, part_start, parts_of
from .loop import Solved

__all__ = ["Carry", "Plan", "Solved", "plan_for", "solve"]


class Carry:
    """What continuity mode keeps from one frame to the next for a rig: per limited part, the rig the last solve
    left in the limits' coordinates and what it was made from, so the next frame that starts from there goes on from
    it."""

    def __init__(self) -> None:
        self.rigs: dict[int, tuple[tuple, AngleRig]] = {}
        #: Per limited part, the targets the last whole search that ran found nothing for (`stages.searched`).
        self.vain: dict[int, tuple] = {}

    def clear(self) -> None:
        """Forget what was kept."""
        self.rigs.clear()
        self.vain.clear()


class Plan:
    """How one rig is solved (see the module)."""

    def __init__(self, skeleton: Skeleton, goals: Sequence[Goal], solver: str = "FABRIK") -> None:
        self.skeleton = skeleton
        self.solver = solver
        self.layout = layout_of(goals)
        #: The bones the goals move, as one tree, and what forward kinematics of it needs.
        self.tree = moving_tree(skeleton, goals)
        self.local: LocalTree = local_tree(skeleton, self.tree)
        self.bones = list(self.tree.bones)
        #: Whether IK stretch may grow some chain: then it takes the whole rig (`stretch.solve`).
        self.stretch = stretch.applies(skeleton, goals)
        self.parts: tuple[Part, ...] = parts_of(self.tree, goals)
        #: The settings and the moving root last checked (`solve`, `rooted.solve`).
        self._checked = self.checked_root = None
        #: Per root bone asked about: whether each goal's chain hangs from it (`rooted.below`).
        self.below_root: dict[int, list[bool]] = {}

    def __repr__(self) -> str:
        return f"Plan({self.solver}, {[(p.method, len(p.nodes)) for p in self.parts]}, stretch={self.stretch})"

    @property
    def whole(self) -> bool:
        """Whether one method takes the whole rig (another solver, or IK stretch) and works on the whole pose."""
        return self.solver != "FABRIK" or self.stretch

    def start(
        self,
        rotations: Sequence[Quat],
        translations: Sequence[Vec | None],
        fixed: Sequence[tuple[Quat, Vec] | None],
        pose: Callable[[], Pose],
    ) -> Start:
        """Where a solve starts, from the nodes' local rotations and location channels and the frames of the fixed
        bones they hang from: by forward kinematics on plain floats, or from the whole pose where a fixed bone lies
        between moving ones (`pose` makes it)."""
        if self.local.placed and not self.whole:
            return start_of(self.local, rotations, translations, fixed, pose)
        return Start.of_pose(self.skeleton, self.tree, pose())

    def goes_on(self, start: Start, solved: Solved) -> bool:
        """Whether a frame may start where `solved` (a solve from `start`) left the nodes (`start_after`): a start
        forward kinematics made, and a solve that moved them and left their rotations to be worked out."""
        return solved.frames is not None and solved.rotations is None and start.fixed is not None and (
            self.local.placed and not self.whole
        )

    def start_after(
        self, start: Start, solved: Solved, translations: Sequence[Vec | None], fixed: Sequence[tuple[Quat, Vec] | None]
    ) -> Start | None:
        """The start of a frame that goes on from `solved` where what the nodes hang from has not moved: the nodes
        where that solve left them; None where that does not hold, or where the solve worked out its rotations
        itself."""
        if not self.goes_on(start, solved) or list(fixed) != start.fixed or list(translations) != start.translations:
            return None
        if solved.root is not None:
            return None  # (the nodes stand where the chains do before the root moves them)
        if any(t is not None and p >= 0 for t, p in zip(translations, self.tree.parent)):
            return None  # (the passes keep a moved bone on its parent's tail; forward kinematics moves it off)
        frames, heads, zero = solved.frames, solved.heads, start.zero
        return Start(
            frames, heads, tails_of(frames, heads, self.tree.length), zero, None, fixed=start.fixed,
            translations=start.translations, rotations_of=lambda: rotations_from_zero(self.tree, zero, frames),
        )

    @blas.on_one_thread  # (its systems are small: numpy's threads would only cost)
    def solve(
        self, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None = None
    ) -> Solved:
        """Solve the goals (of this plan's layout) from `start`; `carry` is what continuity mode keeps between
        frames, where the caller keeps it. Raises ValueError for goals or settings no solver can use."""
        validate_goals(self.skeleton, goals)
        if settings is not self._checked:  # (a live rig solves frame after frame with the same settings)
            validate_settings(settings)
            self._checked = settings
        if not goals:
            return Solved(SolveReport(0, [], True, "converged"))
        if settings.floor is not None:  # (IK stretch and the other solvers take the lifted targets; only
            goals = floor.lifted(settings.floor, goals)  # the plan's own parts hold the joints too)
        if settings.root is not None:
            return rooted.solve(self, goals, start, settings, carry)
        return self.solve_parts(goals, start, settings, carry)


    def solve_parts(
        self, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None,
        inner: Sequence[bool] | None = None, outer: SolveSettings | None = None,
    ) -> Solved:
        """Solve the parts (`inner`, where given: per part, whether it takes `settings`, else `outer`)."""
        if self.whole:
            pose, report = self._solve_whole(goals, start.pose(), settings)
            return Solved(report, pose=pose)
        if len(self.parts) == 1:
            return self._solve_part(0, self.parts[0], goals, start, settings, carry)
        frames, heads, reports = None, None, []
        # The parts' rotations where each worked them out (or stayed where it started), as one part's are kept.
        rotations = [quat.normalized(q) for q in start.rotations] if start.fixed is not None else None
        for i, part in enumerate(self.parts):
            own = settings if inner is None or inner[i] else outer
            solved = self._solve_part(
                i, part, [goals[g] for g in part.goals], part_start(start, part.nodes), own, carry
            )
            reports.append(solved.report)
            if solved.frames is None:
                continue
            if frames is None:
                frames, heads = list(start.frames), list(start.heads)
            for k, frame, head in zip(part.nodes, solved.frames, solved.heads):
                frames[k], heads[k] = frame, head
            if solved.rotations is None:
                rotations = None
            elif rotations is not None:
                for k, rotation in zip(part.nodes, solved.rotations):
                    rotations[k] = rotation
        report = joined_report([p.goals for p in self.parts], reports, len(goals))
        return Solved(report, frames, heads, rotations=rotations if frames is not None else None)

    def by_stages(
        self, part: Part, goals: Sequence[Goal], start: Start, settings: SolveSettings, kept: AngleRig | None = None,
        vain: tuple | None = None,
    ) -> Solved:
        """One part by its stages (`kept`: the rig the last frame left; `vain`: the targets a recent whole search
        found nothing for)."""
        chosen = part.stages if settings.explore else part.warm
        return loop.run(
            chosen, self.skeleton, part.tree, goals, start, settings, kept, part.free, part.stages, vain=vain
        )

    def _solve_part(
        self, i: int, part: Part, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None
    ) -> Solved:
        """One part by its method, held above the floor; in continuity mode a limited part goes on from the rig the
        last frame left."""
        if part.method != LIMITED:
            return above_floor(part.tree, goals, start, settings, self.by_stages(part, goals, start, settings))
        key = kept = vain = None
        if carry is not None and not settings.explore and start.fixed is not None:
            key = (tuple(start.rotations), tuple(start.fixed), tuple(start.translations))
            found = carry.rigs.get(i)
            # (a rig of another structure -- a limit or a bone edited since -- is not gone on from)
            kept = found[1] if found is not None and found[0] == key and found[1].tree is part.tree else None
            vain = carry.vain.get(i) if kept is not None else None
        solved = self.by_stages(part, goals, start, settings, kept, vain)
        solved = above_floor(part.tree, goals, start, settings, solved)
        if solved.rig is not None and start.fixed is not None:
            # A start forward kinematics made has each node's zero frame on its rest: the rig's own rotations are
            # the channels'.
            solved.rotations = list(solved.rig.local)
        if key is not None:
            carry.rigs.pop(i, None)
            if solved.rig is not None and solved.rotations is not None:
                carry.rigs[i] = (tuple(solved.rotations), tuple(start.fixed), tuple(start.translations)), solved.rig
            if solved.vain is not None:
                carry.vain[i] = solved.vain
            elif solved.report.converged:
                carry.vain.pop(i, None)
        return solved

    def _solve_whole(self, goals: Sequence[Goal], pose: Pose, settings: SolveSettings) -> tuple[Pose, SolveReport]:
        """Another solver, or IK stretch around FABRIK's plan, on the whole pose."""
        if self.solver != "FABRIK":
            return ALTERNATIVES[self.solver](self.skeleton, goals, pose, settings)
        return stretch.solve(solve, self.skeleton, goals, pose, settings)


    def rotations(self, start: Start, solved: Solved) -> list[Quat]:
        """The nodes' local rotations (unit quaternions) as a solve leaves them: what their rotation channels
        are set to."""
        if solved.rotations is not None:
            return solved.rotations
        if solved.pose is not None:
            local = self.skeleton.local_rotations(solved.pose, self.bones)
            return [tuple(q) for q in matrix_rows.quaternions_from_matrices(local).tolist()]
        if self.local.placed and start.fixed is not None:  # (a start forward kinematics made: the common case)
            if solved.frames is None:
                return [quat.normalized(q) for q in start.rotations]
            return rotations_from_zero(self.tree, start.zero, solved.frames)
        pose = start.pose()
        if solved.frames is not None:
            pose = posed(self.skeleton, self.tree, pose, solved.frames, solved.heads)
        matrices = self.skeleton.local_rotations(pose, self.bones)
        return [tuple(q) for q in matrix_rows.quaternions_from_matrices(matrices).tolist()]

    def pose(self, start: Start, solved: Solved) -> Pose:
        """The whole pose a solve leaves: the nodes as solved, the bones below them following rigidly."""
        if solved.pose is not None:
            pose = solved.pose
        elif solved.frames is None:
            pose = start.pose().copy()
        else:
            pose = posed(self.skeleton, self.tree, start.pose(), solved.frames, solved.heads)
        if solved.root is not None:
            pose = rooted.moved_pose(self.skeleton, pose, solved.root)
        return pose


def plan_for(skeleton: Skeleton, goals: Sequence[Goal], solver: str = "FABRIK") -> Plan:
    """The plan for these goals' layout on this skeleton (kept on the skeleton)."""
    key = solver, layout_of(goals)
    found = skeleton.kept.plans.get(key)
    if found is None:
        found = skeleton.kept.plans[key] = Plan(skeleton, goals, solver)
    return found


def solve(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
) -> tuple[Pose, SolveReport]:
    """FABRIK: move the skeleton so that each goal's bone tip reaches its target; return the pose and a report.

    `settings.max_iterations` caps the whole solve: FABRIK's iterations, the
    refinement's and every restart's together.
    """
    start, nothing_to_do = begin(skeleton, goals, start, settings)
    if nothing_to_do:
        return nothing_to_do
    plan = plan_for(skeleton, goals)
    if plan.stretch:
        return plan._solve_whole(goals, start, settings)
    begun = Start.of_pose(skeleton, plan.tree, start)
    outcome = plan.solve(goals, begun, settings)
    return plan.pose(begun, outcome), outcome.report
