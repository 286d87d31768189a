# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK for many frames at once on trees whose bones carry frames: unconnected bones with rigid offsets.

A finger whose base sits a little off the palm's tip hangs from the palm at
an offset that turns with the palm, so the passes must know each bone's
frame, not only its joints (`fabrik.Joints`). This module runs the very steps
of `fabrik.solve` for such trees -- position goals, no limits -- on all
frames together: the careful descent (part-way aims, undoing steps that make
things worse) and its stop rules (the stall, the slow-progress handover).
Each frame stops by the same rules as in the per-frame solver, so the frames
it converges agree with it to rounding; the per-frame solver finishes the
others with its refinement, and `batch` hands those frames to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import matrix_rows, quat_rows
from .fabrik import SLOW_WINDOW, MovingTree, branch_weights, pulls
from .problem import Goal, SolveSettings
from .vec import EPSILON


@dataclass
class Joints:
    """Every frame's working state, (F, m, ...) arrays in the moving tree's node order."""

    heads: np.ndarray
    tails: np.ndarray
    #: Each node's frame as a unit quaternion (F, m, 4).
    frames: np.ndarray
    #: Each unconnected node's head offset from its parent's tail, in the parent's frame (zeros elsewhere).
    offsets: np.ndarray
    #: The fixed head of every base node.
    base: np.ndarray
    #: Per node, whether the passes turn its frame (`MovingTree.carried_frames`: those children hang from at an
    #: offset); the others turn once, the shortest way, at the end (`pose_frames`).
    carried: tuple[bool, ...]

    @classmethod
    def start(cls, tree: MovingTree, heads: np.ndarray, frames: np.ndarray) -> "Joints":
        """The state at start poses: heads (F, m, 3) and frames (F, m, 3, 3)."""
        count, m = heads.shape[:2]
        length = np.asarray(tree.length)
        tails = heads + length[None, :, None] * frames[:, :, :, 1]
        q = matrix_rows.quaternions_from_matrices(frames.reshape(-1, 3, 3)).reshape(count, m, 4)
        offsets = np.zeros((count, m, 3))
        for k, p in enumerate(tree.parent):
            if p >= 0 and not tree.connected[k]:
                offsets[:, k] = quat_rows.rotate(quat_rows.conj(q[:, p]), heads[:, k] - tails[:, p])
        return cls(heads.copy(), tails, q, offsets, heads.copy(), tree.carried_frames(False))

    def rows(self, rows: np.ndarray) -> "Joints":
        """The state of some frames (a copy)."""
        return Joints(
            self.heads[rows], self.tails[rows], self.frames[rows], self.offsets[rows], self.base[rows], self.carried
        )

    def put(self, rows: np.ndarray, other: "Joints") -> None:
        """Write the moving parts of another state back into some frames."""
        self.heads[rows], self.tails[rows], self.frames[rows] = other.heads, other.tails, other.frames

    def pose_frames(self, tree: MovingTree) -> np.ndarray:
        """Each node's frame as an exact rotation matrix (F, m, 3, 3), as `fabrik` builds the solved pose (the
        frames not carried turned to their bones first, as `fabrik.Joints.final_frames` does)."""
        count, m = self.heads.shape[:2]
        frames = self.frames.copy()
        for k, carried in enumerate(self.carried):
            if not carried:
                q = frames[:, k]
                after = (self.tails[:, k] - self.heads[:, k]) * (1.0 / tree.length[k])
                turn = quat_rows.arc(quat_rows.y_axis(q), after, quat_rows.x_axis(q))
                frames[:, k] = quat_rows.normalized(quat_rows.mul(turn, q))
        matrices = matrix_rows.quaternion_to_matrix(frames.reshape(-1, 4))
        return matrix_rows.orthonormalized(matrices).reshape(count, m, 3, 3)


