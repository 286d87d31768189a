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
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..math import quat
from ..math.quat import Quat
from ..math.vec import EPSILON, Vec, add, cross, dist, dot, norm, scale, sub
from ..model.problem import Goal
from ..model.tree import Joints, MovingTree

__all__ = [
    "STRAIGHT", "PoleHold", "bend_normal", "blender_turn", "held_vector", "holds", "turn_about_pole", "up_vector",
    "warm_turn",
]

#: Joints closer than this fraction of the chain's reach to its line count as on it (single-precision poses).
STRAIGHT = 1e-5


def up_vector(frame: np.ndarray, pole_angle: float) -> np.ndarray:
    """The first bone's up vector, X cos(pole_angle) + Z sin(pole_angle) of its frame (columns X, Y, Z)."""
    return frame[:, 0] * math.cos(pole_angle) + frame[:, 2] * math.sin(pole_angle)


def _up(frame: Quat, pole_angle: float) -> Vec:
    """`up_vector` of a frame given as a quaternion."""
    m = quat.to_matrix(frame)
    c, s = math.cos(pole_angle), math.sin(pole_angle)
    return (m[0][0] * c + m[0][2] * s, m[1][0] * c + m[1][2] * s, m[2][0] * c + m[2][2] * s)


def _frame(direction: Vec, up: Vec) -> tuple[Vec, Vec, Vec] | None:
    """Columns: the unit direction, `up` made perpendicular to it, and their cross product; None if undefined."""
    size = norm(direction)
    if size < 1e-12:
        return None
    direction = scale(direction, 1.0 / size)
    across = sub(up, scale(direction, dot(direction, up)))
    width = norm(across)
    if width < 1e-9 * max(1.0, norm(up)):
        return None  # up along the direction: no side to face
    across = scale(across, 1.0 / width)
    return direction, across, cross(direction, across)


def _turn(base: Vec, end: Vec, up: Vec, target: Vec, pole: Vec) -> tuple[Vec, Vec, Vec] | None:
    """`blender_turn` in plain floats, with the up vector given: the rotation's rows, or None."""
    have = _frame(sub(end, base), up)
    want = _frame(sub(target, base), sub(pole, base))
    if have is None or want is None:
        return None
    # want @ have^T, both with the frames' vectors as columns
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = want
    (p0, p1, p2), (q0, q1, q2), (r0, r1, r2) = have
    return (
        (a0 * p0 + b0 * q0 + c0 * r0, a0 * p1 + b0 * q1 + c0 * r1, a0 * p2 + b0 * q2 + c0 * r2),
        (a1 * p0 + b1 * q0 + c1 * r0, a1 * p1 + b1 * q1 + c1 * r1, a1 * p2 + b1 * q2 + c1 * r2),
        (a2 * p0 + b2 * q0 + c2 * r0, a2 * p1 + b2 * q1 + c2 * r1, a2 * p2 + b2 * q2 + c2 * r2),
    )


def blender_turn(
    base: np.ndarray, end: np.ndarray, frame: np.ndarray, target: np.ndarray, pole: np.ndarray, pole_angle: float
) -> np.ndarray | None:
    """The rotation (3x3, about `base`) Blender's IK gives a chain before solving (`base`, `end` and `frame`: its
    first head, last tail and first frame in the start pose), or None where Blender's own turn is degenerate and the
    caller keeps the chain as it is."""
    points = [tuple(float(c) for c in v) for v in (base, end, up_vector(np.asarray(frame, float), pole_angle), target, pole)]
    turn = _turn(*points)
    return None if turn is None else np.array(turn)


def _bend_normal(points: Sequence[Vec]) -> Vec | None:
    """`bend_normal` in plain floats."""
    first, last = points[0], points[-1]
    if len(points) < 3:
        return None
    line = sub(last, first)
    size = norm(line)
    if size < 1e-12:
        return None
    reach = sum(dist(a, b) for a, b in zip(points, points[1:]))
    line = scale(line, 1.0 / size)
    far, far_size = None, -1.0
    for point in points[1:-1]:
        offset = sub(point, first)
        offset = sub(offset, scale(line, dot(offset, line)))
        size = norm(offset)
        if size > far_size:
            far, far_size = offset, size
    if far is None or far_size <= STRAIGHT * reach:  # (None: points that are not numbers)
        return None
    normal = cross(line, far)
    return scale(normal, 1.0 / norm(normal))


def bend_normal(points: Sequence[Sequence[float]]) -> np.ndarray | None:
    """The unit normal of the plane a chain bends in (through its first and last point and the joint farthest from
    the line between them; `points`: the first head, then each tail), or None when it is straight."""
    normal = _bend_normal([tuple(float(c) for c in point) for point in points])
    return None if normal is None else np.array(normal)


# How FABRIK keeps to Blender's rule: the chain turned once at the start, then held through the passes.


@dataclass(frozen=True)
class PoleHold:
    """What keeps a chain turned the way its pole says, through FABRIK's passes."""

    chain: tuple[int, ...]
    target: Vec
    #: A vector fixed in the chain's first bone (its bend normal, in that bone's frame).
    local: Vec
    #: Where that vector should face, in armature space (seen along the line from the base to the target).
    wanted: Vec


