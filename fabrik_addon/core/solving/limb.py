# SPDX-License-Identifier: GPL-3.0-or-later
"""The exact answer for a two-bone limb with joint limits: an arm or a leg, with or without its pole.

A limb of two connected bones pulled at its tip has one answer once the
plane it bends in is known: the triangle of its two bones and the line from
its base to the target (the law of cosines). The plane is Blender's: the
pole's (`pole.holds` turns the chain into it), or without a pole the one the
limb already bends in. Each bone turns the shortest way onto its side of the
triangle (`starts.settle_two_bones`, where FABRIK's iterations on two bones
end); where the lower joint is a hinge, the upper bone instead turns about
its own length until the hinge's axis stands across the plane, so the lower
bone bends about that axis alone. Where the upper bone leaves its limit
there, the limb swivels about the line from its base to the target (which
moves neither the tip nor the lower joint's bend) to the nearest plane that
keeps it: the pole is kept as nearly as the limits allow, and Blender's own
IK, which keeps it by breaking the limit, is not followed there. Each such
pose is the answer, found in one step; else (no swivel keeps the limits, a
straight limb without a pole, no triangle) the limited method solves the
limb as any other part (`stages`).

A target beyond the straight limb, or one a hinge keeps the tip from (its
range sets how near the base and how far from it the tip can be: the
triangle's third side at the bends the range allows; an elbow that cannot
fold or straighten so far), is out of the limb's reach: the tip goes to the
nearest point it can reach, on the line from the base to the target (beyond
the straight limb the tolerance inside its length, as
`TreeGoals.out_of_reach` aims; else the hinge at the end of its range, or
folded or straight where the range goes so far), in the same one step;
reported unreachable with the real miss. The limited method's descent
stalls short of it there, in a pose far from the frames' around it.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..chain.starts import settle_two_bones
from ..goals import pole
from ..math import quat
from ..math.quat import Quat
from ..math.vec import Vec, add, cross, dist, dot, norm, scale, sub
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, warm_poles
from ..model.tree import Joints, MovingTree, Start, tails_of

__all__ = ["applies", "hinge_axis", "solve"]

#: Where the pole's plane leaves the upper bone outside its limit, the limb swivels about its base-target line
#: towards the nearest swivel inside it, searched in steps of this angle (radians) each way round.
SWIVEL_STEP = math.radians(5.0)
SWIVEL_STEPS = 36
#: A hinge's axis may lean this far (its cosine) from square to the upper bone: further, no turn of the upper
#: bone about itself puts the axis across the plane.
_SQUARE = 1e-6
#: A target nearer or further than the hinge lets the tip be is aimed at this share of the way inside that
#: distance (the hinge then a hair inside its range, not on it, where rounding could take it out).
_INSIDE = 1e-9


def applies(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """Two connected bones pulled at the tip by one position goal."""
    return (
        len(tree.bones) == 2 and len(goals) == 1 and tree.parent[1] == 0 and tree.connected[1]
        and goals[0].bone == tree.bones[1] and goals[0].weight > 0.0 and goals[0].rotation is None
    )


def hinge_axis(limit: limits.JointLimit | None) -> Vec | None:
    """The bone's own axis a hinge turns it about (X or Z, the other two locked), or None for any other joint."""
    if limit is None or limit.y_range != (0.0, 0.0):
        return None
    if limit.z_range == (0.0, 0.0) and limit.x_range != (0.0, 0.0):
        return (1.0, 0.0, 0.0)
    if limit.x_range == (0.0, 0.0) and limit.z_range != (0.0, 0.0):
        return (0.0, 0.0, 1.0)
    return None


def _reaches(tree: MovingTree, start: Start, axis: Vec) -> tuple[float, float]:
    """The nearest and furthest the limb's tip can be from its base with the lower joint a hinge about its own
    `axis` (X or Z) in its range: the third side of the bones' triangle at the bends the range allows."""
    limit, zero = tree.limits[1], start.zero[1]
    low, high = limit.x_range if axis[0] else limit.z_range
    # The lower bone's direction in the upper bone's frame, turned by t about the hinge: cos t Y' + sin t W', with
    # Y' and W' its rest direction and the one a quarter turn on; the upper bone's own direction is Y.
    along = quat.rotate(zero, (0.0, 1.0, 0.0))[1]
    across = quat.rotate(zero, (0.0, 0.0, 1.0) if axis[0] else (-1.0, 0.0, 0.0))[1]
    upper, lower = tree.length[0], tree.length[1]
    turns = [low, high]
    straightest = math.atan2(across, along)  # (where the bones line up most; half a turn on, where they fold most)
    turns += [t for t in (straightest - math.pi, straightest, straightest + math.pi) if low < t < high]
    sides = upper * upper + lower * lower
    squares = [sides + 2.0 * upper * lower * (along * math.cos(t) + across * math.sin(t)) for t in turns]
    return math.sqrt(max(0.0, min(squares))), math.sqrt(max(0.0, max(squares)))


