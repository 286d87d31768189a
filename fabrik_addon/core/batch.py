# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK for many frames at once: the same algorithm as `fabrik.solve`, vectorised over frames with numpy.

A bake solves every frame of a range from that frame's own start pose; the
frames do not depend on each other, so each FABRIK step can move one joint
in all frames at once. This covers free trees of connected bones (no limits,
no unconnected heads, no rotation or pole goals): exactly the case where the
per-frame solver carries no frames either. Frames stop one by one, by the
same rules as `fabrik.solve`, so the results agree with it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from . import rotation
from .fabrik import moving_tree
from .problem import Goal, SolveSettings, validate_settings
from .skeleton import Pose, Skeleton

#: Below this length a direction is treated as undefined (coincident joints), as in `vec.reach`.
EPSILON = 1e-12


def supports(skeleton: Skeleton, goals: Sequence[Goal]) -> bool:
    """True when these goals can be solved here (a free connected tree, position goals only)."""
    if not goals or any(g.rotation is not None or g.pole is not None for g in goals):
        return False
    return not moving_tree(skeleton, goals).needs_frames


def solve_frames(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    targets: np.ndarray,
    starts: list[Pose],
    settings: SolveSettings = SolveSettings(),
) -> tuple[list[Pose], np.ndarray, np.ndarray]:
    """Solve F frames: targets (F, G, 3) for the goals' layout, one start pose per frame.

    Returns the poses, the iterations per frame and the errors (F, G).
    """
    validate_settings(settings)
    if not supports(skeleton, goals):
        raise ValueError("batched solving needs a free tree of connected bones and position goals only")
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    start_heads = np.stack([p.heads[bones] for p in starts])
    start_frames = np.stack([p.frames[bones] for p in starts])
    heads, tails, iterations, errors, keep_start = _iterate(tree, goals, targets, start_heads, start_frames, settings)
    length = np.asarray(tree.length)
    return _poses(skeleton, tree, starts, heads, tails, length, keep_start), iterations, errors


