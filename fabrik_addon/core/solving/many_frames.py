# SPDX-License-Identifier: GPL-3.0-or-later
"""Many frames of a plan solved at once: FABRIK's passes on numpy rows (`chain.fabrik_rows`) for every frame together,
and the frames where a method goes on from FABRIK solved one by one, as each alone is. A per-frame bake takes
this way where every part is FABRIK's alone: position goals, free or in open cones."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from ..chain import bend, fabrik_rows, starts
from ..chain.fabrik import SLOW_WINDOW
from ..chain.local import rotation_rows, with_start_twist
from ..goals import floor
from ..joints.tree_goals import longest_reach
from ..math import blas, matrix_rows, quat
from ..model import limits
from ..model.problem import Goal, SolveSettings, validate_goals, validate_settings
from ..model.skeleton import Skeleton
from ..model.tree import MovingTree, Start
from .parts import LIMITED, OFFSETS, above_floor, part_start
from .plan import Plan

__all__ = ["SolvedRows", "on_rows", "solve_rows"]


@dataclass(frozen=True)
class SolvedRows:
    """What `solve_rows` leaves for F frames: the nodes' frames (F, m, 3, 3), heads (F, m, 3) and local
    rotations (F, m, 3, 3; None where a fixed bone lies between two moving ones, `LocalTree.placed`), the
    iterations (F,) and the errors (F, G)."""

    frames: np.ndarray
    heads: np.ndarray
    rotations: np.ndarray | None
    iterations: np.ndarray
    errors: np.ndarray


def on_rows(plan: Plan) -> bool:
    """Whether many frames solve together on numpy rows (`solve_rows`): FABRIK on parts pulled by position
    goals, free or in open cones."""
    return not plan.whole and all(
        p.plain and (p.method != LIMITED or p.free is not None) for p in plan.parts
    )


@blas.on_one_thread  # (as `Plan.solve`: so each frame solved alone here is solved as it is there)
def solve_rows(
    plan: Plan,
    goals: Sequence[Goal],
    targets: np.ndarray,
    heads: np.ndarray,
    frames: np.ndarray,
    fixed: dict[int, np.ndarray],
    settings: SolveSettings,
    start_of: Callable[[int], Start],
    floors: Sequence | None = None,
) -> SolvedRows:
    """Solve F frames of a plan that `on_rows` (targets (F, G, 3), start heads and frames, the fixed bones' frames,
    each frame's floor where it moves): FABRIK on numpy rows, and the frames a method goes on with solved one by
    one, so each gets what it alone would."""
    if not on_rows(plan):
        raise ValueError(
            "many frames solve together only where FABRIK alone takes every part: position goals, and no joint "
            "limits on the moving bones but cones open around rest"
        )
    validate_goals(plan.skeleton, goals)
    validate_settings(settings)
    count = len(targets)
    if floors is None:
        floors = [settings.floor] * count
    planes = floor.planes_rows(floors)  # (None where no frame has a floor)
    if planes is not None:
        targets = floor.lifted_rows(planes, targets)
    whole = len(plan.parts) == 1  # (then the part's tree is the plan's: its rows are the answer's)
    solved_frames, solved_heads = (None, None) if whole else (frames.copy(), heads.copy())
    iterations = np.zeros(count, dtype=int)
    errors = np.zeros((count, len(goals)))
    # The cone check works out local rotations; the frames it passes keep them rather than working them out again.
    rotations = stale = None
    for part in plan.parts:
        nodes, group, tree = list(part.nodes), list(part.goals), part.tree
        own = [goals[g] for g in group]
        free, window = tree, SLOW_WINDOW if part.method == OFFSETS else 0
        if part.method == LIMITED:
            free, window = part.free if settings.explore else None, SLOW_WINDOW  # (`stages.free_passes`)
        again = np.ones(count, dtype=bool)  # (continuity mode: a limited part settles frame by frame)
        if free is not None:
            placed_heads, placed, counted, missed, converged = fabrik_rows.solve(
                free, own, targets[:, group], heads[:, nodes], frames[:, nodes], settings, window
            )
            iterations, errors[:, group] = np.maximum(iterations, counted), missed
            again = np.zeros(count, dtype=bool)
            if part.method == OFFSETS and any(g.weight > 0.0 for g in own):
                beyond = _out_of_reach_rows(plan.skeleton, tree, own, targets[:, group], heads[:, nodes])
                again = ~converged & ~beyond
            elif part.method == LIMITED:
                good, local = _inside_cones(plan, tree, placed, frames[:, nodes], fixed, converged)
                if starts.spreads(free, own, settings) and settings.max_iterations > 1:
                    rimmed, missed_now = _spread_within(plan, 
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
            begun = part_start(start_of(f), nodes)
            alone = settings if floors[f] == settings.floor else replace(settings, floor=floors[f])
            solved = plan.by_stages(part, frame_goals, begun, alone)
            solved = above_floor(tree, frame_goals, begun, alone, solved)
            if solved.frames is None:
                solved_frames[f, nodes], solved_heads[f, nodes] = frames[f, nodes], heads[f, nodes]
            else:
                turned = matrix_rows.quaternion_to_matrix(np.array(solved.frames).reshape(-1, 4))
                solved_frames[f, nodes] = matrix_rows.orthonormalized(turned)
                solved_heads[f, nodes] = solved.heads
            iterations[f], errors[f, group] = max(iterations[f], solved.report.iterations), solved.report.errors
    if not plan.local.placed:
        rotations = None
    elif rotations is None:
        rotations = rotation_rows(plan.skeleton, plan.tree, solved_frames, fixed)
    elif stale.any():
        hung = {b: values[stale] for b, values in fixed.items()}
        rotations[stale] = rotation_rows(plan.skeleton, plan.tree, solved_frames[stale], hung)
    return SolvedRows(solved_frames, solved_heads, rotations, iterations, errors)


def _spread_within(
    plan: Plan, tree: MovingTree, targets: np.ndarray, spread_heads: np.ndarray, spread_frames: np.ndarray,
    frames: np.ndarray, fixed: dict[int, np.ndarray], chosen: np.ndarray, solved: tuple,
) -> tuple[np.ndarray, np.ndarray]:
    """`stages.free_passes`'s bend within the cones on rows: where the even bend took a joint out of its cone, the
    joint on its rim and the bones after it bent evenly (`bend.spread_within_rows`). The frames where that lands
    inside every cone take that pose (`solved`, changed in place); which frames did, and their tips' distances."""
    placed_heads, placed, local, good = solved
    if not chosen.any():
        return chosen, np.zeros(0)
    skeleton, length = plan.skeleton, np.asarray(tree.length)
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
    inside, rotations = _inside_cones(plan, tree, turned, frames[rows_at], hung, np.ones(len(rows_at), bool))
    take = rows_at[inside]
    placed[take], local[take] = turned[inside], rotations[inside]
    placed_heads[take] = points[:-1][:, :, take].transpose(2, 0, 1)
    good[take] = True
    taken = np.zeros_like(chosen)
    taken[take] = True
    return taken, missed[take]


def _inside_cones(
    plan: Plan, tree: MovingTree, solved: np.ndarray, begun: np.ndarray, fixed: dict[int, np.ndarray],
    converged: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Which frames of the free passes on a limited part's open cones are the answer (converged, every joint inside
    its limit), and the local rotations the limits read; the answer's leaves' twists go back to where they began."""
    skeleton = plan.skeleton
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