def holds(
    tree: MovingTree, joints: Joints, goals: Sequence[Goal], tolerance: float = 0.0, warm: bool = False
) -> list[PoleHold]:
    """Apply Blender's pole rule to the start pose (see the module) and return what holds each chain's plane while
    it solves: a straight chain is bent towards its turned up vector, and from the last frame's pose (`warm`) a
    chain takes the shortest turn (`warm_turn`)."""
    holds = []
    for g, goal in enumerate(goals):
        if goal.pole is None:
            continue
        chain = tree.goal_chain[g]
        top = chain[-1]
        base = joints.heads[top]
        target = tuple(float(c) for c in goal.target)
        up = _up(joints.frames[top], goal.pole_angle)
        pole_at = tuple(float(c) for c in goal.pole)
        points = _rest_points(tree, joints, chain)
        end = add(base, quat.rotate(joints.frames[top], points[-1])) if warm else joints.tails[chain[0]]
        held = _held(base, joints.frames[top], up, end, points, target, pole_at, goal.pole_angle)
        if held is None:
            continue  # undefined (pole on the target line, target on the base): the chain keeps its own plane
        local, wanted, turn = held
        hold = PoleHold(chain, target, local, wanted)
        below = tree.subtree(top)
        alone = tree.kept.pole_alone.get(g)
        if alone is None:  # (whether no other goal hangs below the chain's first bone: kept with the tree)
            alone = tree.kept.pole_alone[g] = all(h == g for k in below for h in tree.goals_at[k])
        if alone and warm:
            turn = _shortest(base, joints.frames[top], joints.tails[chain[0]], local, target, wanted)
        if alone and turn is not None:
            turn_rigidly(joints, below, base, turn)
            up = quat.rotate(turn, up)
            straight = len(chain) > 1 and _bend_normal(chain_points(joints, chain)) is None
            if straight and dist(joints.tails[chain[0]], target) > tolerance:
                bend_towards(tree, joints, chain, up, dist(target, base))
        holds.append(hold)
    return holds


def _held(
    base: Vec, frame: Quat, up: Vec, end: Vec, points: Sequence[Vec], target: Vec, pole_at: Vec, pole_angle: float
) -> tuple[Vec, Vec, Quat] | None:
    """Blender's turn of a chain (its first bone's head, frame and up vector, its end, its rest points in that
    bone) towards its target and pole, and the hold it leaves: the held vector in the first bone (`held_vector`)
    and where it should face. None where the turn is undefined."""
    rows = _turn(base, end, up, target, pole_at)
    if rows is None:
        return None
    turn = quat.from_matrix(rows)
    local = held_vector(points, pole_angle)
    return local, quat.rotate(turn, quat.rotate(frame, local)), turn


def _shortest(base: Vec, frame: Quat, end: Vec, local: Vec, target: Vec, wanted: Vec) -> Quat | None:
    """The shortest turn of a chain about its base that points its end at the target and its held vector (`local`,
    in its first bone of this frame) the way `wanted` asks, seen along that line; None where undefined."""
    rows = _turn(base, end, quat.rotate(frame, local), target, add(base, wanted))
    return None if rows is None else quat.from_matrix(rows)


def warm_turn(
    base: Vec, frame: Quat, points: Sequence[Vec], target: Vec, pole_at: Vec, pole_angle: float
) -> Quat | None:
    """The turn `holds` gives a chain from the last frame's pose whose tip is on its target: its first bone's head and
    frame, and its rest points in that bone (`_rest_points`); None where undefined."""
    end = add(base, quat.rotate(frame, points[-1]))
    held = _held(base, frame, _up(frame, pole_angle), end, points, target, pole_at, pole_angle)
    if held is None:
        return None
    local, wanted, _ = held
    return _shortest(base, frame, target, local, target, wanted)


def _rest_points(tree: MovingTree, joints: Joints, chain: tuple[int, ...]) -> list[Vec]:
    """The chain's first bone's head, then every tail, with every joint at rest, in the first bone's frame."""
    frame, point, points = quat.IDENTITY, (0.0, 0.0, 0.0), [(0.0, 0.0, 0.0)]
    previous = frame
    for k in reversed(chain):  # (the first bone's own frame is the identity)
        if k != chain[-1]:
            frame = quat.mul(frame, joints.zero[k])
            if joints.offset[k] is not None:
                point = add(point, quat.rotate(previous, joints.offset[k]))
        point = add(point, quat.rotate(frame, (0.0, tree.length[k], 0.0)))
        points.append(point)
        previous = frame
    return points


def held_vector(points: Sequence[Vec], pole_angle: float) -> Vec:
    """The vector a hold keeps facing its way, in the chain's first bone: the normal of the plane the chain bends in
    at rest (or bends towards its up vector), fixed by the rig so that a hand bent at the wrist does not tip the
    plane."""
    c, s = math.cos(pole_angle), math.sin(pole_angle)
    if len(points) == 2:
        return (c, 0.0, s)
    normal = _bend_normal(points)
    return normal if normal is not None else (s, 0.0, -c)  # (Y x up)


