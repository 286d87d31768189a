# SPDX-License-Identifier: GPL-3.0-or-later
"""Local rotations <-> where the moving bones are: forward kinematics as Blender composes it, and back.

A pose bone's rotation channel is its rotation relative to its rest and its
parent: pose = parent pose @ (parent rest^-1 @ rest) @ basis. The bridge reads
those channels, the solvers work on where the bones are (armature space), and
the solved rotations go back as channels. Here that is done for the nodes of a
moving tree only, from the frames of the fixed bones they hang from: on plain
floats for one frame (`start_of`, `rotations_from_zero`), and on numpy rows for
many frames at once (`start_rows`, `rotation_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..math import quat, quat_rows
from ..math.quat import Quat
from ..math.vec import Vec, add
from ..model.limits import JointLimit, limited_angles
from ..model.skeleton import Pose, Skeleton
from ..model.tree import MovingTree, Start

__all__ = [
    "LocalTree", "local_tree", "rotation_rows", "rotation_rows_from_zero", "rotations_from_zero", "start_of",
    "start_rows", "with_start_twist",
]


@dataclass(frozen=True)
class LocalTree:
    """What forward kinematics of a moving tree needs from the skeleton, per node (kept with the tree)."""

    tree: MovingTree
    #: Per node, its rest frame in its parent's rest frame (its rest frame for a root bone).
    rest: tuple[Quat, ...]
    #: Per node, its rest head from its parent's head in the parent's rest frame (armature space for a root).
    head: tuple[Vec, ...]
    #: Per node, its parent bone (-1 for a root): for a base node, the fixed bone it hangs from.
    parent_bone: tuple[int, ...]
    #: Whether every node hangs straight from its moving parent (or is a base node): forward kinematics of the
    #: nodes alone places them. Where a fixed bone lies between two moving ones, its pose is needed too.
    placed: bool


def local_tree(skeleton: Skeleton, tree: MovingTree) -> LocalTree:
    """The forward-kinematics data of a moving tree's nodes (kept with the tree)."""
    found = tree.kept.local
    if found is None:
        parent_bone = tuple(skeleton.parents[b] for b in tree.bones)
        found = tree.kept.local = LocalTree(
            tree,
            tuple(skeleton.rest_relative[b] for b in tree.bones),
            tuple(tuple(skeleton.head_in_parent[b].tolist()) for b in tree.bones),
            parent_bone,
            all(p < 0 or parent_bone[k] == tree.bones[p] for k, p in enumerate(tree.parent)),
        )
    return found


def start_of(
    local: LocalTree,
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
    pose: Pose | Callable[[], Pose],
) -> Start:
    """The tree's start by forward kinematics from its nodes' local rotations and location channels and the fixed
    bones' frames they hang from (`fixed`); `pose` makes the whole start pose where a method asks. For a tree
    forward kinematics places (`LocalTree.placed`)."""
    rotations, translations, fixed = list(rotations), list(translations), list(fixed)

    def place() -> tuple[list[Quat], list[Vec], list[Vec], list[Quat]]:
        frames, heads, tails = _forward(local, rotations, translations, fixed)
        zero = []
        for k, p in enumerate(local.tree.parent):
            link = local.rest[k]
            if p < 0 and fixed[k] is not None:
                link = quat.mul(fixed[k][0], link)
            zero.append(quat.normalized(link))
        return frames, heads, tails, zero

    return Start(None, None, None, None, pose, rotations, fixed, translations, place)


def _forward(
    local: LocalTree,
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
) -> tuple[list[Quat], list[Vec], list[Vec]]:
    """Forward kinematics of the moving nodes from their local rotations and location channels and the fixed bones
    they hang from (`fixed`), as Blender composes them: their frames, heads and tails (`start_of`)."""
    # (quaternion products written out: on every live frame this runs once per moving bone, and the calls of
    # quat.mul, rotate and y_axis cost more than their arithmetic)
    tree = local.tree
    frames: list[Quat] = []
    heads: list[Vec] = []
    tails: list[Vec] = []
    for k, p in enumerate(tree.parent):
        rest = local.rest[k]
        offset = local.head[k]
        t = translations[k]
        if t is not None:
            offset = add(offset, quat.rotate(rest, t))
        aw, ax, ay, az = rest
        bw, bx, by, bz = rotations[k]
        # relative = rest * rotation
        w = aw * bw - ax * bx - ay * by - az * bz
        x = aw * bx + ax * bw + ay * bz - az * by
        y = aw * by - ax * bz + ay * bw + az * bx
        z = aw * bz + ax * by - ay * bx + az * bw
        if p >= 0:
            parent_frame, parent_head = frames[p], heads[p]
        else:
            parent = fixed[k]
            parent_frame, parent_head = parent if parent is not None else (None, None)
        if parent_frame is None:
            head = offset
        else:
            # frame = parent frame * relative
            aw, ax, ay, az = parent_frame
            w, x, y, z = (
                aw * w - ax * x - ay * y - az * z,
                aw * x + ax * w + ay * z - az * y,
                aw * y - ax * z + ay * w + az * x,
                aw * z + ax * y - ay * x + az * w,
            )
            # head = parent head + the offset turned by the parent frame (quat.rotate)
            vx, vy, vz = offset
            tx, ty, tz = 2.0 * (ay * vz - az * vy), 2.0 * (az * vx - ax * vz), 2.0 * (ax * vy - ay * vx)
            head = (
                parent_head[0] + (vx + aw * tx + ay * tz - az * ty),
                parent_head[1] + (vy + aw * ty + az * tx - ax * tz),
                parent_head[2] + (vz + aw * tz + ax * ty - ay * tx),
            )
        n = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / n, x / n, y / n, z / n
        frames.append((w, x, y, z))
        heads.append(head)
        length = tree.length[k]
        # tail = head + the frame's Y axis (quat.y_axis) times the bone's length
        tails.append((
            head[0] + 2.0 * (x * y - w * z) * length,
            head[1] + (1.0 - 2.0 * (x * x + z * z)) * length,
            head[2] + 2.0 * (y * z + w * x) * length,
        ))
    return frames, heads, tails


