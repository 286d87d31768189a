# SPDX-License-Identifier: GPL-3.0-or-later
"""The exact answer for a two-bone limb with joint limits: an arm or a leg, with or without its pole.

A limb of two connected bones pulled at its tip has one answer once the
plane it bends in is known: the triangle of its two bones and the line from
its base to the target (the law of cosines). The plane is Blender's: the
pole's (`pole.holds` turns the chain into it), or without a pole the one the
limb already bends in. Each bone turns the shortest way onto its side of the
triangle (`fabrik.settle_two_bones`, where FABRIK's iterations on two bones
end); where the lower joint is a hinge, the upper bone instead turns about
its own length until the hinge's axis stands across the plane, so the lower
bone bends about that axis alone. Where that pose keeps every limit it is
the answer, found in one step; else (a target the limits keep the limb from
reaching this way, a straight limb without a pole, no triangle) the limited
method solves the limb as any other part (`methods.solve_limited`).
"""

from __future__ import annotations

import math
from typing import Sequence

from . import limits, pole, quat
from .fabrik import settle_two_bones
from .problem import Goal, SolveReport, SolveSettings
from .quat import Quat
from .tree import Joints, MovingTree, Start
from .vec import Vec, cross, dist, dot, norm, scale

__all__ = ["applies", "solve"]

#: A hinge's axis may lean this far (its cosine) from square to the upper bone: further, no turn of the upper
#: bone about itself puts the axis across the plane.
_SQUARE = 1e-6


def applies(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """Two connected bones pulled at the tip by one position goal."""
    return (
        len(tree.bones) == 2 and len(goals) == 1 and tree.parent[1] == 0 and tree.connected[1]
        and goals[0].bone == tree.bones[1] and goals[0].weight > 0.0 and goals[0].rotation is None
    )


def _hinge_axis(limit: limits.JointLimit | None) -> Vec | None:
    """The bone's own axis a hinge turns it about (X or Z, the other two locked), or None for any other joint."""
    if limit is None or limit.y_range != (0.0, 0.0):
        return None
    if limit.z_range == (0.0, 0.0) and limit.x_range != (0.0, 0.0):
        return (1.0, 0.0, 0.0)
    if limit.x_range == (0.0, 0.0) and limit.z_range != (0.0, 0.0):
        return (0.0, 0.0, 1.0)
    return None


def _signed_angle(a: Vec, b: Vec, axis: Vec) -> float:
    """The angle turning a onto b about the axis (a and b across it)."""
    return math.atan2(dot(axis, cross(a, b)), dot(a, b))


def _inside(tree: MovingTree, start: Start, frames: list[Quat], lower: Quat | None = None) -> list[Quat] | None:
    """The two bones' local rotations where both keep their limits (`lower`: the lower one's, where it is known
    exactly), else None."""
    upper = quat.normalized(quat.mul(quat.conj(start.zero[0]), frames[0]))
    if lower is None:
        lower = quat.normalized(quat.mul(quat.conj(quat.mul(frames[0], start.zero[1])), frames[1]))
    for limit, q in zip(tree.limits, (upper, lower)):
        if limit is not None and not limits.allows(limit, q):
            return None
    return [upper, lower]


def _hinged(tree: MovingTree, start: Start, frames: list[Quat], axis: Vec) -> list[tuple[list[Quat], list[Quat]]]:
    """The limb's frames with the upper bone turned about itself so that the lower joint's hinge axis stands
    across the bend plane, either way round (the turn that needs less first), with their local rotations where
    they keep the limits."""
    upper_y, lower_y = quat.y_axis(frames[0]), quat.y_axis(frames[1])
    normal = cross(upper_y, lower_y)
    size = norm(normal)
    if size < 1e-9:
        return []
    normal = scale(normal, 1.0 / size)
    hinge = quat.rotate(quat.mul(frames[0], start.zero[1]), axis)
    if abs(dot(hinge, upper_y)) > _SQUARE:
        return []
    found = []
    turn = _signed_angle(hinge, normal, upper_y)
    for turn in sorted((turn, turn - math.copysign(math.pi, turn)), key=abs):
        upper = quat.normalized(quat.mul(quat.about_axis(upper_y, turn), frames[0]))
        zero = quat.mul(upper, start.zero[1])
        across = quat.rotate(zero, axis)
        bend = _signed_angle(quat.y_axis(zero), lower_y, across)
        # (the hinge's own turn, exactly: worked out again from the frames, its locked axes would be a hair off)
        turn = quat.about_axis(axis, bend)
        placed = [upper, quat.normalized(quat.mul(zero, turn))]
        rotations = _inside(tree, start, placed, turn)
        if rotations is not None:
            found.append((placed, rotations))
    return found


def solve(
    tree: MovingTree, goals: Sequence[Goal], start: Start, settings: SolveSettings
) -> tuple[list[Quat], list[Vec], list[Quat], SolveReport] | None:
    """The limb's answer (see the module): its frames, heads, local rotations and the report of its one step; None
    where the limited method solves it."""
    if settings.max_iterations <= 0:
        return None
    goal = goals[0]
    target = (float(goal.target[0]), float(goal.target[1]), float(goal.target[2]))
    joints = Joints(tree, start, framed=True)
    if dist(joints.tails[1], target) <= settings.tolerance:
        return None  # reached as it starts: the limited method keeps the start (and brings it inside its limits)
    if goal.pole is not None:
        pole.holds(tree, joints, goals, settings.tolerance)
    if not settle_two_bones(tree, joints, target):
        return None
    frames = joints.frames
    axis = _hinge_axis(tree.limits[1])
    if axis is None:
        rotations = _inside(tree, start, frames)
        if rotations is None:
            return None
    else:
        found = _hinged(tree, start, frames, axis)
        if not found:
            return None
        frames, rotations = found[0]
    heads = [joints.heads[0], joints.tails[0]]
    error = dist(target, _tip(heads[1], frames[1], tree.length[1]))
    if error > settings.tolerance:
        return None
    return frames, heads, rotations, SolveReport(1, [error], True, "converged", rotation_errors=[0.0])


def _tip(head: Vec, frame: Quat, length: float) -> Vec:
    """A bone's tail."""
    y = quat.y_axis(frame)
    return (head[0] + length * y[0], head[1] + length * y[1], head[2] + length * y[2])
