# SPDX-License-Identifier: GPL-3.0-or-later
"""Where to put a new pole target, and the pole angle that makes a pole leave a chain where it is.

Blender's pole rule (see `pole.py`) turns the chain about its base so that
the first bone's up vector X cos(a) + Z sin(a), seen along the line from
the chain's base to its tip, faces the pole. With the target at the tip the
turn is none at all exactly when that up vector, projected across the line,
already points the pole's way: writing the pole's direction across the line
as p X' + q Z' (X', Z' the first bone's axes projected across it) gives
(cos a, sin a) along (p, q).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..math.quat import Quat
from ..math.vec import Vec
from .pole import STRAIGHT, warm_turn  # (STRAIGHT: a joint this close to the base-tip line, relative to the reach)

__all__ = ["auto_pole_angle", "auto_pole_angle_warm", "pole_point"]

#: Pole angles tried around the circle before the one that leaves a chain be is narrowed down (`auto_pole_angle_warm`).
SCAN = 72
#: A pole this close to the line from the base to the tip (relative to its distance) faces no side of it.
ON_LINE = 1e-3


def _across(vector: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The part of vector perpendicular to the unit axis."""
    return vector - axis * float(axis @ vector)


def _unit(vector: np.ndarray) -> np.ndarray | None:
    """vector scaled to length 1, or None when it has no direction."""
    size = float(np.linalg.norm(vector))
    return vector / size if size > 1e-12 else None


def auto_pole_angle(base: Sequence[float], tip: Sequence[float], x_axis: Sequence[float], z_axis: Sequence[float],
                    pole: Sequence[float]) -> float | None:
    """The pole angle for which Blender's pole turn of the chain base..tip is none (first bone axes X, Z; the
    pole at `pole`, all in one space), or None when no angle is defined (pole on the chain's line, no length)."""
    base, pole = np.asarray(base, float), np.asarray(pole, float)
    axis = _unit(np.asarray(tip, float) - base)
    if axis is None:
        return None
    x, z = _across(np.asarray(x_axis, float), axis), _across(np.asarray(z_axis, float), axis)
    towards = _across(pole - base, axis)
    if np.linalg.norm(towards) < 1e-9 * max(1.0, float(np.linalg.norm(pole - base))):
        return None  # the pole lies on the line the turn is about: it faces no side
    # towards = p X' + q Z' in the plane across the line (least squares: X', Z' need not be perpendicular).
    basis = np.column_stack((x, z))
    if abs(np.linalg.det(basis.T @ basis)) < 1e-18:
        return None  # X' and Z' on one line: the first bone's Y is across the chain, up reaches only that line
    (p, q), *_ = np.linalg.lstsq(basis, towards, rcond=None)
    return math.atan2(q, p)


def auto_pole_angle_warm(
    base: Vec, frame: Quat, points: Sequence[Vec], tip: Vec, pole: Vec
) -> float | None:
    """The pole angle for which a solve that goes on from the previous one (`pole.warm_turn`) leaves the chain
    as it is, its tip on its target (the first bone's head and frame, its rest points in that bone); None where no
    angle does."""
    axis = _unit(np.asarray(tip, float) - np.asarray(base, float))
    if axis is None:
        return None
    towards = np.asarray(pole, float) - np.asarray(base, float)
    if np.linalg.norm(_across(towards, axis)) < ON_LINE * max(1e-12, float(np.linalg.norm(towards))):
        return None  # the pole on the line to the tip (which a solve leaves within its tolerance of the target)

    def off(angle: float) -> float | None:
        """The signed turn (radians) about the line to the tip that this pole angle gives the chain."""
        turn = warm_turn(base, frame, points, tip, pole, angle)
        if turn is None:
            return None
        w, along = turn[0], float(np.dot(turn[1:], axis))
        return math.remainder(2.0 * math.atan2(along, w), 2.0 * math.pi)

    angles = [-math.pi + 2.0 * math.pi * k / SCAN for k in range(SCAN + 1)]
    values = [off(a) for a in angles]
    best = None
    for (a, fa), (b, fb) in zip(zip(angles, values), zip(angles[1:], values[1:])):
        if fa is None or fb is None or fa * fb > 0.0 or abs(fa - fb) > math.pi:
            continue  # (no root between, or the turn wrapped round from -pi to pi)
        for _ in range(60):
            middle = 0.5 * (a + b)
            fm = off(middle)
            if fm is None:
                break
            a, fa, b, fb = (a, fa, middle, fm) if fa * fm <= 0.0 else (middle, fm, b, fb)
        root, miss = (a, fa) if abs(fa) <= abs(fb) else (b, fb)
        if best is None or abs(miss) < best[1]:
            best = root, abs(miss)
    return None if best is None else best[0]


def pole_point(joints: Sequence[Sequence[float]], x_axis: Sequence[float], z_axis: Sequence[float],
               distance: float) -> np.ndarray | None:
    """Where a new pole goes for the chain through `joints`: `distance` from its knee on the side it bends; a
    straight chain gets it off its middle joint on its first bone's -Z side, where FABRIK bends it (+X if Z runs
    along the chain)."""
    points = np.asarray(joints, float)
    base = points[0]
    axis = _unit(points[-1] - base)
    if axis is None:
        axis = _unit(points[1] - base) if len(points) > 1 else None
        if axis is None:
            return None
    offsets = np.array([_across(point - base, axis) for point in points])
    sizes = np.linalg.norm(offsets, axis=1)
    reach = float(sum(np.linalg.norm(points[i + 1] - points[i]) for i in range(len(points) - 1)))
    knee = int(np.argmax(sizes))
    if sizes[knee] > STRAIGHT * max(reach, 1e-12):
        return points[knee] + offsets[knee] / sizes[knee] * distance
    side = _unit(_across(-np.asarray(z_axis, float), axis))
    if side is None:
        side = _unit(_across(np.asarray(x_axis, float), axis))
        if side is None:
            return None
    return points[len(points) // 2] + side * distance