def solve_moving(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    targets: np.ndarray,
    start_heads: np.ndarray,
    start_frames: np.ndarray,
    settings: SolveSettings = SolveSettings(),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like `solve_frames`, for the moving bones only: start heads (F, m, 3) and frames (F, m, 3, 3) in the
    moving tree's order in, their solved frames (F, m, 3, 3), the iterations and the errors out."""
    validate_settings(settings)
    if not supports(skeleton, goals):
        raise ValueError("batched solving needs a free tree of connected bones and position goals only")
    tree = moving_tree(skeleton, goals)
    heads, tails, iterations, errors, keep_start = _iterate(tree, goals, targets, start_heads, start_frames, settings)
    frames = _turned_frames(start_frames, heads, tails, np.asarray(tree.length))
    frames[keep_start] = start_frames[keep_start]
    return frames, iterations, errors


def _iterate(tree, goals, targets, start_heads, start_frames, settings):
    """The FABRIK iterations for all frames; heads, tails, iterations, errors and which frames kept their start."""
    bones = list(tree.bones)
    count = len(start_heads)
    length = np.asarray(tree.length)
    weights = np.asarray([g.weight for g in goals], dtype=float)
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    branch = _branch_weights(tree, weights)
    heads = start_heads.copy()
    tails = heads + length[None, :, None] * start_frames[:, :, :, 1]
    base = heads.copy()
    targets = np.asarray(targets, dtype=float)
    for chain, g in zip(tree.goal_chain, range(len(goals))):
        _bend_if_straight_at(heads, tails, list(chain), tree.subtree(chain[-2]) if len(chain) > 1 else [], targets[:, g])
    errors = np.linalg.norm(tails[:, node_of_goal] - targets, axis=2)
    done = errors.max(axis=1) <= settings.tolerance
    iterations = np.zeros(count, dtype=int)
    keep_start = done.copy()  # frames already on target keep their start pose untouched

    if len(goals) == 1 and tree.is_single_chain and node_of_goal[0] == len(bones) - 1:
        # The paper's shortcut: an unreachable target stretches the chain straight at it.
        span = np.linalg.norm(targets[:, 0] - base[:, 0], axis=1)
        far = ~done & (span >= length.sum())
        if far.any():
            direction = (targets[far, 0] - base[far, 0]) / span[far, None]
            along = np.concatenate(([0.0], np.cumsum(length)))
            heads[far] = base[far, 0][:, None] + along[None, :-1, None] * direction[:, None]
            tails[far] = base[far, 0][:, None] + along[None, 1:, None] * direction[:, None]
            errors[far] = np.linalg.norm(tails[far][:, node_of_goal] - targets[far], axis=2)
            done |= far

    best_error = errors.sum(axis=1)
    best_heads, best_tails, best_errors = heads.copy(), tails.copy(), errors.copy()
    without_progress = np.zeros(count, dtype=int)
    for _ in range(settings.max_iterations):
        active = np.flatnonzero(~done)
        if not len(active):
            break
        h, t = heads[active], tails[active]
        _forward_reaching(tree, h, t, targets[active], weights, branch, length)
        _backward_reaching(tree, h, t, base[active], length)
        heads[active], tails[active] = h, t
        iterations[active] += 1
        e = np.linalg.norm(t[:, node_of_goal] - targets[active], axis=2)
        errors[active] = e
        converged = e.max(axis=1) <= settings.tolerance
        current = e.sum(axis=1)
        improved = ~converged & (current < best_error[active] * (1.0 - settings.stall_fraction))
        # Converged frames and improving frames take this iteration's joints as their best.
        take = active[converged | improved]
        best_heads[take], best_tails[take], best_errors[take] = heads[take], tails[take], errors[take]
        best_error[active[improved]] = current[improved]
        without_progress[active[improved]] = 0
        stuck = active[~converged & ~improved]
        without_progress[stuck] += 1
        done[active[converged]] = True
        done[stuck[without_progress[stuck] >= settings.patience]] = True
    return best_heads, best_tails, iterations, best_errors, keep_start


def _turned_frames(start_frames: np.ndarray, heads: np.ndarray, tails: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each moving bone's start frame turned the shortest way onto its solved direction, (F, m, 3, 3)."""
    count, m = heads.shape[:2]
    directions = (tails - heads) / length[None, :, None]
    turns = rotation.swing_matrices(
        start_frames[:, :, :, 1].reshape(-1, 3), directions.reshape(-1, 3), start_frames[:, :, :, 0].reshape(-1, 3)
    ).reshape(count, m, 3, 3)
    return rotation.orthonormalized((turns @ start_frames).reshape(-1, 3, 3)).reshape(count, m, 3, 3)


def _bend_if_straight_at(heads: np.ndarray, tails: np.ndarray, chain: list[int], branch: list[int], target: np.ndarray) -> None:
    """Bend a chain (turning the whole `branch` below its first bone) in the frames where it is straight
    and its target lies on its line, as `fabrik` does."""
    if len(chain) < 2:
        return
    top = chain[-1]
    base = heads[:, top]
    axis = tails[:, chain[0]] - base
    length = np.linalg.norm(axis, axis=1)
    ok = length >= EPSILON
    axis = axis / np.where(ok, length, 1.0)[:, None]
    straight = ok.copy()
    for point in [tails[:, k] for k in chain] + [target]:
        d = point - base
        off = d - axis * np.einsum("ij,ij->i", d, axis)[:, None]
        straight &= np.linalg.norm(off, axis=1) <= 1e-5 * length
    if not straight.any():
        return
    a = axis[straight]
    helper = np.where((np.abs(a[:, 2]) < 0.9)[:, None], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0])
    k = np.cross(a, helper)
    k /= np.linalg.norm(k, axis=1)[:, None]
    hinge = tails[straight, top]
    cos, sin = np.cos(0.2), np.sin(0.2)

    def turn(v: np.ndarray) -> np.ndarray:
        """Rodrigues: v turned by 0.2 rad about k."""
        return v * cos + np.cross(k, v) * sin + k * np.einsum("ij,ij->i", k, v)[:, None] * (1.0 - cos)

    for node in branch:
        heads[straight, node] = hinge + turn(heads[straight, node] - hinge)
        tails[straight, node] = hinge + turn(tails[straight, node] - hinge)


def _branch_weights(tree, weights: np.ndarray) -> np.ndarray:
    """For each node, the summed weight of the effectors at or below it."""
    branch = np.array([sum(weights[g] for g in goals) for goals in tree.goals_at], dtype=float)
    for k in reversed(range(len(tree.bones))):
        if tree.parent[k] >= 0:
            branch[tree.parent[k]] += branch[k]
    return branch


def _reach(fixed: np.ndarray, toward: np.ndarray, length: float, fallback: np.ndarray) -> np.ndarray:
    """FABRIK's move for all frames: the point at `length` from `fixed` towards `toward` (fallback where they meet)."""
    d = toward - fixed
    n = np.sqrt(np.einsum("ij,ij->i", d, d))
    degenerate = n < EPSILON
    if degenerate.any():
        d = np.where(degenerate[:, None], fallback, d)
        n = np.where(degenerate, 1.0, n)
        return fixed + d * np.where(degenerate, 1.0, length / n)[:, None]
    d *= (length / n)[:, None]
    d += fixed
    return d


def _forward_reaching(tree, heads, tails, targets, weights, branch, length) -> None:
    """Tips to root for every frame: tails to the weighted asks, heads onto the line."""
    for k in reversed(range(len(tree.bones))):
        total = 0.0
        wanted = np.zeros((len(heads), 3))
        for g in tree.goals_at[k]:
            wanted += weights[g] * targets[:, g]
            total += weights[g]
        for c in tree.children[k]:
            if branch[c] > 0.0:
                wanted += branch[c] * heads[:, c]
                total += branch[c]
        if total <= 0.0:
            continue
        wanted /= total
        # Where head and wanted tail meet, keep the bone's direction: head = wanted - (tail - head).
        heads[:, k] = _reach(wanted, heads[:, k], length[k], heads[:, k] - tails[:, k])
        tails[:, k] = wanted


def _backward_reaching(tree, heads, tails, base, length) -> None:
    """Root to tips for every frame: heads back onto the base or the parent's tail, tails onto the line."""
    for k in range(len(tree.bones)):
        p = tree.parent[k]
        old_bone = tails[:, k] - heads[:, k]
        heads[:, k] = base[:, k] if p < 0 else tails[:, p]
        tails[:, k] = _reach(heads[:, k], tails[:, k], length[k], old_bone)


def _poses(skeleton, tree, starts, heads, tails, length, keep_start) -> list[Pose]:
    """Full poses: moving bones turn the shortest way from their start, the rest follow their parents rigidly."""
    bones = list(tree.bones)
    count = len(starts)
    start_frames = np.stack([p.frames for p in starts])
    start_heads = np.stack([p.heads for p in starts])
    out_frames, out_heads = start_frames.copy(), start_heads.copy()
    solved = _turned_frames(start_frames[:, bones], heads, tails, length)
    out_frames[:, bones] = solved
    out_heads[:, bones] = heads
    moved = set(bones)
    for b in skeleton.order:
        p = skeleton.parents[b]
        if b in moved or p not in moved:
            continue
        turn = out_frames[:, p] @ np.swapaxes(start_frames[:, p], 1, 2)
        out_heads[:, b] = out_heads[:, p] + np.einsum("fij,fj->fi", turn, start_heads[:, b] - start_heads[:, p])
        out_frames[:, b] = turn @ start_frames[:, b]
        moved.add(b)
    lengths = starts[0].lengths
    return [
        starts[f].copy() if keep_start[f] else Pose(out_heads[f], out_frames[f], lengths) for f in range(count)
    ]
