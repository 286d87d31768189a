# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit quaternions (w, x, y, z) in numpy arrays of shape (N, 4): the batched twins of `quat`.

Each function does what its namesake in `quat` does, row by row, with the same
arithmetic in the same order, so a batch of frames agrees with the per-frame
solver to rounding.
"""

from __future__ import annotations

import numpy as np

from . import matrix_rows
from .vec import EPSILON


def mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotations b followed by a."""
    aw, ax, ay, az = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
    bw, bx, by, bz = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=1,
    )


def conj(q: np.ndarray) -> np.ndarray:
    """The inverse rotations."""
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def normalized(q: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length."""
    return q / np.sqrt(np.einsum("ij,ij->i", q, q))[:, None]


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each v turned by its q."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    v0, v1, v2 = v[:, 0], v[:, 1], v[:, 2]
    tx = 2.0 * (y * v2 - z * v1)
    ty = 2.0 * (z * v0 - x * v2)
    tz = 2.0 * (x * v1 - y * v0)
    return np.stack((v0 + w * tx + y * tz - z * ty, v1 + w * ty + z * tx - x * tz, v2 + w * tz + x * ty - y * tx), axis=1)


def x_axis(q: np.ndarray) -> np.ndarray:
    """Each frame's X axis."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack((1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y + w * z), 2.0 * (x * z - w * y)), axis=1)


def y_axis(q: np.ndarray) -> np.ndarray:
    """Each frame's Y axis (the bone direction)."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack((2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x)), axis=1)


def arc(a: np.ndarray, b: np.ndarray, axis_if_opposite: np.ndarray) -> np.ndarray:
    """The shortest rotations taking unit a to unit b (a half turn about the given axis where opposite)."""
    d = np.einsum("ij,ij->i", a, b)
    c = np.cross(a, b)
    w = 1.0 + d
    out = np.column_stack((w, c))
    out /= np.sqrt(w * w + np.einsum("ij,ij->i", c, c))[:, None]
    opposite = d < -1.0 + 1e-12
    if opposite.any():
        out[opposite] = _half_turns(a[opposite], axis_if_opposite[opposite])
    return out


def _half_turns(a: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """Half turns about the given axes made perpendicular to a (a fixed perpendicular where they lie along a)."""
    k = axis - np.einsum("ij,ij->i", a, axis)[:, None] * a
    n = np.sqrt(np.einsum("ij,ij->i", k, k))
    along = n < 1e-9
    if along.any():
        k[along], n[along] = matrix_rows.any_perpendicular(a[along]), 1.0
    return np.column_stack((np.zeros(len(a)), k / n[:, None]))


def reach(fixed: np.ndarray, toward: np.ndarray, length, fallback: np.ndarray) -> np.ndarray:
    """FABRIK's move, row by row: the point at `length` from `fixed` towards `toward`.

    Where the two points meet (the line is undefined) the result is
    `fixed + fallback`, as the per-frame solver keeps the bone's previous vector.
    """
    d = toward - fixed
    n = np.sqrt(np.einsum("ij,ij->i", d, d))
    degenerate = n < EPSILON
    out = fixed + d * (length / np.where(degenerate, 1.0, n))[:, None]
    if degenerate.any():
        out[degenerate] = fixed[degenerate] + fallback[degenerate]
    return out
