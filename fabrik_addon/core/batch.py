# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK for many frames at once: the same algorithm as `fabrik.solve`, vectorised over frames with numpy.

A bake solves every frame of a range from that frame's own start pose; the
frames do not depend on each other, so each FABRIK step can move one joint
in all frames at once. This covers trees with position goals and no limits:
free trees of connected bones here (positions are all the passes need, as in
the per-frame solver), and trees with unconnected bones (rigid head offsets,
so frames are carried) in `batch_offsets`. Frames stop one by one, by the same
rules as `fabrik.solve`, so the results agree with it; on trees with offsets
the frames FABRIK leaves short of their targets, which `fabrik.solve`
finishes with its refinement, are handed to it one by one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from . import batch_offsets, fabrik, matrix_rows, pole, refine, stretch
from .fabrik import branch_weights, moving_tree, pulls
from .problem import Goal, SolveSettings, validate_settings
from .skeleton import Pose, Skeleton
from .vec import EPSILON



def supports(skeleton: Skeleton, goals: Sequence[Goal], tree: fabrik.MovingTree | None = None) -> bool:
    """True when these goals can be solved here (position goals only, no joint limits on the moving bones, no
    IK stretch: the bones' lengths would differ from frame to frame). `tree`: the moving tree solved, where it
    is not the goals' own (`solve_moving`'s `free`)."""
    if not goals or any(g.rotation is not None or g.pole is not None for g in goals):
        return False
    if stretch.applies(skeleton, goals):
        return False
    return all(limit is None for limit in (tree or moving_tree(skeleton, goals)).limits)


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
    tree = moving_tree(skeleton, goals)
    bones = list(tree.bones)
    start_heads = np.stack([p.heads[bones] for p in starts])
    start_frames = np.stack([p.frames[bones] for p in starts])
    heads, frames, iterations, errors = _solve(
        skeleton, tree, goals, targets, start_heads, start_frames, settings, lambda f: starts[f]
    )
    return _poses(skeleton, tree, starts, heads, frames), iterations, errors