def _signed_angle(a: Vec, b: Vec, axis: Vec) -> float:
    """The angle turning a onto b about the axis (a and b across it)."""
    return math.atan2(dot(axis, cross(a, b)), dot(a, b))


def _ways(tree: MovingTree, start: Start, frames: list[Quat], axis: Vec | None) -> list[tuple[list[Quat], Quat]]:
    """The limb's frames and the lower bone's local rotation, each way that keeps the lower joint's limit: as they
    are, or with a hinge the upper bone turned about itself so the hinge stands across the bend plane (the smaller
    turn first)."""
    limit = tree.limits[1]
    if axis is None:
        lower = quat.normalized(quat.mul(quat.conj(quat.mul(frames[0], start.zero[1])), frames[1]))
        return [(frames, lower)] if limit is None or limits.allows(limit, lower) else []
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
        # (the hinge's own turn, exactly: worked out again from the frames, its locked axes would be a hair off)
        lower = quat.about_axis(axis, _signed_angle(quat.y_axis(zero), lower_y, across))
        if limits.allows(limit, lower):
            found.append(([upper, quat.normalized(quat.mul(zero, lower))], lower))
    return found


def _swivelled(
    tree: MovingTree, start: Start, ways: list[tuple[list[Quat], Quat]], line: Vec
) -> tuple[Quat, list[Quat], list[Quat]] | None:
    """Of the ways, the one turned least about the base-target line (unit `line`; the limb's swivel, which moves
    neither its tip nor the lower joint's bend) that keeps the upper bone's limit: the turn, its frames and the
    local rotations; None where no swivel does."""
    limit, zero = tree.limits[0], quat.conj(start.zero[0])

    def local(turn: Quat, upper: Quat) -> Quat:
        return quat.normalized(quat.mul(zero, quat.mul(turn, upper)))

    def inside(angle: float, upper: Quat) -> bool:
        return limit is None or limits.allows(limit, local(quat.about_axis(line, angle), upper))

    for k in range(SWIVEL_STEPS + 1):
        found = []
        for sign in (1.0, -1.0) if k else (1.0,):
            for frames, lower in ways:
                angle = sign * k * SWIVEL_STEP
                if not inside(angle, frames[0]):
                    continue
                if k:  # the least swivel inside, between this step's and the last one's (outside)
                    outside = sign * (k - 1) * SWIVEL_STEP
                    for _ in range(16):  # (5 degrees / 2^16: a few millionths of a radian)
                        middle = 0.5 * (outside + angle)
                        outside, angle = (outside, middle) if inside(middle, frames[0]) else (middle, angle)
                found.append((abs(angle), angle, frames, lower))
        if found:
            _, angle, frames, lower = min(found, key=lambda f: f[0])
            turn = quat.about_axis(line, angle)
            turned = [quat.normalized(quat.mul(turn, f)) for f in frames]
            return turn, turned, [local(turn, frames[0]), lower]
    return None


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
    base = joints.heads[0]
    away = sub(target, base)
    span = norm(away)
    if span < 1e-12:
        return None
    hinge = hinge_axis(tree.limits[1])
    straight = tree.length[0] + tree.length[1]
    inner, outer = 0.0, straight
    if hinge is not None:
        nearest, furthest = _reaches(tree, start, hinge)
        inner, outer = nearest * (1.0 + _INSIDE), furthest * (1.0 - _INSIDE)
    if span > straight * (1.0 + _INSIDE):
        outer = min(outer, max(0.0, straight - settings.tolerance))
    aim = target  # (one out of reach: the nearest point the tip can reach, on the same line)
    if inner <= outer and not inner <= span <= outer:
        aim = add(base, scale(away, min(max(span, inner), outer) / span))
    if goal.pole is not None:
        pole.holds(tree, joints, goals, settings.tolerance, warm_poles(settings))
    if not settle_two_bones(tree, joints, aim):
        return None
    ways = _ways(tree, start, joints.frames, hinge)
    if not ways:
        return None
    found = _swivelled(tree, start, ways, scale(away, 1.0 / norm(away)))
    if found is None:
        return None
    turn, frames, rotations = found
    heads = [base, add(base, quat.rotate(turn, sub(joints.tails[0], base)))]
    tip = tails_of(frames[1:], heads[1:], tree.length[1:])[0]
    if dist(aim, tip) > settings.tolerance:
        return None
    error = dist(target, tip)
    converged = error <= settings.tolerance
    return frames, heads, rotations, SolveReport(
        1, [error], converged, "converged" if converged else "unreachable", rotation_errors=[0.0]
    )