def solve(
    tree: MovingTree,
    goals: Sequence[Goal],
    targets: np.ndarray,
    start_heads: np.ndarray,
    start_frames: np.ndarray,
    settings: SolveSettings,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FABRIK's phase of `fabrik.solve` for F frames: solved heads (F, m, 3) and frames (F, m, 3, 3),
    iterations (F,), errors (F, G) and which frames converged (F,).

    As in `fabrik.solve`: a careful descent from each start that hands over once
    its best error has not halved over `fabrik.SLOW_WINDOW` iterations. Frames
    that converged are `fabrik.solve`'s answer; the others are where the
    per-frame solver goes on from (with its refinement), and the caller solves
    them again with it.
    """
    targets = np.asarray(targets, dtype=float)
    joints = Joints.start(tree, start_heads, start_frames)
    budget = np.full(len(targets), settings.max_iterations)
    iterations, errors, converged = _descend(tree, goals, targets, joints, settings, budget, careful=True)
    return joints.heads, joints.pose_frames(tree), iterations, errors, converged


def _descend(
    tree: MovingTree,
    goals: Sequence[Goal],
    targets: np.ndarray,
    joints: Joints,
    settings: SolveSettings,
    budget: np.ndarray,
    careful: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FABRIK iterations for every frame (`fabrik._solve_from`), at most `budget` per frame; joints end as each
    frame's result.

    Returns the iterations, the errors and whether each frame converged.
    """
    count = len(targets)
    weights = [float(g.weight) for g in goals]
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    asks = pulls(tree, weights, branch_weights(tree, weights))
    for g, chain in enumerate(tree.goal_chain):
        _bend_if_straight_at(tree, joints, chain, targets[:, g], settings.tolerance)
    errors = np.linalg.norm(joints.tails[:, node_of_goal] - targets, axis=2)
    iterations = np.zeros(count, dtype=int)
    converged = np.zeros(count, dtype=bool)
    done = np.zeros(count, dtype=bool)
    # Each frame's best state so far; a frame ends in it (a converged frame's best is where it converged).
    best = joints.rows(np.arange(count))
    best_error = errors.sum(axis=1)
    best_errors = errors.copy()
    step = np.ones(count)
    without_progress = np.zeros(count, dtype=int)
    # Per frame, the least summed error of the goals that pull so far, after each iteration: the slow-progress
    # handover (`fabrik._solve_from`).
    window = SLOW_WINDOW if careful else 0
    pulling = [g for g, goal in enumerate(goals) if goal.weight > 0.0]
    history = np.empty((count, int(budget.max(initial=0)) + 1))
    history[:, 0] = errors[:, pulling].sum(axis=1)
    for iteration in range(1, int(budget.max(initial=0)) + 1):
        done |= budget < iteration
        active = np.flatnonzero(~done)
        if not len(active):
            break
        now = joints.rows(active)
        aims = targets[active]
        part = step[active] < 1.0
        if careful and part.any():
            tips = now.tails[:, node_of_goal]
            partial = tips + step[active][:, None, None] * (aims - tips)
            aims = np.where(part[:, None, None], partial, aims)
        _forward_reaching(tree, now, aims, asks)
        _backward_reaching(tree, now)
        joints.put(active, now)
        iterations[active] = iteration
        e = np.linalg.norm(now.tails[:, node_of_goal] - targets[active], axis=2)
        errors[active] = e
        reached = e.max(axis=1) <= settings.tolerance
        current = e.sum(axis=1)
        improved = ~reached & (current < best_error[active] * (1.0 - settings.stall_fraction))
        take = active[reached | improved]
        best.put(take, joints.rows(take))
        best_errors[take] = errors[take]
        best_error[active[improved]] = current[improved]
        without_progress[active[improved]] = 0
        step[active[improved]] = np.minimum(1.0, 2.0 * step[active[improved]])
        converged[active[reached]] = done[active[reached]] = True
        stuck = active[~reached & ~improved]
        without_progress[stuck] += 1
        done[stuck[without_progress[stuck] >= settings.patience]] = True
        if careful:
            # A step that did not help is undone and tried again at half the reach.
            retry = stuck[without_progress[stuck] < settings.patience]
            joints.put(retry, best.rows(retry))
            step[retry] *= 0.5
        if window:
            going = active[~done[active]]
            history[going, iteration] = np.minimum(history[going, iteration - 1], errors[going][:, pulling].sum(axis=1))
            if iteration >= window:
                slow = going[history[going, iteration] > 0.5 * history[going, iteration - window]]
                done[slow] = True
    joints.put(np.arange(count), best)
    return iterations, best_errors, converged


def _turn(joints: Joints, k: int, before: np.ndarray, after: np.ndarray, rows=slice(None)) -> None:
    """Turn node k's frames (in some frames of the batch) by the shortest rotations taking `before` to `after`
    (where the passes carry its frame)."""
    if not joints.carried[k]:
        return
    q = joints.frames[rows, k]
    turn = quat_rows.arc(before, after, quat_rows.x_axis(q))
    joints.frames[rows, k] = quat_rows.normalized(quat_rows.mul(turn, q))


def _forward_reaching(tree: MovingTree, joints: Joints, targets: np.ndarray, asks: list) -> None:
    """Tips to root: each bone's pulled point goes to the weighted centroid of the asks, its head onto the line.

    As in `fabrik.forward_reaching`: a child hanging at an offset pulls at the
    point it hangs from, so the bone moves rigidly about that point.
    """
    heads, frames = joints.heads, joints.frames
    for k in reversed(range(len(tree.bones))):
        total, node_asks = asks[k]
        if total <= 0.0:
            continue  # nothing pulls this bone
        points = [targets[:, i] if kind == "goal" else heads[:, i] for kind, i, _ in node_asks]
        # One ask is taken as it is (w * p / w may be a rounding off p).
        wanted = points[0].copy() if len(points) == 1 else sum(w * p for (_, _, w), p in zip(node_asks, points)) / total
        pull = None  # weighted offsets of the pulled points from the tail
        for kind, c, w in node_asks:
            if kind == "child" and not tree.connected[c]:
                o = w * quat_rows.rotate(frames[:, k], joints.offsets[:, c])
                pull = o if pull is None else pull + o
        if pull is None:
            _move_tail(joints, k, tree.length[k], slice(None), wanted)
            continue
        # Where the offsets happen to cancel, the pull is at the tail after all.
        at_tail = ~pull.any(axis=1)
        plain, rigid = np.flatnonzero(at_tail), np.flatnonzero(~at_tail)
        if len(plain):
            _move_tail(joints, k, tree.length[k], plain, wanted[plain])
        _move_rigidly(joints, k, rigid, joints.tails[rigid, k] + pull[rigid] / total, wanted[rigid])


def _move_tail(joints: Joints, k: int, length: float, rows, wanted: np.ndarray) -> None:
    """FABRIK's move for bone k in some frames: the tail to `wanted`, the head onto the line, the frame turned."""
    head, tail = joints.heads[rows, k], joints.tails[rows, k]
    before = (tail - head) * (1.0 / length)
    head = quat_rows.reach(wanted, head, length, head - tail)
    joints.heads[rows, k], joints.tails[rows, k] = head, wanted
    _turn(joints, k, before, (wanted - head) * (1.0 / length), rows)


def _move_rigidly(joints: Joints, k: int, rows: np.ndarray, point: np.ndarray, wanted: np.ndarray) -> None:
    """FABRIK's move for bone k pulled at a point off its axis: that point to `wanted`, the head onto the line."""
    head, tail = joints.heads[rows, k], joints.tails[rows, k]
    lever = point - head
    arm = np.sqrt(np.einsum("ij,ij->i", lever, lever))
    short = arm < EPSILON
    arm = np.where(short, 1.0, arm)
    before = lever * (1.0 / arm)[:, None]
    new_head = quat_rows.reach(wanted, head, arm, -lever)
    after = (wanted - new_head) * (1.0 / arm)[:, None]
    turn = quat_rows.arc(before, after, matrix_rows.any_perpendicular(np.where(short[:, None], [0.0, 1.0, 0.0], before)))
    new_tail = new_head + quat_rows.rotate(turn, tail - head)
    frames = quat_rows.normalized(quat_rows.mul(turn, joints.frames[rows, k]))
    if short.any():
        # The pulled point is the head itself: the bone just shifts.
        shift = wanted[short] - point[short]
        new_head[short], new_tail[short] = head[short] + shift, tail[short] + shift
        frames[short] = joints.frames[rows[short], k]
    joints.heads[rows, k], joints.tails[rows, k], joints.frames[rows, k] = new_head, new_tail, frames


def _backward_reaching(tree: MovingTree, joints: Joints) -> None:
    """Root to tips: each base back to its fixed place, each head onto its parent (at its offset), the tail on the line."""
    heads, tails, frames = joints.heads, joints.tails, joints.frames
    for k in range(len(tree.bones)):
        p = tree.parent[k]
        old_tail = tails[:, k]
        old_bone = old_tail - heads[:, k]
        if p < 0:
            head = joints.base[:, k]
        elif tree.connected[k]:
            head = tails[:, p]
        else:
            head = tails[:, p] + quat_rows.rotate(frames[:, p], joints.offsets[:, k])
        length = tree.length[k]
        tail = quat_rows.reach(head, old_tail, length, old_bone)
        heads[:, k], tails[:, k] = head, tail
        _turn(joints, k, old_bone * (1.0 / length), (tail - head) * (1.0 / length))


def straight_at(
    heads: np.ndarray, tails: np.ndarray, chain: Sequence[int], target: np.ndarray, tolerance: float
) -> np.ndarray:
    """Per frame, whether a chain (tip first; heads and tails (F, m, 3)) lies straight with its target on its
    line and further than `tolerance` from its tip: FABRIK's degenerate case, where no pass can bend it (1e-5 of
    its length counts as on the line)."""
    top = chain[-1]
    base = heads[:, top]
    axis = tails[:, chain[0]] - base
    length = np.sqrt(np.einsum("ij,ij->i", axis, axis))
    straight = length >= EPSILON
    axis = axis * (1.0 / np.where(straight, length, 1.0))[:, None]
    for point in [tails[:, k] for k in chain] + [target]:
        d = point - base
        off = d - axis * np.einsum("ij,ij->i", d, axis)[:, None]
        straight &= np.sqrt(np.einsum("ij,ij->i", off, off)) <= 1e-5 * length
    miss = tails[:, chain[0]] - target
    return straight & (np.sqrt(np.einsum("ij,ij->i", miss, miss)) > tolerance)


def _bend_if_straight_at(
    tree: MovingTree, joints: Joints, chain: tuple[int, ...], target: np.ndarray, tolerance: float
) -> None:
    """Where a chain is straight with its target on its own line (off its tip), bend it about its first bone's X axis.

    As `fabrik._bend_if_straight_at`: the whole branch below the chain's first
    bone turns 0.2 rad about the joint it hangs from (the next bone's head).
    """
    if len(chain) < 2:
        return
    rows = np.flatnonzero(straight_at(joints.heads, joints.tails, chain, target, tolerance))
    if not len(rows):
        return
    top = chain[-1]
    hinge = joints.heads[rows, chain[-2]]
    half = 0.1  # half of the 0.2 rad bend
    axis = quat_rows.x_axis(joints.frames[rows, top])
    turn = np.column_stack((np.full(len(rows), np.cos(half)), axis * np.sin(half)))
    for k in tree.subtree(chain[-2]):
        joints.heads[rows, k] = hinge + quat_rows.rotate(turn, joints.heads[rows, k] - hinge)
        joints.tails[rows, k] = hinge + quat_rows.rotate(turn, joints.tails[rows, k] - hinge)
        joints.frames[rows, k] = quat_rows.normalized(quat_rows.mul(turn, joints.frames[rows, k]))
