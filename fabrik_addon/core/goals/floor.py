# SPDX-License-Identifier: GPL-3.0-or-later
"""A floor: a plane that no tip and no joint of the moving bones goes below.

A target below the floor is lifted onto it before anything solves, so a
tip never reaches under it (a foot pinned there stays on it). Joints are
held above it by the plan's last step for a part (`plan`): where the
method's pose leaves a joint below, the refinement (`refine`) goes on from
that pose with each joint under the floor as one more error to remove --
its depth, which the turn of every joint above it changes -- until no joint
is deeper than the tolerance. The bones' heads at the base of a part hang
from bones that do not move, so they are where the animator put them; a
joint no pose lifts above the floor from there (`liftable`) is left out.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple, Sequence

import numpy as np

from ..math.quat import Quat
from ..math.vec import Vec
from ..model.problem import Goal
from ..model.tree import MovingTree, tails_of

__all__ = [
    "Floor", "deepest", "deepest_rows", "height", "joints", "liftable", "lifted", "lifted_rows", "planes_rows",
]


class Floor(NamedTuple):
    """A plane in armature space: a point on it and its unit normal, pointing up out of it."""

    point: Vec
    normal: Vec


def height(floor: Floor, p: Vec) -> float:
    """How far above the floor a point is (below it: negative)."""
    q, n = floor.point, floor.normal
    return (p[0] - q[0]) * n[0] + (p[1] - q[1]) * n[1] + (p[2] - q[2]) * n[2]


def lifted(floor: Floor, goals: Sequence[Goal]) -> list[Goal]:
    """The goals with every target below the floor lifted straight up onto it."""
    out = []
    for goal in goals:
        h = height(floor, goal.target)
        if h < 0.0:
            t, n = goal.target, floor.normal
            goal = replace(goal, target=(t[0] - h * n[0], t[1] - h * n[1], t[2] - h * n[2]))
        out.append(goal)
    return out


def joints(tree: MovingTree) -> list[tuple[int, bool]]:
    """The joints the floor holds up, as (node, True) for a node's tail and (node, False) for the head of a node
    that hangs off its moving parent at an offset; parents first."""
    out = []
    for k, p in enumerate(tree.parent):
        if p >= 0 and not tree.connected[k]:
            out.append((k, False))
        out.append((k, True))
    return out


def liftable(floor: Floor, tree: MovingTree, heads: Sequence[Vec], tails: Sequence[Vec]) -> list[tuple[int, bool]]:
    """The joints that some pose lifts above the floor: those as far from their part's fixed base as the bones
    reach, straight up, are above it; the others are under it by the rig's build and stay where the goals put them."""
    out, reach = [], {}
    for k, tail in joints(tree):
        p = tree.parent[k]
        if p < 0:
            base = height(floor, heads[k])
            to_head = 0.0
        else:
            base, above = reach[p]
            to_head = above + math.dist(heads[k], tails[p])
        reach[k] = (base, to_head + tree.length[k])
        if base + (reach[k][1] if tail else to_head) >= -1e-9:  # (straight up, it reaches the floor)
            out.append((k, tail))
    return out


def deepest(
    floor: Floor, tree: MovingTree, frames: Sequence[Quat], heads: Sequence[Vec], held: Sequence[tuple[int, bool]]
) -> float:
    """How far the deepest of the `held` joints lies below the floor, posed by the nodes' frames and heads; 0
    where none does."""
    tails = tails_of(frames, heads, tree.length)
    depth = 0.0
    for k, tail in held:
        depth = max(depth, -height(floor, tails[k] if tail else heads[k]))
    return depth


def planes_rows(floors: Sequence[Floor | None]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per frame, a floor's point and normal ((F, 3) each; a frame without one gets a plane nothing is under), or
    None where no frame has a floor."""
    if all(f is None for f in floors):
        return None
    points = np.array([f.point if f is not None else (0.0, 0.0, -np.inf) for f in floors], dtype=float)
    normals = np.array([f.normal if f is not None else (0.0, 0.0, 1.0) for f in floors], dtype=float)
    points[~np.isfinite(points)] = -1e300  # (a plane far below everything)
    return points, normals


def lifted_rows(planes: tuple[np.ndarray, np.ndarray], targets: np.ndarray) -> np.ndarray:
    """`lifted` on rows: each frame's targets (F, G, 3) onto its plane (`planes_rows`)."""
    points, normals = planes
    below = np.minimum(((targets - points[:, None, :]) * normals[:, None, :]).sum(axis=-1), 0.0)
    return targets - below[..., None] * normals[:, None, :]


def deepest_rows(planes: tuple[np.ndarray, np.ndarray], tree: MovingTree, frames: np.ndarray, heads: np.ndarray
                 ) -> np.ndarray:
    """`deepest` per frame over every joint (`joints`), for F frames of the nodes' frames (F, m, 3, 3; columns
    are the axes) and heads (F, m, 3), each frame against its plane (`planes_rows`)."""
    points, normals = planes
    tails = heads + np.asarray(tree.length)[None, :, None] * frames[..., :, 1]
    joint = np.stack([tails[:, k] if tail else heads[:, k] for k, tail in joints(tree)], axis=1)
    depth = -((joint - points[:, None, :]) * normals[:, None, :]).sum(axis=-1)
    return np.maximum(depth.max(axis=1), 0.0)
