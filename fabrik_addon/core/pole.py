# SPDX-License-Identifier: GPL-3.0-or-later
"""Pole targets as Blender's IK constraint has them (its Standard solver, `intern/iksolver`).

Blender does not steer a chain towards its pole while solving. Before it
solves, it turns the whole chain once, as one body about the head of the
chain's first bone, and then solves from there; a chain bent in a plane
stays in the plane it was turned into while it reaches, so that plane is
where the knee ends up. The turn takes one frame onto another, each made of
a direction and an "up" vector made perpendicular to that direction:

- the chain's own frame, in the pose it starts from: the direction from the
  first bone's head to the last bone's tail, and the up vector
  ``X cos(pole_angle) + Z sin(pole_angle)`` of the first bone's own X and Z
  axes (its armature-space frame in that pose, rest rotation, parents and
  pose channels included);
- the wanted frame: the direction from that head to the target, and the
  direction from that head to the pole.

So the turn points the chain at the target and its up vector, seen along
the chain, at the pole. The knee ends at the pole only when the up vector
points the knee's way: with pole_angle 0 it is the first bone's X axis that
faces the pole, so a chain that bends about X (the usual hinge: the lower
bone turned by a positive angle about X puts the knee on the first bone's
-Z side) needs -90 degrees, as Blender users know.

A straight chain gives Blender's solver nothing to bend: it stays straight,
pointing at the target. The FABRIK and two-bone solvers bend it towards its
turned up vector, so that its knee faces the pole: where Blender puts the
knee of the same chain bent a hair that way, which is how a pole angle is
chosen for a rig (the up vector on the knee's side), whichever way its
knees bend.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["STRAIGHT", "bend_normal", "blender_turn", "up_vector"]

#: Joints closer than this fraction of the chain's reach to its line count as on it (single-precision poses).
STRAIGHT = 1e-5


def up_vector(frame: np.ndarray, pole_angle: float) -> np.ndarray:
    """The first bone's up vector, X cos(pole_angle) + Z sin(pole_angle) of its frame (columns X, Y, Z)."""
    return frame[:, 0] * math.cos(pole_angle) + frame[:, 2] * math.sin(pole_angle)


def _frame(direction: np.ndarray, up: np.ndarray) -> np.ndarray | None:
    """Columns: the unit direction, `up` made perpendicular to it, and their cross product; None if undefined."""
    size = float(np.linalg.norm(direction))
    if size < 1e-12:
        return None
    direction = direction / size
    across = up - direction * float(direction @ up)
    width = float(np.linalg.norm(across))
    if width < 1e-9 * max(1.0, float(np.linalg.norm(up))):
        return None  # up along the direction: no side to face
    across = across / width
    return np.column_stack((direction, across, np.cross(direction, across)))


def blender_turn(
    base: np.ndarray, end: np.ndarray, frame: np.ndarray, target: np.ndarray, pole: np.ndarray, pole_angle: float
) -> np.ndarray | None:
    """The rotation (3x3, about `base`) Blender's IK gives a chain before solving, or None where it is undefined.

    `base` is the first bone's head, `end` the last bone's tail and `frame`
    the first bone's frame, all in the pose the solve starts from. None when
    the target sits on the base, the pole on the line to the target, or the
    up vector along the chain: Blender's own turn is degenerate there (it
    collapses the chain), so the caller keeps the chain as it is.
    """
    have = _frame(np.asarray(end, float) - base, up_vector(frame, pole_angle))
    want = _frame(np.asarray(target, float) - base, np.asarray(pole, float) - base)
    if have is None or want is None:
        return None
    return want @ have.T


def bend_normal(points: Sequence[Sequence[float]]) -> np.ndarray | None:
    """The unit normal of the plane a chain bends in, or None when it is straight.

    `points` are the first bone's head and then each bone's tail, in chain
    order. The plane is the one through the first and last point and the
    joint farthest from the line between them, which for a chain bent in
    one plane is that plane; its sign follows that joint's side.
    """
    points = np.asarray(points, dtype=float)
    first, last = points[0], points[-1]
    line = last - first
    reach = float(np.sum(np.linalg.norm(np.diff(points, axis=0), axis=1)))
    size = float(np.linalg.norm(line))
    if size < 1e-12 or len(points) < 3:
        return None
    line = line / size
    offsets = points[1:-1] - first
    offsets = offsets - np.outer(offsets @ line, line)
    far = int(np.argmax(np.linalg.norm(offsets, axis=1)))
    if float(np.linalg.norm(offsets[far])) <= STRAIGHT * reach:
        return None
    normal = np.cross(line, offsets[far])
    return normal / np.linalg.norm(normal)
