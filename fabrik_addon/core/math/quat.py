# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit quaternions (w, x, y, z) as plain float tuples, for the solver's inner loops.

Frames are rotations whose columns are a bone's X, Y, Z axes; Y is the bone.
"""

from __future__ import annotations

import math

from .vec import Vec

Quat = tuple[float, float, float, float]

IDENTITY: Quat = (1.0, 0.0, 0.0, 0.0)


def mul(a: Quat, b: Quat) -> Quat:
    """The rotation b followed by a."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def mul_unit(a: Quat, b: Quat) -> Quat:
    """The rotation b followed by a, scaled to unit length (`normalized(mul(a, b))` in one call: a or b may be a
    rotation scaled by any length)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    w = aw * bw - ax * bx - ay * by - az * bz
    x = aw * bx + ax * bw + ay * bz - az * by
    y = aw * by - ax * bz + ay * bw + az * bx
    z = aw * bz + ax * by - ay * bx + az * bw
    n = math.sqrt(w * w + x * x + y * y + z * z)
    return (w / n, x / n, y / n, z / n)


def conj(q: Quat) -> Quat:
    """The inverse rotation."""
    return (q[0], -q[1], -q[2], -q[3])


def normalized(q: Quat) -> Quat:
    """q scaled to unit length."""
    n = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


def rotate(q: Quat, v: Vec) -> Vec:
    """v turned by q."""
    w, x, y, z = q
    # t = 2 q.xyz x v ; v' = v + w t + q.xyz x t
    tx = 2.0 * (y * v[2] - z * v[1])
    ty = 2.0 * (z * v[0] - x * v[2])
    tz = 2.0 * (x * v[1] - y * v[0])
    return (
        v[0] + w * tx + y * tz - z * ty,
        v[1] + w * ty + z * tx - x * tz,
        v[2] + w * tz + x * ty - y * tx,
    )


def y_axis(q: Quat) -> Vec:
    """The frame's Y axis (the bone direction)."""
    w, x, y, z = q
    return (2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x))


def x_axis(q: Quat) -> Vec:
    """The frame's X axis."""
    w, x, y, z = q
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y))


def z_axis(q: Quat) -> Vec:
    """The frame's Z axis."""
    w, x, y, z = q
    return (2.0 * (x * z + w * y), 2.0 * (y * z - w * x), 1.0 - 2.0 * (x * x + y * y))


def arc(a: Vec, b: Vec, axis_if_opposite: Vec) -> Quat:
    """The shortest rotation taking unit a to unit b (a half turn about the given axis when opposite)."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
    if d < -1.0 + 1e-12:
        # A half turn about an axis perpendicular to a.
        kd = a[0] * axis_if_opposite[0] + a[1] * axis_if_opposite[1] + a[2] * axis_if_opposite[2]
        k = (axis_if_opposite[0] - kd * a[0], axis_if_opposite[1] - kd * a[1], axis_if_opposite[2] - kd * a[2])
        n = math.sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2])
        if n < 1e-9:
            helper = (0.0, 0.0, 1.0) if abs(a[2]) < 0.9 else (1.0, 0.0, 0.0)
            k = (a[1] * helper[2] - a[2] * helper[1], a[2] * helper[0] - a[0] * helper[2], a[0] * helper[1] - a[1] * helper[0])
            n = math.sqrt(k[0] * k[0] + k[1] * k[1] + k[2] * k[2])
        return (0.0, k[0] / n, k[1] / n, k[2] / n)
    cx, cy, cz = a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]
    w = 1.0 + d
    n = math.sqrt(w * w + cx * cx + cy * cy + cz * cz)
    return (w / n, cx / n, cy / n, cz / n)


def turned(frame: Quat, a: Vec, b: Vec) -> Quat:
    """A unit frame turned by `arc(a, b)` (a half turn about its own X axis made perpendicular to a where b is
    opposite): the arc and the product made unit once, as the product of a unit frame has the arc's length."""
    ax, ay, az = a
    bx, by, bz = b
    d = ax * bx + ay * by + az * bz
    if d < -1.0 + 1e-12:
        return normalized(mul(arc(a, b, x_axis(frame)), frame))
    return mul_unit((1.0 + d, ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx), frame)


def swing_twist(q: Quat) -> tuple[float, float, float]:
    """Split a local rotation into a swing (a turn about an axis in the XZ plane) after a twist about Y.

    Returns (swing_x, swing_z, twist): the swing as a rotation vector's X and Z
    components (angle times unit axis, radians) and the twist angle in (-pi, pi].
    """
    w, x, y, z = q
    if w < 0.0:
        w, x, y, z = -w, -x, -y, -z
    tn = math.sqrt(w * w + y * y)
    if tn < 1e-12:
        # Swing of exactly half a turn: any twist fits; call it none.
        tw, ty = 1.0, 0.0
    else:
        tw, ty = w / tn, y / tn
    twist = 2.0 * math.atan2(ty, tw)
    # swing = q * conj(twist); its Y component is zero
    sw = w * tw + y * ty
    sx = x * tw + z * ty
    sz = z * tw - x * ty
    s = math.sqrt(sx * sx + sz * sz)
    if s < 1e-15:
        return 0.0, 0.0, twist
    angle = 2.0 * math.atan2(s, sw)
    return angle * sx / s, angle * sz / s, twist


