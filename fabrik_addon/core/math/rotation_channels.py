# SPDX-License-Identifier: GPL-3.0-or-later
"""A pose bone's rotation channel values (quaternion, axis-angle, Euler of each order) to and from rotations.

One value at a time on plain floats, in double precision (mathutils works in
single precision: its axis-angle of a turn under about 3e-4 rad is no turn at
all), and many values of one mode at once on numpy rows (`matrix_rows_of`).
Modes are Blender's `rotation_mode` names.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from . import matrix_rows, quat

#: A quaternion Blender normalizes from zero length: a half turn about X (its `normalize_qt`).
_ZERO_QUATERNION_TURN: quat.Quat = (0.0, 1.0, 0.0, 0.0)


def channel_to_quaternion(mode: str, value: Sequence[float]) -> quat.Quat:
    """The unit quaternion a rotation channel value in this mode poses a bone by, as Blender reads the value."""
    if mode == 'QUATERNION':
        length = math.sqrt(sum(c * c for c in value))
        if length == 0.0:
            return _ZERO_QUATERNION_TURN
        return (value[0] / length, value[1] / length, value[2] / length, value[3] / length)
    if mode == 'AXIS_ANGLE':
        angle, x, y, z = value
        length = math.sqrt(x * x + y * y + z * z)
        if length == 0.0:
            return quat.IDENTITY  # Blender poses a zero axis as no turn
        return quat.about_axis((x / length, y / length, z / length), angle)
    q = quat.IDENTITY
    for axis in mode:  # 'XYZ' turns about X first
        k = "XYZ".index(axis)
        half = value[k] / 2.0
        turn = [math.cos(half), 0.0, 0.0, 0.0]
        turn[1 + k] = math.sin(half)
        q = quat.mul(tuple(turn), q)
    return q


def channel_to_matrix(mode: str, value: Sequence[float]) -> tuple:
    """The 3x3 rotation (rows) of a rotation channel value in this mode."""
    return quat.to_matrix(channel_to_quaternion(mode, value))


def channel_from_matrix(mode: str, m, previous: Sequence[float]) -> tuple[float, ...]:
    """A 3x3 rotation (rows) as a value of the mode's channel, continuous with `previous` (no sign or 2pi jumps).

    Non-finite rotations give non-finite values (the caller decides what to do with them).
    """
    if not all(math.isfinite(c) for row in m for c in row):
        return (math.nan,) * (3 if mode not in ('QUATERNION', 'AXIS_ANGLE') else 4)
    if mode in ('QUATERNION', 'AXIS_ANGLE'):
        return channel_from_quaternion(mode, quat.from_matrix(m), previous)
    return euler_from_matrix(m, mode, previous)


def channel_from_quaternion(mode: str, q: quat.Quat, previous: Sequence[float]) -> tuple[float, ...]:
    """A unit quaternion as a value of the mode's channel, continuous with `previous` (as `channel_from_matrix`)."""
    if mode == 'QUATERNION':
        return compatible_quaternion(q, previous)
    if mode == 'AXIS_ANGLE':
        return axis_angle_from_quaternion(q, previous)
    return euler_from_matrix(quat.to_matrix(q), mode, previous)


def compatible_quaternion(q: quat.Quat, previous: Sequence[float]) -> tuple[float, ...]:
    """Unit q on the side of `previous` (q and -q are the same turn) and scaled to its length, as mathutils'
    `make_compatible` does (a previous value shorter than 1e-4 is ignored)."""
    pw, px, py, pz = previous
    length = math.sqrt(pw * pw + px * px + py * py + pz * pz)
    if not length > 1e-4:  # also a non-finite previous value
        return tuple(q)
    w, x, y, z = q
    if w * pw + x * px + y * py + z * pz < 0.0:
        length = -length
    return (w * length, x * length, y * length, z * length)


