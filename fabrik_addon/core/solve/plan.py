# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan: the one place that decides how a rig is solved.

A plan is made once per skeleton, goal layout (which bones the goals pull,
how far up their chains reach, which carry rotation goals, poles or IK
stretch) and solver, and kept until one of them changes (`plan_for` keeps it
on the skeleton). It splits the bones the goals move into parts that share no
bones -- each stops when it has reached, not when the slowest has -- and
names for each the short list of stages that solves it:

- a tree with joint limits (`LIMITED`): stages (`stages`) chosen here from
  its joints and goals, one list for a frame that searches from its own
  start and one for a frame that goes on from the last (`limited_stages`);
- a free tree with unconnected bones pulled by position goals: FABRIK handing
  over to the refinement once it crawls (`OFFSETS`, `methods`);
- any other free tree: FABRIK itself (`FREE`, `methods`), the paper's own two
  passes where one chain is pulled at its tip.

IK stretch (`stretch`) and the solvers beside FABRIK (`alternatives`) take the
whole rig. Everything that solves goes through the plan: live frames, each frame of
a bake, many frames of a bake at once (`solve_rows`: the same plan over many
inputs, on numpy rows where the parts allow), and continuous bakes and warm
live frames, which carry what the last frame left (`Carry`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Callable, Sequence

import numpy as np

from ..chain import bend, rows, starts
from ..chain.fabrik import SLOW_WINDOW
from ..chain.local import LocalTree, local_tree, rotation_rows, rotations_from_zero, start_of, with_start_twist
from ..compared.alternatives import ALTERNATIVES
from ..goals import floor, root, stretch
from ..joints import refine
from ..joints.angles import AngleRig, TreeGoals, longest_reach
from ..math import blas, matrix_rows, quat
from ..math.quat import Quat
from ..math.vec import Vec
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, begin, joined_report, validate_goals, validate_settings
from ..model.skeleton import Pose, Skeleton
from ..model.tree import MovingTree, Start, components, moving_tree, posed, tails_of
from . import limb, methods, stages
from .stages import Solved, Stage

__all__ = [
    "FREE", "LIMITED", "OFFSETS", "Carry", "Part", "Plan", "Solved", "SolvedRows", "hinged", "layout_of",
    "limited_stages", "open_cones_as_free", "plan_for", "solve",
]

FREE, OFFSETS, LIMITED = "free", "offsets", "limited"

#: The stages of a part without limits, by method (`methods`).
FREE_STAGES = {FREE: (methods.passes, methods.finished, methods.wandered),
               OFFSETS: (methods.offset_passes, methods.offsets_refined)}


def layout_of(goals: Sequence[Goal]) -> tuple:
    """What of the goals decides a plan: each one's bone and chain length, and whether it carries a rotation
    goal, a pole or IK stretch."""
    return tuple((g.bone, g.chain_length, g.rotation is not None, g.pole is not None, g.stretch) for g in goals)


@dataclass(frozen=True)
class SolvedRows:
    """What `Plan.solve_rows` leaves for F frames: the nodes' frames (F, m, 3, 3), heads (F, m, 3) and local
    rotations (F, m, 3, 3; None where a fixed bone lies between two moving ones, `LocalTree.placed`), the
    iterations (F,) and the errors (F, G)."""

    frames: np.ndarray
    heads: np.ndarray
    rotations: np.ndarray | None
    iterations: np.ndarray
    errors: np.ndarray


@dataclass(frozen=True)
class Part:
    """A part of the rig that shares no bones with the others: its goals and nodes (indices into the plan's), its
    own tree, and how it is solved."""

    goals: tuple[int, ...]
    nodes: tuple[int, ...]
    tree: MovingTree
    method: str
    #: Whether its goals are positions only, without poles.
    plain: bool
    #: The part's stages for a frame that searches from its own start, and for one that goes on from the last
    #: frame's pose (`limited_stages`, `FREE_STAGES`); a limited part's tree without its open cones, where its
    #: free passes run on it.
    stages: tuple[Stage, ...] = ()
    warm: tuple[Stage, ...] = ()
    free: MovingTree | None = None


def _method(tree: MovingTree, goals: Sequence[Goal]) -> str:
    """The method for a part's tree and goals (see the module)."""
    if tree.is_limited:
        return LIMITED
    if tree.needs_frames and all(g.rotation is None and g.pole is None for g in goals):
        return OFFSETS
    return FREE


def limited_stages(tree: MovingTree, goals: Sequence[Goal], explore: bool) -> tuple[Stage, ...]:
    """A limited part's stages (`stages`), from its joints and goals: for a frame that searches from its own start
    (`explore`), or for one that goes on from the last frame's pose.

    A two-bone limb first takes its exact answer, from its own start where the
    free passes do not take it, from the last frame's pose where a pole holds
    its plane (without one, settling pulls its swivel towards rest). A tree
    in open cones pulled by positions runs the free passes first. Where every
    joint is a hinge or a roll (a robot arm), FABRIK's moves of points leave
    the hinges' planes at every pass, so the start is refined as it is first
    and the passes follow where that stalls; elsewhere the passes go first.
    From the last frame's pose, a start near its targets settles one step
    onto them, else is refined as it is; where every attempt misses a target
    in reach, the frame's whole search follows.
    """
    plain = all(g.rotation is None and g.pole is None for g in goals)
    poled = any(g.pole is not None for g in goals)
    free = plain and open_cones_as_free(tree) is not None
    limb_shaped = len(goals) == 1 and limb.applies(tree, [replace(goals[0], weight=1.0)])
    found: list[Stage] = []
    if explore:
        if limb_shaped and not free:
            found.append(stages.exact_limb)
        if free:
            found.append(stages.free_passes)
        found += [stages.refined, stages.passes] if hinged(tree) else [stages.passes, stages.refined]
        found.append(stages.other_starts)
        if poled:
            found.append(stages.settled)
    else:
        if limb_shaped and poled:
            found.append(stages.exact_limb)
        if not poled:
            found.append(stages.followed)
        found += [stages.refined if hinged(tree) else stages.refined_if_near, stages.passes]
        found += [stages.settled, stages.searched]
    return tuple(found)


def open_cones_as_free(tree: MovingTree) -> MovingTree | None:
    """The tree without its limits, where every bone hangs from its parent's tail and every limit leaves the rest
    direction a cone to swing in and the rest twist a range to turn in (no lock, hinge or stiffness); else None.
    Where no limit binds, a limited pass moves every joint as the free pass does, so such a chain (a tentacle, a
    spine) is solved as the free one first."""
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


def hinged(tree: MovingTree) -> bool:
    """Whether every joint of the tree turns about one axis at most (a robot arm's)."""
    return all(
        limit is not None and sum(hi - lo > 1e-12 for lo, hi in (limit.x_range, limit.z_range, limit.y_range)) <= 1
        for limit in tree.limits
    )


class Carry:
    """What continuity mode keeps from one frame to the next for a rig: per limited part, the rig the last solve
    left in the limits' coordinates, with what it was made from (the nodes' local rotations, the frames they hang
    from and their location channels), so the next frame goes on from it where it starts from that."""

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
        groups = components(self.tree)
        parts = []
        for group in groups:
            tree, nodes = (self.tree, list(range(len(self.bones)))) if len(groups) == 1 else self.tree.part(group)
            own = [goals[g] for g in group]
            plain = all(g.rotation is None and g.pole is None for g in own)
            method = _method(tree, own)
            if method == LIMITED:
                free = open_cones_as_free(tree) if plain else None
                chosen = limited_stages(tree, own, True), limited_stages(tree, own, False)
                parts.append(Part(tuple(group), tuple(nodes), tree, method, plain, *chosen, free))
            else:
                chosen = FREE_STAGES[method]
                parts.append(Part(tuple(group), tuple(nodes), tree, method, plain, chosen, chosen))
        self.parts: tuple[Part, ...] = tuple(parts)
        #: The settings and the moving root last checked (`solve`).
        self._checked = self._checked_root = None
        #: Per root bone asked about: whether each goal's chain hangs from it (`below`).
        self._below: dict[int, list[bool]] = {}

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
        """Where a solve starts, from the nodes' local rotations and location channels (None for none), and per
        node the frame and head of the fixed bone it hangs from (None for a node with a moving parent, or a root
        bone): forward kinematics on plain floats, or, where a fixed bone lies between two moving ones, the whole
        pose (`pose` makes it, with the nodes at those rotations)."""
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
        """The start of a frame that goes on from `solved` (a solve from `start`, a start forward kinematics
        made), where what the nodes hang from has not moved (the same fixed frames and location channels, none
        on a node below another): the nodes where that solve left them, their local rotations worked out only
        where a method asks. None where that does not hold, or where the solve worked out its rotations itself."""
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
            return self._solve_rooted(goals, start, settings, carry)
        return self._solve_parts(goals, start, settings, carry)

    def _solve_rooted(self, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None) -> Solved:
        """Solve with a root that may move (`root`): where the branches below it put it, then the parts against
        the goals that move carries back (the parts not below it as they are). Where a branch's limits keep it
        shorter of its target than its reach, the root goes on as far as that branch really reached, a few
        rounds (each round's iterations counted)."""
        moving = settings.root
        if moving is not self._checked_root:
            root.validate(moving)
            self._checked_root = moving
        below = self.below(moving.bone)
        whose, branches = self._branches(goals, start, below)
        move = root.place(moving, branches, settings.tolerance)
        used, best = 0, None
        # (each round goes on from what the last frame left, not from the round before it)
        kept = dict(carry.rigs) if carry is not None else None
        for round_ in range(root.ROUNDS):
            if round_ and kept is not None:
                carry.rigs.clear()
                carry.rigs.update(kept)
            carried, plane = root.carried(move, goals, below, settings.floor)
            inner = replace(settings, root=None, floor=plane)
            if self.whole or all(below):
                solved = self._solve_parts(carried, start, inner, carry)
            else:  # (a part not below the root keeps the floor where it is)
                outer = replace(settings, root=None)
                solved = self._solve_parts(carried, start, inner, carry, [below[p.goals[0]] for p in self.parts], outer)
            used += solved.report.iterations
            if best is None or _better(solved.report, best[0].report):
                best = solved, move, dict(carry.rigs) if carry is not None else None
            if round_ == root.ROUNDS - 1 or solved.report.converged:
                break
            tips = [self._tip(goals[g].bone, self.tree.goal_chain[g][0], start, solved) for g in whose]
            errors = [solved.report.errors[g] for g in whose]
            shorter = root.shortened(branches, move, tips, errors, settings.tolerance)
            if shorter is None:
                break
            branches, before = shorter, move
            move = root.place(moving, branches, settings.tolerance)
            if move == before:
                break
        solved, move, rigs = best  # (a later round can end further off: the best one is the answer)
        if rigs is not None:
            carry.rigs.clear()
            carry.rigs.update(rigs)
        solved.report.iterations = used
        solved.root = None if move.still else move  # (left where the start has it: its channels as they are)
        return solved

    def _tip(self, bone: int, node: int, start: Start, solved: Solved) -> Vec:
        """Where a solve left a goal's tip (the tail of its bone, or node of the tree)."""
        if solved.pose is not None:
            return tuple(map(float, solved.pose.tails[bone]))
        if solved.frames is None:
            return start.tails[node]
        y = quat.y_axis(solved.frames[node])
        head, length = solved.heads[node], self.tree.length[node]
        return (head[0] + length * y[0], head[1] + length * y[1], head[2] + length * y[2])

    def below(self, bone: int) -> list[bool]:
        """Per goal, whether its chain hangs from `bone` (a root that may move). Raises ValueError where the bone
        is in a chain: a moving root carries the chains, it is not one of their joints."""
        found = self._below.get(bone)
        if found is None:
            if bone in self.bones:
                name = self.skeleton.names[bone]
                raise ValueError(f"the root bone '{name}' is in an effector's chain: shorten the chain to below it")
            found = []
            for chain in self.tree.goal_chain:
                top = _top(self.tree, chain[0])
                found.append(bone in self.skeleton.path_to_root(self.tree.bones[top]))
            self._below[bone] = found
        return found

    def _branches(
        self, goals: Sequence[Goal], start: Start, below: Sequence[bool]
    ) -> tuple[list[int], list[root.Branch]]:
        """The chains below a moving root, as it sees them (`root.Branch`), with the goal of each."""
        out, whose = [], []
        for g, goal in enumerate(goals):
            if not below[g] or goal.weight <= 0.0:
                continue
            node = self.tree.goal_chain[g][0]
            path = [node]
            while self.tree.parent[path[-1]] >= 0:
                path.append(self.tree.parent[path[-1]])
            reach = longest_reach(self.skeleton, self.tree, path)
            out.append(root.Branch(start.heads[path[-1]], start.tails[node], reach, goal.target, goal.weight))
            whose.append(g)
        return whose, out

    def _solve_parts(
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
                i, part, [goals[g] for g in part.goals], _part_start(start, part.nodes), own, carry
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

    def _by_method(
        self, part: Part, goals: Sequence[Goal], start: Start, settings: SolveSettings, kept: AngleRig | None = None,
        vain: tuple | None = None,
    ) -> Solved:
        """One part by its stages (`kept`: the rig the last frame left; `vain`: the targets a recent whole search
        found nothing for)."""
        chosen = part.stages if settings.explore else part.warm
        return stages.run(
            chosen, self.skeleton, part.tree, goals, start, settings, kept, part.free, part.stages, vain=vain
        )

    def _solve_part(
        self, i: int, part: Part, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None
    ) -> Solved:
        """One part by its method, held above the floor; in continuity mode a limited part goes on from the rig the
        last frame left."""
        if part.method != LIMITED:
            return _above_floor(part.tree, goals, start, settings, self._by_method(part, goals, start, settings))
        key = kept = vain = None
        if carry is not None and not settings.explore and start.fixed is not None:
            key = (tuple(start.rotations), tuple(start.fixed), tuple(start.translations))
            found = carry.rigs.get(i)
            # (a rig of another structure -- a limit or a bone edited since -- is not gone on from)
            kept = found[1] if found is not None and found[0] == key and found[1].tree is part.tree else None
            vain = carry.vain.get(i) if kept is not None else None
        solved = self._by_method(part, goals, start, settings, kept, vain)
        solved = _above_floor(part.tree, goals, start, settings, solved)
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

    @property
    def rows(self) -> bool:
        """Whether many frames solve together on numpy rows (`solve_rows`): FABRIK on parts pulled by position
        goals, free or in open cones."""
        return not self.whole and all(
            p.plain and (p.method != LIMITED or p.free is not None) for p in self.parts
        )

    @blas.on_one_thread  # (as `solve`: so each frame solved alone here is solved as it is there)
    def solve_rows(
        self,
        goals: Sequence[Goal],
        targets: np.ndarray,
        heads: np.ndarray,
        frames: np.ndarray,
        fixed: dict[int, np.ndarray],
        settings: SolveSettings,
        start_of: Callable[[int], Start],
        floors: Sequence | None = None,
    ) -> SolvedRows:
        """Solve F frames of a plan that `rows`: targets (F, G, 3) for the goals' layout, the nodes' start heads
        (F, m, 3) and frames (F, m, 3, 3), and the frames of the fixed bones the base nodes hang from (`fixed`,
        by bone: (F, 3, 3)); `floors`: each frame's floor (`floor.Floor` or None), where they differ from the
        settings' (a floor or rig that moves). What each frame alone gives.

        FABRIK runs on numpy rows (`rows`); the frames where a method goes on
        from FABRIK (the refinement, the limits) are solved one by one from
        their own start (`start_of(f)`), as one frame alone is.
        """
        if not self.rows:
            raise ValueError(
                "many frames solve together only where FABRIK alone takes every part: position goals, and no joint "
                "limits on the moving bones but cones open around rest"
            )
        validate_goals(self.skeleton, goals)
        validate_settings(settings)
        count = len(targets)
        if floors is None:
            floors = [settings.floor] * count
        planes = floor.planes_rows(floors)  # (None where no frame has a floor)
        if planes is not None:
            targets = floor.lifted_rows(planes, targets)
        whole = len(self.parts) == 1  # (then the part's tree is the plan's: its rows are the answer's)
        solved_frames, solved_heads = (None, None) if whole else (frames.copy(), heads.copy())
        iterations = np.zeros(count, dtype=int)
        errors = np.zeros((count, len(goals)))
        # The cone check works out local rotations; the frames it passes keep them rather than working them out again.
        rotations = stale = None
        for part in self.parts:
            nodes, group, tree = list(part.nodes), list(part.goals), part.tree
            own = [goals[g] for g in group]
            free, window = tree, SLOW_WINDOW if part.method == OFFSETS else 0
            if part.method == LIMITED:
                free, window = part.free if settings.explore else None, SLOW_WINDOW  # (`stages.free_passes`)
            again = np.ones(count, dtype=bool)  # (continuity mode: a limited part settles frame by frame)
            if free is not None:
                placed_heads, placed, counted, missed, converged = rows.solve(
                    free, own, targets[:, group], heads[:, nodes], frames[:, nodes], settings, window
                )
                iterations, errors[:, group] = np.maximum(iterations, counted), missed
                again = np.zeros(count, dtype=bool)
                if part.method == OFFSETS and any(g.weight > 0.0 for g in own):
                    beyond = _out_of_reach_rows(self.skeleton, tree, own, targets[:, group], heads[:, nodes])
                    again = ~converged & ~beyond
                elif part.method == LIMITED:
                    good, local = self._inside_cones(tree, placed, frames[:, nodes], fixed, converged)
                    if starts.spreads(free, own, settings) and settings.max_iterations > 1:
                        rimmed, missed_now = self._spread_within(
                            tree, targets[:, group[0]], placed_heads, placed, frames[:, nodes], fixed,
                            ~good & converged & (counted == 1), (placed_heads, placed, local, good),
                        )
                        # (this part's own count, the even bend's step and the rim's, as alone)
                        iterations[rimmed] = np.maximum(iterations[rimmed], counted[rimmed] + 1)
                        errors[rimmed, group[0]] = missed_now
                    again = ~good
                    if whole:
                        rotations, stale = local, again
                if planes is not None:  # (a frame with a joint under the floor is held above it alone)
                    again |= floor.deepest_rows(planes, tree, placed, placed_heads) > settings.tolerance
                if whole:
                    solved_frames, solved_heads = placed, placed_heads
                else:
                    solved_frames[:, nodes], solved_heads[:, nodes] = placed, placed_heads
            if solved_frames is None:  # (continuity mode on the whole rig)
                solved_frames, solved_heads = frames.copy(), heads.copy()
            for f in np.flatnonzero(again).tolist():
                frame_goals = [replace(g, target=tuple(map(float, targets[f, i]))) for i, g in zip(group, own)]
                begun = _part_start(start_of(f), nodes)
                alone = settings if floors[f] == settings.floor else replace(settings, floor=floors[f])
                solved = self._by_method(part, frame_goals, begun, alone)
                solved = _above_floor(tree, frame_goals, begun, alone, solved)
                if solved.frames is None:
                    solved_frames[f, nodes], solved_heads[f, nodes] = frames[f, nodes], heads[f, nodes]
                else:
                    turned = matrix_rows.quaternion_to_matrix(np.array(solved.frames).reshape(-1, 4))
                    solved_frames[f, nodes] = matrix_rows.orthonormalized(turned)
                    solved_heads[f, nodes] = solved.heads
                iterations[f], errors[f, group] = max(iterations[f], solved.report.iterations), solved.report.errors
        if not self.local.placed:
            rotations = None
        elif rotations is None:
            rotations = rotation_rows(self.skeleton, self.tree, solved_frames, fixed)
        elif stale.any():
            hung = {b: values[stale] for b, values in fixed.items()}
            rotations[stale] = rotation_rows(self.skeleton, self.tree, solved_frames[stale], hung)
        return SolvedRows(solved_frames, solved_heads, rotations, iterations, errors)

    def _spread_within(
        self, tree: MovingTree, targets: np.ndarray, spread_heads: np.ndarray, spread_frames: np.ndarray,
        frames: np.ndarray, fixed: dict[int, np.ndarray], chosen: np.ndarray, solved: tuple,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where the even bend (its heads and frames, (F, m, 3) and (F, m, 3, 3)) took a joint of a chain in open
        cones out of its cone, the joint on its rim and the bones after it bent evenly (`bend.spread_within_rows`,
        as `stages.free_passes` does alone; `frames`: the start frames): the frames where that lands on the
        target inside every cone take that pose (`solved`: the solve's heads, frames, local rotations and the
        frames inside, changed in place). Which frames did, and their tips' distances."""
        placed_heads, placed, local, good = solved
        if not chosen.any():
            return chosen, np.zeros(0)
        skeleton, length = self.skeleton, np.asarray(tree.length)
        tip = spread_heads[:, -1] + length[-1] * spread_frames[:, -1, :, 1]
        points = np.concatenate((spread_heads, tip[:, None]), axis=1)
        points = np.ascontiguousarray(points.transpose(1, 2, 0))
        b = tree.bones[0]
        above = fixed[skeleton.parents[b]] if skeleton.parents[b] >= 0 else np.broadcast_to(np.eye(3), frames[:, 0].shape)
        zero = above @ skeleton.rest_in_parent[b]
        rest = np.array([skeleton.rest_in_parent[bone] for bone in tree.bones])
        moved = bend.spread_within_rows(
            points, length, np.ascontiguousarray(targets.T), frames, zero, rest, tree.limits, chosen
        )
        missed = np.sqrt(((points[-1] - targets.T) ** 2).sum(axis=0))
        rows_at = np.flatnonzero(moved)
        if not len(rows_at):
            return moved, np.zeros(0)
        directions = (points[1:] - points[:-1])[:, :, rows_at] / length[:, None, None]  # (m, 3, N)
        turned = matrix_rows.swung_frames(
            frames[rows_at].reshape(-1, 3, 3), directions.transpose(2, 0, 1).reshape(-1, 3)
        ).reshape(len(rows_at), -1, 3, 3)
        hung = {bone: values[rows_at] for bone, values in fixed.items()}
        inside, rotations = self._inside_cones(tree, turned, frames[rows_at], hung, np.ones(len(rows_at), bool))
        take = rows_at[inside]
        placed[take], local[take] = turned[inside], rotations[inside]
        placed_heads[take] = points[:-1][:, :, take].transpose(2, 0, 1)
        good[take] = True
        taken = np.zeros_like(chosen)
        taken[take] = True
        return taken, missed[take]

    def _inside_cones(
        self, tree: MovingTree, solved: np.ndarray, begun: np.ndarray, fixed: dict[int, np.ndarray],
        converged: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Which frames of the free passes on a limited part's open cones are the answer (`stages.free_passes`):
        converged with every joint inside its limit; and the local rotations the limits read (F, m, 3, 3). The
        answer's leaves' twists, which move no goal, go back to where they began (in `solved` and the
        rotations)."""
        skeleton = self.skeleton
        count = len(solved)
        rotations = rotation_rows(skeleton, tree, solved, fixed)
        good = converged.copy()
        quaternions = matrix_rows.quaternions_from_matrices(rotations.reshape(-1, 3, 3)).reshape(count, -1, 4)
        for k, limit in enumerate(tree.limits):
            if limit is not None:
                good &= limits.allows_rows(limit, quaternions[:, k])
        leaves = [k for k, limit in enumerate(tree.limits) if limit is not None and not tree.children[k]]
        if leaves and good.any():
            started = rotation_rows(skeleton, tree, begun, fixed, leaves)
            started = matrix_rows.quaternions_from_matrices(started.reshape(-1, 3, 3)).reshape(count, -1, 4)
            chosen = np.flatnonzero(good)
            for j, k in enumerate(leaves):
                for f in chosen.tolist():
                    twisted = with_start_twist(
                        tree.limits[k], tuple(quaternions[f, k].tolist()), tuple(started[f, j].tolist())
                    )
                    rotations[f, k] = quat.to_matrix(twisted)
                b, p = tree.bones[k], tree.parent[k]
                if p >= 0:
                    above = solved[chosen, p]
                else:  # (a base node hangs from a fixed bone, or is a root: its rest is in armature space)
                    above = fixed[skeleton.parents[b]][chosen] if skeleton.parents[b] >= 0 else np.eye(3)
                solved[chosen, k] = above @ skeleton.rest_in_parent[b] @ rotations[chosen, k]
        return good, rotations

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
            pose = _moved_pose(self.skeleton, pose, solved.root)
        return pose


def _above_floor(tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings, solved: Solved) -> Solved:
    """A part's pose held above the floor (`floor`): where `solved` leaves a joint deeper below it than the
    tolerance, the refinement goes on from that pose with the joints' depths as errors besides the goals', within
    what is left of the iteration cap."""
    plane = settings.floor
    if plane is None:
        return solved
    frames, heads = (start.frames, start.heads) if solved.frames is None else (solved.frames, solved.heads)
    held = floor.liftable(plane, tree, start.heads, start.tails)
    if floor.deepest(plane, tree, frames, heads, held) <= settings.tolerance:
        return solved
    rig = solved.rig if solved.rig is not None else AngleRig(tree, start, (heads, frames))
    used = solved.report.iterations
    problem = TreeGoals(tree, goals, plane, held)
    refined = refine.solve(rig, problem, settings.tolerance, max(0, settings.max_iterations - used))
    stopped = "unreachable" if not refined.converged and solved.report.stopped_by == "unreachable" else refined.stopped_by
    report = replace(
        solved.report, iterations=used + refined.iterations, errors=refined.errors, converged=refined.converged,
        stopped_by=stopped, rotation_errors=refined.rotation_errors,
    )
    # (a start forward kinematics made: the rig's own rotations are the channels')
    rotations = list(rig.local) if start.fixed is not None else None
    return replace(solved, report=report, frames=list(rig.frames), heads=list(rig.heads), rig=rig, rotations=rotations)


def _better(report: SolveReport, than: SolveReport) -> bool:
    """Whether a solve's report is better than another's: converged, else nearer its goals in all."""
    if report.converged != than.converged:
        return report.converged
    return sum(report.errors) < sum(than.errors)


def _top(tree: MovingTree, node: int) -> int:
    """The base node of the part a node is in."""
    while tree.parent[node] >= 0:
        node = tree.parent[node]
    return node


def _moved_pose(skeleton: Skeleton, pose: Pose, move: root.Move) -> Pose:
    """The pose with the root's bone and every bone below it moved by the root's move (`root.Move`)."""
    moved = pose.copy()
    bones = skeleton.kept.shape.below_root.get(move.bone)
    if bones is None:
        bones = skeleton.kept.shape.below_root[move.bone] = [b for b in range(len(skeleton.names)) if move.bone in skeleton.path_to_root(b)]
    turn = np.array(quat.to_matrix(move.rotation))
    pivot, shift = np.array(move.pivot), np.array(move.translation)
    moved.heads[bones] = (pose.heads[bones] - pivot) @ turn.T + pivot + shift
    moved.frames[bones] = turn @ pose.frames[bones]
    return moved


def _part_start(start: Start, nodes: Sequence[int]) -> Start:
    """A whole tree's start, for the nodes of one part."""
    pick = itemgetter(*nodes) if len(nodes) > 1 else (lambda values: (values[nodes[0]],))

    def of(values):
        return None if values is None else list(pick(values))

    def place() -> tuple:
        return of(start.frames), of(start.heads), of(start.tails), of(start.zero)

    return Start(
        None, None, None, None, start.pose, of(start.rotations), of(start.fixed), of(start.translations), place
    )


def _out_of_reach_rows(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], targets: np.ndarray, heads: np.ndarray
) -> np.ndarray:
    """Per frame, whether some goal's target lies beyond all its chain could reach from its fixed base
    (`TreeGoals.out_of_reach`): there the method keeps FABRIK's answer."""
    out = np.zeros(len(targets), dtype=bool)
    for g, chain in enumerate(tree.goal_chain):
        top = chain[-1]
        if goals[g].weight <= 0.0 or tree.parent[top] >= 0:
            continue
        distance = np.linalg.norm(targets[:, g] - heads[:, top], axis=1)
        out |= distance > longest_reach(skeleton, tree, chain) * (1.0 + 1e-9)
    return out


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