def from_swing_twist(swing_x: float, swing_z: float, twist: float) -> Quat:
    """The local rotation: the twist about Y, then the swing given as a rotation vector in the XZ plane."""
    angle = math.sqrt(swing_x * swing_x + swing_z * swing_z)
    if angle < 1e-15:
        sw, sx, sz = 1.0, 0.0, 0.0
    else:
        f = math.sin(angle / 2.0) / angle
        sw, sx, sz = math.cos(angle / 2.0), swing_x * f, swing_z * f
    tw, ty = math.cos(twist / 2.0), math.sin(twist / 2.0)
    # swing * twist with swing = (sw, sx, 0, sz), twist = (tw, 0, ty, 0)
    return (sw * tw, sx * tw - sz * ty, sw * ty, sx * ty + sz * tw)


def from_matrix(m) -> Quat:
    """A unit quaternion for a 3x3 rotation given as nested sequences (rows)."""
    trace = m[0][0] + m[1][1] + m[2][2]
    if trace > 0.0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = (0.25 * s, (m[2][1] - m[1][2]) / s, (m[0][2] - m[2][0]) / s, (m[1][0] - m[0][1]) / s)
    elif m[0][0] > m[1][1] and m[0][0] > m[2][2]:
        s = 2.0 * math.sqrt(1.0 + m[0][0] - m[1][1] - m[2][2])
        q = ((m[2][1] - m[1][2]) / s, 0.25 * s, (m[0][1] + m[1][0]) / s, (m[0][2] + m[2][0]) / s)
    elif m[1][1] > m[2][2]:
        s = 2.0 * math.sqrt(1.0 + m[1][1] - m[0][0] - m[2][2])
        q = ((m[0][2] - m[2][0]) / s, (m[0][1] + m[1][0]) / s, 0.25 * s, (m[1][2] + m[2][1]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2][2] - m[0][0] - m[1][1])
        q = ((m[1][0] - m[0][1]) / s, (m[0][2] + m[2][0]) / s, (m[1][2] + m[2][1]) / s, 0.25 * s)
    return normalized(q)


def to_matrix(q: Quat) -> tuple[Vec, Vec, Vec]:
    """The 3x3 rotation (rows) of a unit quaternion."""
    w, x, y, z = q
    return (
        (1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)),
        (2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)),
        (2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)),
    )


def slerp(a: Quat, b: Quat, t: float) -> Quat:
    """The rotation t of the way from a to b along the shorter arc."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    if d < 0.0:
        b, d = (-b[0], -b[1], -b[2], -b[3]), -d
    if d > 0.9995:
        return normalized(tuple(x + t * (y - x) for x, y in zip(a, b)))
    theta = math.acos(d)
    sa, sb = math.sin((1.0 - t) * theta), math.sin(t * theta)
    s = math.sin(theta)
    return (
        (a[0] * sa + b[0] * sb) / s,
        (a[1] * sa + b[1] * sb) / s,
        (a[2] * sa + b[2] * sb) / s,
        (a[3] * sa + b[3] * sb) / s,
    )


def angle_between(a: Quat, b: Quat) -> float:
    """The angle (radians, 0..pi) of the rotation taking frame a to frame b."""
    d = abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
    return 2.0 * math.acos(min(1.0, d))


def log(q: Quat) -> Vec:
    """The rotation vector (axis times angle, the short way round) of a unit quaternion."""
    if q[0] < 0.0:
        q = (-q[0], -q[1], -q[2], -q[3])
    s = math.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if s < 1e-15:
        return (0.0, 0.0, 0.0)
    angle = 2.0 * math.atan2(s, q[0])
    return (q[1] * angle / s, q[2] * angle / s, q[3] * angle / s)


def exp(w: Vec) -> Quat:
    """The unit quaternion of a rotation vector."""
    a = math.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    if a < 1e-15:
        return IDENTITY
    s = math.sin(a / 2.0) / a
    return (math.cos(a / 2.0), w[0] * s, w[1] * s, w[2] * s)


def about_axis(axis: Vec, angle: float) -> Quat:
    """The rotation by angle (radians) about a unit axis."""
    s = math.sin(angle / 2.0)
    return (math.cos(angle / 2.0), axis[0] * s, axis[1] * s, axis[2] * s)