def axis_angle_from_quaternion(q: quat.Quat, previous: Sequence[float]) -> tuple[float, float, float, float]:
    """A unit quaternion as (angle, axis x, y, z), with the axis on the side of the previous one and the angle
    the nearest to the previous angle (a zero turn keeps the previous axis, or Y)."""
    w, x, y, z = q
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    s = math.sqrt(x * x + y * y + z * z)
    angle = 2.0 * math.atan2(s, w)  # atan2, not acos: exact for the smallest turns
    old_angle, px, py, pz = (tuple(previous) + (math.nan,) * 4)[:4]
    old = math.sqrt(px * px + py * py + pz * pz)
    has_old = math.isfinite(old) and old > 0.0
    if s > 0.0:
        axis = (x / s, y / s, z / s)
    elif has_old:
        axis = (px / old, py / old, pz / old)
    else:
        axis = (0.0, 1.0, 0.0)
    if has_old and axis[0] * px + axis[1] * py + axis[2] * pz < 0.0:
        axis, angle = (-axis[0], -axis[1], -axis[2]), -angle
    if math.isfinite(old_angle):
        angle += 2.0 * math.pi * round((old_angle - angle) / (2.0 * math.pi))
    return (angle, *axis)


def euler_from_matrix(m, order: str, previous: Sequence[float]) -> tuple[float, float, float]:
    """A 3x3 rotation (rows) as Euler angles (X, Y, Z) of the order ('XYZ' turns about X first), the one of
    its two solutions nearest to `previous` after whole turns are added (as mathutils' compatible Euler)."""
    i, j, k, sign = _EULER_AXES[order]
    cos_b = math.hypot(m[i][i], m[j][i])
    b = math.atan2(-sign * m[k][i], cos_b)
    if cos_b > 1e-12:
        solutions = (
            (math.atan2(sign * m[k][j], m[k][k]), b, math.atan2(sign * m[j][i], m[i][i])),
            (math.atan2(-sign * m[k][j], -m[k][k]), math.atan2(-sign * m[k][i], -cos_b), math.atan2(-sign * m[j][i], -m[i][i])),
        )
    else:  # gimbal lock: only the sum of the first and last turns is known; give it all to the first
        solutions = ((math.atan2(-sign * m[j][k], m[j][j]), b, 0.0),)
    old = tuple(previous)
    compatible = len(old) == 3 and all(math.isfinite(v) for v in old)
    best, best_distance = None, math.inf
    for a, b, c in solutions:
        angles = [0.0, 0.0, 0.0]
        angles[i], angles[j], angles[k] = a, b, c
        if not compatible:
            return tuple(angles)
        angles = [v + math.tau * round((o - v) / math.tau) for v, o in zip(angles, old)]
        distance = abs(angles[0] - old[0]) + abs(angles[1] - old[1]) + abs(angles[2] - old[2])
        if distance < best_distance:
            best, best_distance = tuple(angles), distance
    return best


#: Per Euler order: the indices of its first, second and third axes, and +1 where they are in cyclic order (-1:
#: the mirrored formulas).
_EULER_AXES = {
    order: (*("XYZ".index(axis) for axis in order), 1.0 if ("XYZ".index(order[1]) - "XYZ".index(order[0])) % 3 == 1 else -1.0)
    for order in ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
}


def matrix_rows_of(mode: str, values: np.ndarray) -> np.ndarray:
    """`channel_to_matrix` for many values of one mode at once: (N, size) values, (N, 3, 3) rotations."""
    values = np.asarray(values, dtype=float)
    if mode == 'QUATERNION':
        return matrix_rows.quaternion_to_matrix(values)
    if mode == 'AXIS_ANGLE':
        axis = values[:, 1:]
        size = np.linalg.norm(axis, axis=1)
        # Blender poses a zero axis as no turn; an axis that is not a number gives a rotation that is not one either,
        # as `channel_to_quaternion` gives it for one value.
        turned = size != 0.0
        with np.errstate(invalid="ignore"):
            axis = np.where(turned[:, None], axis / np.where(turned, size, 1.0)[:, None], [0.0, 1.0, 0.0])
        half = np.where(turned, values[:, 0] / 2.0, 0.0)
        return matrix_rows.quaternion_to_matrix(np.column_stack((np.cos(half), axis * np.sin(half)[:, None])))
    return matrix_rows.euler_matrices(values, mode)