def chain_points(joints: Joints, chain: tuple[int, ...]) -> list[Vec]:
    """The first bone's head, then every tail of a chain (given tip first)."""
    return [joints.heads[chain[-1]]] + [joints.tails[k] for k in reversed(chain)]


def turn_rigidly(joints: Joints, nodes: Sequence[int], centre: Vec, turn: Quat) -> None:
    """Turn some nodes (heads, tails and frames, when carried) as one body about a point."""
    # (one rotation matrix for every point, written out: the poles turn their chains so on every frame)
    (m00, m01, m02), (m10, m11, m12), (m20, m21, m22) = quat.to_matrix(turn)
    cx, cy, cz = centre
    heads, tails, frames = joints.heads, joints.tails, joints.frames
    for k in nodes:
        for points in (heads, tails):
            x, y, z = points[k]
            x, y, z = x - cx, y - cy, z - cz
            points[k] = (
                cx + m00 * x + m01 * y + m02 * z, cy + m10 * x + m11 * y + m12 * z, cz + m20 * x + m21 * y + m22 * z
            )
        if frames is not None:
            frames[k] = quat.mul_unit(turn, frames[k])


def bend_towards(tree: MovingTree, joints: Joints, chain: tuple[int, ...], side: Vec, span: float) -> None:
    """Bend a straight chain into an even arc, its knees on `side`, its ends about `span` apart: every joint leaves
    the line on that side, since FABRIK would put a joint left on the line to the target straight back."""
    top = chain[-1]
    axis = cross(side, sub(joints.tails[top], joints.heads[top]))  # turning about side x Y takes Y towards -side
    size = norm(axis)
    if size < EPSILON:
        return
    axis = scale(axis, 1.0 / size)
    lengths = [tree.length[k] for k in reversed(chain)]
    middle = (len(lengths) - 1) / 2.0

    def chord(turn: float) -> tuple[float, float]:
        """The chord's length with every joint turned by `turn`, and its derivative."""
        x = y = dx = dy = 0.0
        for i, length in enumerate(lengths):
            a = i - middle
            c, s = math.cos(a * turn), math.sin(a * turn)
            x, y, dx, dy = x + length * c, y + length * s, dx - length * a * s, dy + length * a * c
        size = math.hypot(x, y)
        return size, (x * dx + y * dy) / size

    low, high = 0.2 / (len(lengths) - 1), 2.0 * math.pi / len(lengths)
    turn = low
    if chord(low)[0] > span:  # in reach: the arc whose chord is the span (Newton's steps, bisection as a guard)
        turn = 0.5 * (low + high)
        for _ in range(60):
            size, slope = chord(turn)
            if abs(size - span) <= 1e-13 * span:
                break
            low, high = (turn, high) if size > span else (low, turn)
            turn = turn - (size - span) / slope if slope < 0.0 else 0.5 * (low + high)
            if not low < turn < high:
                turn = 0.5 * (low + high)
    turn_rigidly(joints, tree.subtree(top), joints.heads[top], quat.about_axis(axis, -middle * turn))
    back = quat.about_axis(axis, turn)
    for k in reversed(chain[:-1]):
        turn_rigidly(joints, tree.subtree(k), joints.heads[k], back)


def turn_for(hold: PoleHold, base: Vec, frame: Quat) -> Quat | None:
    """The turn about the line from `base` to the hold's target that makes the held vector of a first bone
    with this frame face the wanted way; None where either lies on the line (no side to face)."""
    axis = sub(hold.target, base)
    length = norm(axis)
    if length < EPSILON:
        return None
    axis = scale(axis, 1.0 / length)
    now = quat.rotate(frame, hold.local)
    now = sub(now, scale(axis, dot(axis, now)))
    towards = sub(hold.wanted, scale(axis, dot(axis, hold.wanted)))
    if norm(now) < 1e-9 or norm(towards) < 1e-9:
        return None
    return quat.about_axis(axis, math.atan2(dot(axis, cross(now, towards)), dot(now, towards)))


def turn_about_pole(tree: MovingTree, joints: Joints, hold: PoleHold) -> None:
    """Turn a chain about the line from its base to its target until its held vector faces the wanted way."""
    chain = hold.chain
    top = chain[-1]
    p = tree.parent[top]
    if p < 0:
        base = joints.base[top]
    elif joints.offset[top] is None:
        base = joints.tails[p]
    else:
        base = add(joints.tails[p], joints.offset_now(top, p))
    turn = turn_for(hold, base, joints.frames[top])
    if turn is None:
        return
    for k in chain:
        joints.heads[k] = add(base, quat.rotate(turn, sub(joints.heads[k], base)))
        joints.tails[k] = add(base, quat.rotate(turn, sub(joints.tails[k], base)))
        joints.frames[k] = quat.normalized(quat.mul(turn, joints.frames[k]))
