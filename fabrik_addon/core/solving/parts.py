# SPDX-License-Identifier: GPL-3.0-or-later
"""A plan's parts and how each is solved: the method and the stages its joints and goals call for.

A part shares no bones with the others. A tree with joint limits (`LIMITED`)
runs stages (`stages`) chosen from its joints and goals, one list for a frame
that searches from its own start and one for a frame that goes on from the
last (`limited_stages`); a free tree with unconnected bones pulled by position
goals runs FABRIK handing over to the refinement once it crawls (`OFFSETS`,
`methods`); any other free tree runs FABRIK itself (`FREE`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Sequence

from ..goals import floor
from ..joints import refine
from ..joints.angles import AngleRig
from ..joints.tree_goals import TreeGoals
from ..model.problem import Goal, SolveSettings
from ..model.tree import MovingTree, Start, components
from . import limb, methods, stages
from .loop import Solved, Stage

__all__ = [
    "FREE", "LIMITED", "OFFSETS", "FREE_STAGES", "Part", "above_floor", "hinged", "layout_of", "limited_stages",
    "method_of", "open_cones_as_free", "part_start", "parts_of",
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


def method_of(tree: MovingTree, goals: Sequence[Goal]) -> str:
    """The method for a part's tree and goals (see the module)."""
    if tree.is_limited:
        return LIMITED
    if tree.needs_frames and all(g.rotation is None and g.pole is None for g in goals):
        return OFFSETS
    return FREE


def parts_of(tree: MovingTree, goals: Sequence[Goal]) -> tuple[Part, ...]:
    """The parts of a plan's tree for these goals, each with its method and stages."""
    groups = components(tree)
    out = []
    for group in groups:
        own_tree, nodes = (tree, list(range(len(tree.bones)))) if len(groups) == 1 else tree.part(group)
        own = [goals[g] for g in group]
        plain = all(g.rotation is None and g.pole is None for g in own)
        method = method_of(own_tree, own)
        if method == LIMITED:
            free = open_cones_as_free(own_tree) if plain else None
            chosen = limited_stages(own_tree, own, True), limited_stages(own_tree, own, False)
            out.append(Part(tuple(group), tuple(nodes), own_tree, method, plain, *chosen, free))
        else:
            chosen = FREE_STAGES[method]
            out.append(Part(tuple(group), tuple(nodes), own_tree, method, plain, chosen, chosen))
    return tuple(out)


def limited_stages(tree: MovingTree, goals: Sequence[Goal], explore: bool) -> tuple[Stage, ...]:
    """A limited part's stages, from its joints and goals: for a frame that searches from its own start (`explore`)
    or one that goes on from the last; on a robot arm (hinges and rolls) the start is refined before FABRIK's passes
    move points off the hinges' planes."""
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
    """The tree without its limits where every limit is an open cone and twist range around rest on connected bones,
    else None: where no limit binds, a limited pass moves every joint as the free pass does, so such a chain is
    solved as the free one first."""
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


def above_floor(
    tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings, solved: Solved
) -> Solved:
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


def part_start(start: Start, nodes: Sequence[int]) -> Start:
    """A whole tree's start, for the nodes of one part."""
    pick = itemgetter(*nodes) if len(nodes) > 1 else (lambda values: (values[nodes[0]],))

    def of(values):
        return None if values is None else list(pick(values))

    def place() -> tuple:
        return of(start.frames), of(start.heads), of(start.tails), of(start.zero)

    return Start(
        None, None, None, None, start.pose, of(start.rotations), of(start.fixed), of(start.translations), place
    )
