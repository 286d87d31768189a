# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit quaternions (w, x, y, z) for many rotations at once: numpy arrays of shape (4, N), components first.

The twin of `quat` (one quaternion on plain floats): each function does what
its namesake there does, for every column, with the same arithmetic in the
same order, so many frames solved together agree with one solved alone to
rounding. Vectors are (3, N) likewise: one component over all N is one
contiguous row, which keeps numpy's cost per call low on small arrays.
"""

from __future__ import annotations

import numpy as np

from . import matrix_rows
from .vec import EPSILON

_CONJ = np.array([[1.0], [-1.0], [-1.0], [-1.0]])


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotations b followed by a."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ))


def conj(q: np.ndarray) -> np.ndarray:
    """The inverse rotations."""
    return q * _CONJ


def normalized(q: np.ndarray) -> np.ndarray:
    """Each column scaled to unit length."""
    return q / np.sqrt((q * q).sum(axis=0))


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each v turned by its q."""
    w, x, y, z = q
    v0, v1, v2 = v
    tx = 2.0 * (y * v2 - z * v1)
    ty = 2.0 * (z * v0 - x * v2)
    tz = 2.0 * (x * v1 - y * v0)
    return np.array((v0 + w * tx + y * tz - z * ty, v1 + w * ty + z * tx - x * tz, v2 + w * tz + x * ty - y * tx))


def x_axis(q: np.ndarray) -> np.ndarray:
    """Each frame's X axis."""
    w, x, y, z = q
    return np.array((1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y)))


def y_axis(q: np.ndarray) -> np.ndarray:
    """Each frame's Y axis (the bone direction)."""
    w, x, y, z = q
    return np.array((2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)))


def arc(a: np.ndarray, b: np.ndarray, axis_if_opposite: np.ndarray) -> np.ndarray:
    """The shortest rotations taking unit a to unit b (a half turn about the given axis where opposite)."""
    d = (a * b).sum(axis=0)
    c = np.cross(a, b, axis=0)
    w = 1.0 + d
    out = np.concatenate((w[None], c))
    out /= np.sqrt(w * w + (c * c).sum(axis=0))
    opposite = d < -1.0 + 1e-12
    if opposite.any():
        out[:, opposite] = _half_turns(a[:, opposite], axis_if_opposite[:, opposite])
    return out


def _half_turns(a: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Half turns about the given axes made perpendicular to a (a fixed perpendicular where they lie along a)."""
    k = axis - (a * axis).sum(axis=0) * a
    n = np.sqrt((k * k).sum(axis=0))
    along = n < 1e-9
    if along.any():
        k[:, along], n[along] = matrix_rows.any_perpendicular(a[:, along].T).T, 1.0
    return np.concatenate((np.zeros((1, a.shape[1])), k / n))


def reach(fixed: np.ndarray, toward: np.ndarray, length, fallback, out: np.ndarray | None = None) -> np.ndarray:
    """FABRIK's move for every column: the point at `length` from `fixed` towards `toward`, written into `out` where
    given; where the two points meet, `fixed + fallback()`, as one frame alone keeps the bone's previous vector."""
    d = toward - fixed
    n = np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2])
    if n.size and n.min() < EPSILON:
        degenerate = n < EPSILON
        kept = fallback()
        n[degenerate] = 1.0
        d *= length / n
        d[:, degenerate] = kept[:, degenerate]
    else:
        d *= length / n
    return np.add(fixed, d, out=out)
