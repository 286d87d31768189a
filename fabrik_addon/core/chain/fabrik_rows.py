# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK on numpy rows: many frames of one tree solved at once, each by the steps and stopping rules of
`fabrik.solve_from`.

A bake solves every frame of a range from that frame's own start; the frames
do not depend on each other, so each step can move one joint in all frames at
once. This is the numpy twin of `fabrik`'s passes, for trees pulled by
position goals without limits: connected trees (positions are all the passes
need) and trees with unconnected bones (the frames that children hang from
at an offset are carried, as quaternions). The joints are node-major arrays,
(m, 3, F) and (m, 4, F): one joint's x, y or z over all frames is one
contiguous row, which keeps numpy's cost per call low on these small arrays.
Each frame stops by the same rules as one solved alone (`stopping`), so the
two agree to rounding; what FABRIK leaves short where another method
finishes, the plan finishes frame by frame (`many_frames.solve_rows`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..goals.pole import STRAIGHT
from ..math import matrix_rows, quat_rows
from ..math.vec import EPSILON
from ..model.problem import Goal, SolveSettings
from ..model.stopping import StoppingRows
from ..model.tree import MovingTree, pulls
from . import bend
from .starts import is_two_bone_chain, pulled_at_tip, spreads

__all__ = ["JointRows", "solve"]

_ROWS_AT_ONCE = 4096  # (frames x nodes turned together at the end of a solve)


class JointRows:
    """The working state of many frames: heads and tails (m, 3, F) and, where the tree carries them, frames
    (m, 4, F) and each unconnected node's offset from its parent's tail in the parent's frame (3, F)."""

    __slots__ = ("heads", "tails", "frames", "offsets", "base", "carried")

    def __init__(self, heads, tails, frames, offsets, base, carried) -> None:
        self.heads, self.tails, self.frames, self.offsets, self.base, self.carried = (
            heads, tails, frames, offsets, base, carried
        )

    @classmethod
    def start(cls, tree: MovingTree, heads: np.ndarray, frames: np.ndarray) -> "JointRows":
        """The state at the start poses: heads (F, m, 3) and frames (F, m, 3, 3)."""
        count, m = heads.shape[:2]
        length = np.asarray(tree.length)[:, None, None]
        h = np.ascontiguousarray(heads.transpose(1, 2, 0))
        # (an operand laid out frame-major would give the sum its layout: every step after would stride)
        t = h + length * np.ascontiguousarray(frames[:, :, :, 1].transpose(1, 2, 0))
        q = offsets = carried = None
        if tree.needs_frames:
            q = matrix_rows.quaternions_from_matrices(frames.reshape(-1, 3, 3)).reshape(count, m, 4)
            q = np.ascontiguousarray(q.transpose(1, 2, 0))
            offsets = [
                quat_rows.rotate(quat_rows.conj(q[p]), h[k] - t[p]) if p >= 0 and not tree.connected[k] else None
                for k, p in enumerate(tree.parent)
            ]
            carried = tree.carried_frames(False)
        return cls(h, t, q, offsets, h.copy(), carried)

    def take(self, columns: np.ndarray) -> "JointRows":
        """The state of some frames (a copy)."""
        offsets = None if self.offsets is None else [None if o is None else _columns(o, columns) for o in self.offsets]
        return JointRows(
            _columns(self.heads, columns), _columns(self.tails, columns),
            None if self.frames is None else _columns(self.frames, columns), offsets, _columns(self.base, columns),
            self.carried,
        )

    def put(self, columns, other: "JointRows", rows=slice(None)) -> None:
        """Write the moving parts of another state (its `rows` frames) back into some frames."""
        self.heads[:, :, columns], self.tails[:, :, columns] = other.heads[:, :, rows], other.tails[:, :, rows]
        if self.frames is not None:
            self.frames[:, :, columns] = other.frames[:, :, rows]


def solve(
    tree: MovingTree,
    goals: Sequence[Goal],
    targets: np.ndarray,
    heads: np.ndarray,
    frames: np.ndarray,
    settings: SolveSettings,
    window: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`fabrik.solve_from` for F frames: targets (F, G, 3), start heads and frames in; the solved heads and frames,
    the iterations (F,), the errors (F, G) and which frames converged out (trees with offsets descended carefully,
    as one frame alone is)."""
    count = len(targets)
    length = np.asarray(tree.length)
    node_of_goal = list(tree.tips)
    aims = np.ascontiguousarray(np.asarray(targets, dtype=float).transpose(1, 2, 0))  # (G, 3, F)
    joints = JointRows.start(tree, heads, frames)
    for g, chain in enumerate(tree.goal_chain):
        _bend_if_straight_at(tree, joints, chain, aims[g], settings.tolerance)
    errors = _errors(joints, aims, node_of_goal)
    done = np.zeros(count, dtype=bool)
    kept = spread = done
    if joints.frames is None:
        done = errors.max(axis=1) <= settings.tolerance
        kept = done.copy()  # reached as they start: kept as they are
        if pulled_at_tip(tree, goals):
            # The paper's reach test: a target out of reach stretches the chain straight at it.
            far = ~done & (np.sqrt(((aims[0] - joints.base[0]) ** 2).sum(axis=0)) >= length.sum())
            if far.any():
                _stretch_towards(joints, length, np.flatnonzero(far), aims[0][:, far])
                errors[far] = _errors(joints, aims, node_of_goal)[far]
                done |= far
        if is_two_bone_chain(tree, goals):
            _settle_two_bones(joints, aims[0], length, ~done)
            errors = _errors(joints, aims, node_of_goal)
        elif spreads(tree, goals, settings):
            # (`starts.spread_evenly`: the frames whose chain it brings onto the target take that one step)
            if (spread := bend.spread_rows(joints.heads, joints.tails, length, aims[0], ~done)).any():
                errors = _errors(joints, aims, node_of_goal)
                spread &= errors.max(axis=1) <= settings.tolerance
                done |= spread
    pulling = [g for g, goal in enumerate(goals) if goal.weight > 0.0]
    stopping = StoppingRows(settings, errors.sum(axis=1), errors[:, pulling].sum(axis=1), done, window)
    stopping.iterations[spread] = 1
    stopping.converged |= spread
    asks = pulls(tree, [float(g.weight) for g in goals])
    careful = joints.frames is not None
    best, best_errors = joints.take(np.arange(count)), errors.copy()
    reach = np.ones(count)
    while len(active := stopping.next()):
        everyone = len(active) == count
        now = joints if everyone else joints.take(active)
        wanted = aimed = aims if everyone else _columns(aims, active)
        part = reach[active] < 1.0
        if careful and part.any():
            tips = now.tails[node_of_goal]
            wanted = np.where(part, tips + reach[active] * (wanted - tips), wanted)
        _forward_reaching(tree, now, wanted, asks)
        _backward_reaching(tree, now)
        if not everyone:
            joints.put(active, now)
        e = _errors(now, aimed, node_of_goal)
        taken, retry = stopping.judge(
            active, e.sum(axis=1), e.max(axis=1) <= settings.tolerance, e[:, pulling].sum(axis=1)
        )
        rows = np.searchsorted(active, taken)
        if len(taken) == count:
            best.put(slice(None), now)
        else:
            best.put(taken, now, rows)
        best_errors[taken] = e[rows]
        reach[taken] = np.minimum(1.0, 2.0 * reach[taken])
        if careful and len(retry):
            joints.put(retry, best.take(retry))
            reach[retry] *= 0.5
    solved_frames = _frames(tree, best, frames)
    solved_frames[kept] = frames[kept]
    return best.heads.transpose(2, 0, 1), solved_frames, stopping.iterations, best_errors, stopping.converged


def _columns(rows: np.ndarray, columns) -> np.ndarray:
    """Some frames of rows whose last axis is the frame: a view for a slice, else a C-contiguous copy (indexing the
    last axis with an array gives a strided one, which every step after would pay for)."""
    return rows[..., columns] if isinstance(columns, slice) else np.take(rows, columns, axis=-1)


def _errors(joints: JointRows, aims: np.ndarray, node_of_goal: list[int]) -> np.ndarray:
    """Each frame's distance from each goal's tip to its target, (F, G)."""
    d = joints.tails[node_of_goal] - aims
    return np.sqrt((d * d).sum(axis=1)).T


def _frames(tree: MovingTree, joints: JointRows, start: np.ndarray) -> np.ndarray:
    """The solved frames (F, m, 3, 3): the carried ones as carried, every other its frame turned the shortest way
    onto its bone's direction (as `tree.Joints.final_frames`). A few nodes at a time, so that the temporaries stay
    small (a bake's peak memory is this step's)."""
    count, m = start.shape[:2]
    out = np.empty_like(start)
    carried = joints.carried or (False,) * m
    length = np.asarray(tree.length)
    step = max(1, _ROWS_AT_ONCE // count)
    for first in range(0, m, step):
        last = min(m, first + step)
        if joints.frames is None:
            own = start[:, first:last]
        else:
            own = matrix_rows.quaternion_to_matrix(joints.frames[first:last].transpose(2, 0, 1))
        swung = [k for k in range(first, last) if not carried[k]]
        if swung:
            directions = (joints.tails[swung] - joints.heads[swung]) / length[swung, None, None]
            turned = matrix_rows.swung_frames(
                own[:, [k - first for k in swung]].reshape(-1, 3, 3), directions.transpose(2, 0, 1).reshape(-1, 3)
            )
            out[:, swung] = turned.reshape(count, len(swung), 3, 3)
        for k in range(first, last):
            if carried[k]:
                out[:, k] = matrix_rows.orthonormalized(own[:, k - first])
    return out


def _turn(joints: JointRows, k: int, before: np.ndarray, after: np.ndarray, columns=slice(None)) -> None:
    """Turn node k's frames (in some frames) by the shortest rotations taking `before` to `after`, where the
    passes carry its frame."""
    if joints.carried is None or not joints.carried[k]:
        return
    q = _columns(joints.frames[k], columns)
    turn = quat_rows.arc(before, after, quat_rows.x_axis(q))
    joints.frames[k][:, columns] = quat_rows.normalized(quat_rows.mul(turn, q))


def _forward_reaching(tree: MovingTree, joints: JointRows, aims: np.ndarray, asks: list) -> None:
    """Tips to root (`fabrik.forward_reaching`): each bone's pulled point goes to the weighted centroid of the
    asks, its head onto the line; a child hanging at an offset pulls at the point it hangs from, so the bone
    moves rigidly about that point."""
    heads, offsets = joints.heads, joints.offsets
    for k in reversed(range(len(tree.bones))):
        total, node_asks = asks[k]
        if total <= 0.0:
            continue  # nothing pulls this bone
        points = [aims[i] if kind == "goal" else heads[i] for kind, i, _ in node_asks]
        # One ask is taken as it is (w * p / w may be a rounding off p); the moves below copy it.
        wanted = points[0] if len(points) == 1 else sum(w * p for (_, _, w), p in zip(node_asks, points)) / total
        pull = None  # weighted offsets of the pulled points from the tail
        if offsets is not None:
            for kind, c, w in node_asks:
                if kind == "child" and offsets[c] is not None:
                    o = w * quat_rows.rotate(joints.frames[k], offsets[c])
                    pull = o if pull is None else pull + o
        if pull is None:
            _move_tail(joints, k, tree.length[k], slice(None), wanted)
            continue
        # Where the offsets happen to cancel, the pull is at the tail after all.
        at_tail = ~pull.any(axis=0)
        plain, rigid = np.flatnonzero(at_tail), np.flatnonzero(~at_tail)
        if len(plain):
            _move_tail(joints, k, tree.length[k], plain, _columns(wanted, plain))
        if len(rigid):
            point = _columns(joints.tails[k], rigid) + _columns(pull, rigid) / total
            _move_rigidly(joints, k, rigid, point, _columns(wanted, rigid))


def _move_tail(joints: JointRows, k: int, length: float, columns, wanted: np.ndarray) -> None:
    """FABRIK's move for bone k in some frames: the tail to `wanted`, the head onto the line, the frame turned."""
    if joints.carried is None or not joints.carried[k]:
        if isinstance(columns, slice):  # every frame: in place
            head, tail = joints.heads[k], joints.tails[k]
            quat_rows.reach(wanted, head, length, lambda: head - tail, out=head)
            tail[...] = wanted
            return
    head, tail = _columns(joints.heads[k], columns), _columns(joints.tails[k], columns)
    before = (tail - head) * (1.0 / length)
    head = quat_rows.reach(wanted, head, length, lambda: head - tail)
    joints.heads[k][:, columns], joints.tails[k][:, columns] = head, wanted
    _turn(joints, k, before, (wanted - head) * (1.0 / length), columns)


def _move_rigidly(joints: JointRows, k: int, columns: np.ndarray, point: np.ndarray, wanted: np.ndarray) -> None:
    """FABRIK's move for bone k pulled at a point off its axis: that point to `wanted`, the head onto the line."""
    head, tail, turned = (_columns(a[k], columns) for a in (joints.heads, joints.tails, joints.frames))
    lever = point - head
    arm = np.sqrt((lever * lever).sum(axis=0))
    short = arm < EPSILON
    arm = np.where(short, 1.0, arm)
    before = lever * (1.0 / arm)
    new_head = quat_rows.reach(wanted, head, arm, lambda: -lever)
    after = (wanted - new_head) * (1.0 / arm)
    across = matrix_rows.any_perpendicular(np.where(short, np.array([[0.0], [1.0], [0.0]]), before).T).T
    turn = quat_rows.arc(before, after, across)
    new_tail = new_head + quat_rows.rotate(turn, tail - head)
    frames = quat_rows.normalized(quat_rows.mul(turn, turned))
    if short.any():
        # The pulled point is the head itself: the bone just shifts.
        shift = wanted[:, short] - point[:, short]
        new_head[:, short], new_tail[:, short] = head[:, short] + shift, tail[:, short] + shift
        frames[:, short] = turned[:, short]
    joints.heads[k][:, columns], joints.tails[k][:, columns], joints.frames[k][:, columns] = new_head, new_tail, frames


def _backward_reaching(tree: MovingTree, joints: JointRows) -> None:
    """Root to tips (`fabrik.backward_reaching`): each base back to its fixed place, each head onto its parent
    (at its offset), the tail on the line."""
    heads, tails, offsets, carried = joints.heads, joints.tails, joints.offsets, joints.carried
    for k, p in enumerate(tree.parent):
        tail = tails[k]
        old_bone = tail - heads[k]
        if p < 0:
            heads[k] = joints.base[k]
        elif offsets is None or offsets[k] is None:
            heads[k] = tails[p]
        else:
            heads[k] = tails[p] + quat_rows.rotate(joints.frames[p], offsets[k])
        length = tree.length[k]
        quat_rows.reach(heads[k], tail, length, lambda: old_bone, out=tail)
        if carried is not None and carried[k]:
            _turn(joints, k, old_bone * (1.0 / length), (tail - heads[k]) * (1.0 / length))


def _stretch_towards(joints: JointRows, length: np.ndarray, columns: np.ndarray, target: np.ndarray) -> None:
    """Lay a single connected chain straight from its base towards targets out of reach, in some frames
    (`fabrik.stretch_towards`)."""
    base = joints.base[0][:, columns]
    away = target - base
    direction = away / np.sqrt((away * away).sum(axis=0))
    along = np.concatenate(([0.0], np.cumsum(length)))
    for k in range(len(length)):
        joints.heads[k][:, columns] = base + along[k] * direction
        joints.tails[k][:, columns] = base + along[k + 1] * direction


def _settle_two_bones(joints: JointRows, target: np.ndarray, length: np.ndarray, chosen: np.ndarray) -> None:
    """`starts.settle_two_bones` for the chosen frames at once: where it has a triangle, the middle joint goes
    onto it and the tip onto the target."""
    l1, l2 = float(length[0]), float(length[1])
    base, middle = joints.heads[0], joints.tails[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.sqrt(((target - base) ** 2).sum(axis=0))
        u = (target - base) * (1.0 / d)
        arm = middle - base
        side = arm - u * (arm * u).sum(axis=0)
        width = np.sqrt((side * side).sum(axis=0))
        cosine = (l1 * l1 + d * d - l2 * l2) / (2.0 * l1 * d)
        sine = np.sqrt(np.maximum(0.0, 1.0 - cosine * cosine))
        placed = base + (u * (l1 * cosine) + side * (l1 * sine / width))
    chosen = chosen & (abs(l1 - l2) < d) & (d < l1 + l2) & (width > STRAIGHT * (l1 + l2))
    joints.tails[0][:, chosen] = joints.heads[1][:, chosen] = placed[:, chosen]
    joints.tails[1][:, chosen] = target[:, chosen]


def straight_at(joints: JointRows, chain: Sequence[int], target: np.ndarray, tolerance: float) -> np.ndarray:
    """Per frame, whether a chain (tip first) lies straight (two bones: but for their tip) with its target (3, F)
    on its line and further than `tolerance` from its tip: FABRIK's degenerate case, where no pass can bend it
    (1e-5 of its length counts as on the line)."""
    heads, tails = joints.heads, joints.tails
    top = chain[-1]
    base = heads[top]
    two = len(chain) == 2  # (two bones: the line through the middle joint, as `starts.bend_if_straight_at`)
    axis = tails[chain[1] if two else chain[0]] - base
    length = np.sqrt((axis * axis).sum(axis=0))
    straight = length >= EPSILON
    axis = axis * (1.0 / np.where(straight, length, 1.0))
    for point in ([heads[chain[0]]] if two else [tails[k] for k in chain]) + [target]:
        d = point - base
        off = d - axis * (d * axis).sum(axis=0)
        straight &= np.sqrt((off * off).sum(axis=0)) <= 1e-5 * length
    miss = tails[chain[0]] - target
    return straight & (np.sqrt((miss * miss).sum(axis=0)) > tolerance)


def _bend_if_straight_at(
    tree: MovingTree, joints: JointRows, chain: tuple[int, ...], target: np.ndarray, tolerance: float
) -> None:
    """Where a chain is straight with its target on its own line (off its tip), bend it as
    `starts.bend_if_straight_at` does: the branch below its first bone turns 0.2 rad about the joint it hangs from."""
    if len(chain) < 2:
        return
    columns = np.flatnonzero(straight_at(joints, chain, target, tolerance))
    if not len(columns):
        return
    top = chain[-1]
    two = len(chain) == 2
    pivot = top if two else chain[-2]  # (two bones turn about the base, as alone)
    hinge = joints.heads[pivot][:, columns]
    if joints.frames is not None:
        axis = quat_rows.x_axis(joints.frames[top][:, columns])
    else:
        base = joints.heads[top][:, columns]
        line = joints.tails[chain[1] if two else chain[0]][:, columns] - base
        length = np.sqrt((line * line).sum(axis=0))
        line = line / length
        axis = matrix_rows.any_perpendicular(line.T).T
        if two:  # (towards the side the tip bends to, where it does)
            d = joints.tails[chain[0]][:, columns] - base
            side = np.cross(line.T, (d - line * (d * line).sum(axis=0)).T).T
            size = np.sqrt((side * side).sum(axis=0))
            bent = size > 1e-9 * length
            axis[:, bent] = side[:, bent] / size[bent]
    half = 0.1  # half of the 0.2 rad bend
    turn = np.concatenate((np.full((1, len(columns)), np.cos(half)), axis * np.sin(half)))
    for k in tree.subtree(pivot):
        joints.heads[k][:, columns] = hinge + quat_rows.rotate(turn, joints.heads[k][:, columns] - hinge)
        joints.tails[k][:, columns] = hinge + quat_rows.rotate(turn, joints.tails[k][:, columns] - hinge)
        if joints.frames is not None:
            joints.frames[k][:, columns] = quat_rows.normalized(quat_rows.mul(turn, joints.frames[k][:, columns]))