def rotations_from_zero(tree: MovingTree, zero: Sequence[Quat], frames: Sequence[Quat]) -> list[Quat]:
    """Each node's turn from the frame it has with no rotation of its own to its frame (armature space), normalized:
    with `zero` a start's (`Start.zero`), and that start made by forward kinematics (`start_of`), the local
    rotation its channel holds."""
    # (the products written out, as in `_forward`: once per moving bone every frame)
    out: list[Quat] = []
    for k, p in enumerate(tree.parent):
        aw, ax, ay, az = zero[k]
        if p >= 0:
            # zero frame = parent frame * zero (quat.mul)
            pw, px, py, pz = frames[p]
            aw, ax, ay, az = (
                pw * aw - px * ax - py * ay - pz * az,
                pw * ax + px * aw + py * az - pz * ay,
                pw * ay - px * az + py * aw + pz * ax,
                pw * az + px * ay - py * ax + pz * aw,
            )
        # conj(zero frame) * frame, normalized
        ax, ay, az = -ax, -ay, -az
        fw, fx, fy, fz = frames[k]
        w = aw * fw - ax * fx - ay * fy - az * fz
        x = aw * fx + ax * fw + ay * fz - az * fy
        y = aw * fy - ax * fz + ay * fw + az * fx
        z = aw * fz + ax * fy - ay * fx + az * fw
        n = math.sqrt(w * w + x * x + y * y + z * z)
        out.append((w / n, x / n, y / n, z / n))
    return out


def rotation_rows_from_zero(tree: MovingTree, zero: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """`rotations_from_zero` for F frames at once: zero links and frames (F, m, 4) in, local rotations (F, m, 4)
    out."""
    count, m = frames.shape[:2]
    parent = np.asarray(tree.parent)
    links = zero.reshape(-1, 4).T
    above = frames[:, np.maximum(parent, 0)].reshape(-1, 4).T
    unmoved = quat_rows.mul(above, links)
    zero_frames = np.where(np.tile(parent >= 0, count), unmoved, links)
    turns = quat_rows.mul(quat_rows.conj(zero_frames), frames.reshape(-1, 4).T)
    return quat_rows.normalized(turns).T.reshape(count, m, 4)


def start_rows(
    skeleton: Skeleton, tree: MovingTree, rotations: np.ndarray, translations: np.ndarray, fixed: dict[int, tuple]
) -> tuple[np.ndarray, np.ndarray]:
    """`start_of` for F frames at once: the nodes' heads and frames from their local rotations, location channels
    and the fixed bones' heads and frames (`fixed`), for trees forward kinematics places (`LocalTree.placed`)."""
    count, m = rotations.shape[:2]
    frames = np.empty((count, m, 3, 3))
    heads = np.empty((count, m, 3))
    for k, (b, p) in enumerate(zip(tree.bones, tree.parent)):
        relative = skeleton.rest_in_parent[b]
        offset = skeleton.head_in_parent[b] + translations[:, k] @ relative.T
        if p >= 0:
            frame_p, head_p = frames[:, p], heads[:, p]
        elif skeleton.parents[b] >= 0:
            head_p, frame_p = fixed[skeleton.parents[b]]
        else:
            frames[:, k] = relative @ rotations[:, k]
            heads[:, k] = offset
            continue
        frames[:, k] = frame_p @ (relative @ rotations[:, k])
        heads[:, k] = head_p + np.einsum("fij,fj->fi", frame_p, offset)
    return heads, frames


def rotation_rows(
    skeleton: Skeleton, tree: MovingTree, frames: np.ndarray, fixed: dict[int, np.ndarray],
    nodes: Sequence[int] | None = None,
) -> np.ndarray:
    """`rotations_from_zero` for F frames at once: each node's local rotation (F, m, 3, 3) from the nodes' frames
    and those of the fixed bones they hang from (`fixed`); with `nodes`, those nodes' only."""
    picked = frames if nodes is None else frames[:, list(nodes)]
    nodes = range(len(tree.bones)) if nodes is None else nodes
    parent_of = np.empty((len(frames), len(nodes), 3, 3))
    rest = np.empty((len(nodes), 3, 3))
    inner, inner_parents = [], []
    for j, k in enumerate(nodes):
        b, p = tree.bones[k], tree.parent[k]
        q = skeleton.parents[b]
        if q < 0:
            parent_of[:, j], rest[j] = np.eye(3), skeleton.rest_frames[b].T
            continue
        rest[j] = skeleton.rest_frames[b].T @ skeleton.rest_frames[q]
        if p >= 0:
            inner.append(j)
            inner_parents.append(p)
        else:
            parent_of[:, j] = fixed[q]
    parent_of[:, inner] = frames[:, inner_parents]
    return rest[None] @ (np.swapaxes(parent_of, 2, 3) @ picked)


def with_start_twist(limit: JointLimit, solved: Quat, start: Quat) -> Quat:
    """A limited leaf's solved local rotation with the twist it started with (a leaf's twist moves no position
    goal), as `settle.start_twists` reads it: both read into the limit's coordinates."""
    sx, sz, _ = limited_angles(limit, quat.IDENTITY, solved)
    return quat.from_swing_twist(sx, sz, limited_angles(limit, quat.IDENTITY, start)[2])