def solve_moving(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    targets: np.ndarray,
    start_heads: np.ndarray,
    start_frames: np.ndarray,
    settings: SolveSettings = SolveSettings(),
    start_pose: Callable[[int], Pose] | None = None,
    free: fabrik.MovingTree | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Like `solve_frames`, for the moving bones only: start heads (F, m, 3) and frames (F, m, 3, 3) in the
    moving tree's order in, their solved frames (F, m, 3, 3), the iterations and the errors out.

    `start_pose(f)` gives frame f's whole start pose, for the frames that the
    per-frame solver finishes (trees with offsets, see `_solve`); without it
    that pose is the rest pose with the moving bones as given, which is right
    when the bones the chains hang from are at rest.

    With `free` (one chain whose limits are open cones, as the free chain
    `fabrik.open_cones_as_free` makes of it) the free chain's passes run as
    `fabrik.solve` first runs them there, handing over once they crawl
    (`fabrik.SLOW_WINDOW`): the frames that end short are not finished here,
    and whether the others are inside the limits is the caller's to check.
    """
    tree = free or moving_tree(skeleton, goals)
    if start_pose is None:
        bones = list(tree.bones)

        def start_pose(f: int) -> Pose:
            pose = skeleton.rest_pose()
            pose.heads[bones], pose.frames[bones] = start_heads[f], start_frames[f]
            return pose

    _, frames, iterations, errors = _solve(
        skeleton, tree, goals, targets, start_heads, start_frames, settings, start_pose,
        fabrik.SLOW_WINDOW if free is not None else 0,
    )
    return frames, iterations, errors


def _solve(skeleton, tree, goals, targets, start_heads, start_frames, settings, start_pose, window=0):
    """Solved heads and frames of the moving bones, iterations and errors, by whichever form the tree needs.

    Trees with offsets: where FABRIK's phase (`batch_offsets`) ends short of
    the targets, `fabrik.solve` goes on with its refinement, so those frames
    are solved again one by one from their start poses (`start_pose(f)`).
    A `window` (one free chain pulled at its tip) hands over as `fabrik.iterate_chain` does.
    """
    validate_settings(settings)
    if not supports(skeleton, goals, tree):
        raise ValueError("batched solving needs position goals only and no joint limits on the moving bones")
    groups = fabrik.components(tree)
    if len(groups) > 1:  # chains that share no bones: each stops when it has reached, as `fabrik.solve` does
        heads, frames = start_heads.copy(), start_frames.copy()
        iterations = np.zeros(len(targets), dtype=int)
        errors = np.zeros((len(targets), len(goals)))
        for group in groups:
            part, nodes = tree.part(group)
            solved = _solve(
                skeleton, part, [goals[g] for g in group], targets[:, group], start_heads[:, nodes],
                start_frames[:, nodes], settings, start_pose,
            )
            heads[:, nodes], frames[:, nodes] = solved[0], solved[1]
            iterations = np.maximum(iterations, solved[2])
            errors[:, group] = solved[3]
        return heads, frames, iterations, errors
    if tree.needs_frames:
        heads, frames, iterations, errors, converged = batch_offsets.solve(
            tree, goals, targets, start_heads, start_frames, settings
        )
        bones = list(tree.bones)
        if not any(g.weight > 0.0 for g in goals):
            return heads, frames, iterations, errors  # nothing pulls: FABRIK's phase is all `fabrik.solve` does
        short = ~converged & ~_out_of_reach(skeleton, tree, goals, targets, start_heads, settings.tolerance)
        for f in np.flatnonzero(short).tolist():
            frame_goals = [replace(g, target=tuple(map(float, targets[f, i]))) for i, g in enumerate(goals)]
            pose, report = fabrik.solve(skeleton, frame_goals, start_pose(f), settings)
            heads[f], frames[f] = pose.heads[bones], pose.frames[bones]
            iterations[f], errors[f] = report.iterations, report.errors
        return heads, frames, iterations, errors
    heads, tails, iterations, errors, keep_start = _iterate(
        tree, goals, targets, start_heads, start_frames, settings, window
    )
    frames = _turned_frames(start_frames, heads, tails, np.asarray(tree.length))
    frames[keep_start] = start_frames[keep_start]
    heads[keep_start] = start_heads[keep_start]
    return heads, frames, iterations, errors


def _out_of_reach(skeleton, tree, goals, targets, start_heads, tolerance) -> np.ndarray:
    """Per frame, whether some goal's target lies beyond all its chain could reach (`refine.Problem.out_of_reach`):
    there `fabrik.solve` keeps FABRIK's answer."""
    out = np.zeros(len(targets), dtype=bool)
    for g, chain in enumerate(tree.goal_chain):
        top = chain[-1]
        if goals[g].weight <= 0.0 or tree.parent[top] >= 0:
            continue
        longest = refine.longest_reach(skeleton, tree, chain)
        distance = np.linalg.norm(targets[:, g] - start_heads[:, top], axis=1)
        out |= distance > longest * (1.0 + 1e-9)
    return out


def _iterate(tree, goals, targets, start_heads, start_frames, settings, window=0):
    """The FABRIK iterations for all frames; heads, tails, iterations, errors and which frames kept their start.
    With a `window`, a frame also stops once its best error has not halved over that many iterations."""
    count = len(start_heads)
    length = np.asarray(tree.length)
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    heads = start_heads.copy()
    tails = heads + length[None, :, None] * start_frames[:, :, :, 1]
    base = heads.copy()
    targets = np.asarray(targets, dtype=float)
    for chain, g in zip(tree.goal_chain, range(len(goals))):
        branch = tree.subtree(chain[-2]) if len(chain) > 1 else []
        _bend_if_straight_at(heads, tails, list(chain), branch, targets[:, g], settings.tolerance)
    errors = np.linalg.norm(tails[:, node_of_goal] - targets, axis=2)
    done = errors.max(axis=1) <= settings.tolerance
    iterations = np.zeros(count, dtype=int)
    keep_start = done.copy()  # frames already on target keep their start pose untouched

    if fabrik.pulled_at_tip(tree, goals):
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

    if fabrik.is_two_bone_chain(tree, goals):
        # As the per-frame solver: the middle joint starts on its triangle (`fabrik.settle_two_bones`).
        _settle_two_bones(heads, tails, targets[:, 0], length, ~done)
        errors = np.linalg.norm(tails[:, node_of_goal] - targets, axis=2)

    best_error = errors.sum(axis=1)
    best_errors = errors.copy()
    without_progress = np.zeros(count, dtype=int)
    weights = [float(g.weight) for g in goals]
    asks = pulls(tree, weights, branch_weights(tree, weights))
    # Node- and component-major working copies (m, 3, F): one joint's x, y or z over all frames is one
    # contiguous row, which keeps numpy's per-call overhead low on these small arrays.
    node_heads, node_tails = heads.transpose(1, 2, 0).copy(), tails.transpose(1, 2, 0).copy()
    node_base, node_targets = base.transpose(1, 2, 0).copy(), targets.transpose(1, 2, 0).copy()
    best_heads, best_tails = node_heads.copy(), node_tails.copy()
    history = [best_error.copy()]  # (for the window: every frame's best error after each iteration)
    for iteration in range(1, settings.max_iterations + 1):
        active = np.flatnonzero(~done)
        if not len(active):
            break
        everyone = len(active) == count
        # np.take keeps the subsets C-contiguous (fancy indexing on the last axis would not).
        h = node_heads if everyone else np.take(node_heads, active, axis=2)
        t = node_tails if everyone else np.take(node_tails, active, axis=2)
        aims = node_targets if everyone else np.take(node_targets, active, axis=2)
        _forward_reaching(tree, h, t, aims, asks, length)
        _backward_reaching(tree, h, t, node_base if everyone else np.take(node_base, active, axis=2), length)
        if not everyone:
            node_heads[:, :, active], node_tails[:, :, active] = h, t
        iterations[active] += 1
        e = np.sqrt(((t[node_of_goal] - aims) ** 2).sum(axis=1)).T
        errors[active] = e
        converged = e.max(axis=1) <= settings.tolerance
        current = e.sum(axis=1)
        improved = ~converged & (current < best_error[active] * (1.0 - settings.stall_fraction))
        # Converged frames and improving frames take this iteration's joints as their best.
        taken = converged | improved
        if everyone and taken.all():
            best_heads[...], best_tails[...] = node_heads, node_tails
        elif taken.any():
            take = active[taken]
            best_heads[:, :, take], best_tails[:, :, take] = node_heads[:, :, take], node_tails[:, :, take]
        best_errors[active[taken]] = e[taken]
        best_error[active[improved]] = current[improved]
        without_progress[active[improved]] = 0
        stuck = active[~taken]
        without_progress[stuck] += 1
        done[active[converged]] = True
        done[stuck[without_progress[stuck] >= settings.patience]] = True
        if window:
            history.append(best_error.copy())
            if iteration >= window:
                done[active[best_error[active] > 0.5 * history[iteration - window][active]]] = True
    return best_heads.transpose(2, 0, 1), best_tails.transpose(2, 0, 1), iterations, best_errors, keep_start


def _settle_two_bones(heads: np.ndarray, tails: np.ndarray, target: np.ndarray, length: np.ndarray, frames) -> None:
    """`fabrik.two_bone_triangle` for the chosen frames at once: where it has a triangle, the middle joint goes
    onto it and the tip onto the target."""
    l1, l2 = float(length[0]), float(length[1])
    base, middle = heads[:, 0], tails[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.linalg.norm(target - base, axis=1)
        u = (target - base) * (1.0 / d)[:, None]
        arm = middle - base
        side = arm - u * (arm * u).sum(axis=1)[:, None]
        width = np.linalg.norm(side, axis=1)
        cosine = (l1 * l1 + d * d - l2 * l2) / (2.0 * l1 * d)
        sine = np.sqrt(np.maximum(0.0, 1.0 - cosine * cosine))
        placed = base + (u * (l1 * cosine)[:, None] + side * (l1 * sine / width)[:, None])
    chosen = frames & (abs(l1 - l2) < d) & (d < l1 + l2) & (width > pole.STRAIGHT * (l1 + l2))
    tails[chosen, 0] = heads[chosen, 1] = placed[chosen]
    tails[chosen, 1] = target[chosen]


def _turned_frames(start_frames: np.ndarray, heads: np.ndarray, tails: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Each moving bone's start frame turned the shortest way onto its solved direction, (F, m, 3, 3)."""
    count, m = heads.shape[:2]
    directions = (tails - heads) / length[None, :, None]
    frames = matrix_rows.swung_frames(start_frames.reshape(-1, 3, 3), directions.reshape(-1, 3))
    return frames.reshape(count, m, 3, 3)


def _bend_if_straight_at(
    heads: np.ndarray, tails: np.ndarray, chain: list[int], branch: list[int], target: np.ndarray, tolerance: float
) -> None:
    """Bend a chain (turning the whole `branch` below its first bone) in the frames where it is straight
    and its target lies on its line off its tip, as `fabrik` does."""
    if len(chain) < 2:
        return
    straight = batch_offsets.straight_at(heads, tails, chain, target, tolerance)
    if not straight.any():
        return
    top = chain[-1]
    axis = tails[straight, chain[0]] - heads[straight, top]
    k = matrix_rows.any_perpendicular(axis / np.linalg.norm(axis, axis=1)[:, None])
    hinge = tails[straight, top]
    cos, sin = np.cos(0.2), np.sin(0.2)

    def turn(v: np.ndarray) -> np.ndarray:
        """Rodrigues: v turned by 0.2 rad about k."""
        return v * cos + np.cross(k, v) * sin + k * np.einsum("ij,ij->i", k, v)[:, None] * (1.0 - cos)

    for node in branch:
        heads[straight, node] = hinge + turn(heads[straight, node] - hinge)
        tails[straight, node] = hinge + turn(tails[straight, node] - hinge)


def _reach_into(out: np.ndarray, fixed: np.ndarray, toward: np.ndarray, length: float, fallback) -> None:
    """FABRIK's move for all frames ((3, F) arrays), written into `out`: the point at `length` from `fixed`
    towards `toward`; where the two points meet, `fixed + fallback()` (the bone keeps its previous vector)."""
    d = toward - fixed
    n = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    if n.min() < EPSILON:
        degenerate = n < EPSILON
        kept = fallback()
        n[degenerate] = 1.0
        d *= length / n
        d[:, degenerate] = kept[:, degenerate]
    else:
        d *= length / n
    np.add(fixed, d, out=out)


def _forward_reaching(tree, heads, tails, targets, asks, length) -> None:
    """Tips to root for every frame ((m, 3, F) arrays): tails to the weighted asks, heads onto the line."""
    for k in reversed(range(len(tree.bones))):
        total, pulls = asks[k]
        if total <= 0.0:
            continue
        if len(pulls) == 1:
            kind, i, _ = pulls[0]
            wanted = targets[i] if kind == "goal" else heads[i]
        else:
            wanted = sum(w * (targets[i] if kind == "goal" else heads[i]) for kind, i, w in pulls) / total
        # Where head and wanted tail meet, keep the bone's direction: head = wanted - (tail - head).
        head, tail = heads[k], tails[k]
        _reach_into(head, wanted, head, length[k], lambda: head - tail)
        tail[...] = wanted


def _backward_reaching(tree, heads, tails, base, length) -> None:
    """Root to tips for every frame ((m, 3, F) arrays): heads back onto the base or the parent's tail, tails onto the line."""
    for k in range(len(tree.bones)):
        p = tree.parent[k]
        old_head = heads[k].copy()
        heads[k] = base[k] if p < 0 else tails[p]
        tail = tails[k]
        _reach_into(tail, heads[k], tail, length[k], lambda: tail - old_head)


def _poses(skeleton, tree, starts, heads, frames) -> list[Pose]:
    """Full poses: the moving bones as solved, the rest follow their parents rigidly."""
    bones = list(tree.bones)
    count = len(starts)
    start_frames = np.stack([p.frames for p in starts])
    start_heads = np.stack([p.heads for p in starts])
    out_frames, out_heads = start_frames.copy(), start_heads.copy()
    out_frames[:, bones] = frames
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
    return [Pose(out_heads[f], out_frames[f], lengths) for f in range(count)]
