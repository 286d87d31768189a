# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation matrices as numpy rows (N, 3, 3): bone frames, shortest swings, quaternions to matrices and back.

The twin of `quat_rows` for matrices; `quat` holds one quaternion on plain
floats, `rotation_channels` a pose bone's rotation channel values.
"""

from __future__ import annotations

import numpy as np


def frames_from_y(directions: np.ndarray) -> np.ndarray:
    """A frame per unit direction with that direction as Y and a deterministic X."""
    zeros = np.zeros_like(directions)
    return orthonormalized(np.stack((zeros, directions, zeros), axis=2))


def any_perpendicular(y: np.ndarray) -> np.ndarray:
    """Unit vectors perpendicular to unit vectors y (one, or (m, 3)), chosen the same way every time."""
    y = np.asarray(y, dtype=float)
    helper = np.where((np.abs(y[..., 2]) < 0.9)[..., None], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0])
    x = np.cross(y, helper)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def swing_matrix(a: np.ndarray, b: np.ndarray, axis_if_opposite: np.ndarray) -> np.ndarray:
    """The shortest rotation taking unit vector a to unit vector b (a half turn about the given axis if opposite)."""
    d = float(a @ b)
    if d < -1.0 + 1e-6:
        # Near opposite the formula loses precision: half turn about an axis perpendicular
        # to a (which takes a to -a), then the short rest of the way.
        k = axis_if_opposite - a * float(a @ axis_if_opposite)
        k = k / np.linalg.norm(k) if np.linalg.norm(k) > 1e-9 else any_perpendicular(a)
        half_turn = 2.0 * np.outer(k, k) - np.eye(3)
        return swing_matrix(-a, b, k) @ half_turn
    c = np.cross(a, b)
    cx = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
    return np.eye(3) + cx + cx @ cx / (1.0 + d)


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices for quaternions (w, x, y, z) of shape (..., 4)."""
    q = np.asarray(q, dtype=float)
    # Scaled by 2 / |q|^2: the unit quaternion's terms, doubled (one pass over the elements per entry).
    w, x, y, z = np.moveaxis(q, -1, 0)
    s = 2.0 / (w * w + x * x + y * y + z * z)
    xs, ys, zs = x * s, y * s, z * s
    wx, wy, wz = w * xs, w * ys, w * zs
    xx, xy, xz = x * xs, x * ys, x * zs
    yy, yz, zz = y * ys, y * zs, z * zs
    out = np.empty(q.shape[:-1] + (3, 3))
    out[..., 0, 0], out[..., 0, 1], out[..., 0, 2] = 1.0 - (yy + zz), xy - wz, xz + wy
    out[..., 1, 0], out[..., 1, 1], out[..., 1, 2] = xy + wz, 1.0 - (xx + zz), yz - wx
    out[..., 2, 0], out[..., 2, 1], out[..., 2, 2] = xz - wy, yz + wx, 1.0 - (xx + yy)
    return out


def swung_frames(frames: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """Frames (m, 3, 3) turned the shortest way so their Y axes point along unit `directions` (m, 3), made exact:
    only X is turned (Rodrigues on the swing's axis), Y becomes the direction and Z follows."""
    y, x = frames[:, :, 1], frames[:, :, 0]
    d = np.einsum("ij,ij->i", y, directions)
    c = np.cross(y, directions)
    safe = d >= -1.0 + 1e-6
    scale = 1.0 / np.where(safe, 1.0 + d, 1.0)
    along_c = c * np.einsum("ij,ij->i", c, x)[:, None] - x * np.einsum("ij,ij->i", c, c)[:, None]  # c x (c x x)
    turned_x = x + np.cross(c, x) + along_c * scale[:, None]
    out = np.stack((turned_x, directions, turned_x), axis=2)
    for i in np.flatnonzero(~safe):  # nearly a half turn: the careful way
        out[i] = swing_matrix(y[i], directions[i], x[i]) @ frames[i]
    return orthonormalized(out)


def orthonormalized(frames: np.ndarray) -> np.ndarray:
    """Frames (m, 3, 3) made exact rotations, keeping each Y axis' direction (rounding adds up otherwise).

    Where X lies along Y a deterministic perpendicular takes its place.
    """
    y = frames[:, :, 1] / np.linalg.norm(frames[:, :, 1], axis=1)[:, None]
    x = frames[:, :, 0] - y * np.einsum("ij,ij->i", frames[:, :, 0], y)[:, None]
    short = np.linalg.norm(x, axis=1) < 1e-9
    if short.any():
        x[short] = any_perpendicular(y[short])
    x /= np.linalg.norm(x, axis=1)[:, None]
    return np.stack((x, y, np.cross(x, y)), axis=2)


def unit_frames(matrices: np.ndarray) -> np.ndarray:
    """The rotation parts of matrices (..., 3, 3) or (..., 4, 4) with their axes made unit (a pose's scale out)."""
    m = np.asarray(matrices, dtype=float)[..., :3, :3]
    # (a bone scaled to nothing has no frame: NaN, which the callers refuse or skip)
    with np.errstate(invalid="ignore", divide="ignore"):
        return m / np.linalg.norm(m, axis=-2, keepdims=True)


def rotation_vector_matrices(vectors: np.ndarray) -> np.ndarray:
    """Rotation matrices for rotation vectors (m, 3): each turns about its own direction by its length
    (Rodrigues)."""
    theta = np.linalg.norm(vectors, axis=1)
    safe = np.where(theta > 1e-15, theta, 1.0)
    axis = vectors / safe[:, None]
    k = np.zeros((len(vectors), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = axis[:, 2], -axis[:, 1], axis[:, 0]
    s, c = np.sin(theta)[:, None, None], (1.0 - np.cos(theta))[:, None, None]
    return np.eye(3) + s * k + c * (k @ k)


def continuous_quaternions(matrices: np.ndarray) -> np.ndarray:
    """Unit quaternions (F, ..., 4) for rotation matrices (F, ..., 3, 3), their signs kept continuous along the
    first axis (q and -q are the same turn; keys must not jump between them)."""
    m = np.asarray(matrices, dtype=float)
    q = quaternions_from_matrices(m.reshape(-1, 3, 3)).reshape(*m.shape[:-2], 4)
    same_side = np.sign(np.einsum("f...i,f...i->f...", q[1:], q[:-1]))
    same_side[same_side == 0] = 1.0
    q *= np.concatenate((np.ones((1, *q.shape[1:-1])), np.cumprod(same_side, axis=0)))[..., None]
    return q


def quaternions_from_matrices(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) for rotation matrices (N, 3, 3), all at once (Shepperd's method)."""
    m = np.asarray(m, dtype=float)
    m00, m11, m22 = m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]
    # k[a, b] = 4 q_a q_b: the squares from the diagonal, the products from sums and differences of opposite entries.
    k = np.empty((len(m), 4, 4))
    k[:, 0, 0] = 1.0 + m00 + m11 + m22
    k[:, 1, 1] = 1.0 + m00 - m11 - m22
    k[:, 2, 2] = 1.0 - m00 + m11 - m22
    k[:, 3, 3] = 1.0 - m00 - m11 + m22
    k[:, 0, 1] = k[:, 1, 0] = m[:, 2, 1] - m[:, 1, 2]
    k[:, 0, 2] = k[:, 2, 0] = m[:, 0, 2] - m[:, 2, 0]
    k[:, 0, 3] = k[:, 3, 0] = m[:, 1, 0] - m[:, 0, 1]
    k[:, 1, 2] = k[:, 2, 1] = m[:, 0, 1] + m[:, 1, 0]
    k[:, 1, 3] = k[:, 3, 1] = m[:, 0, 2] + m[:, 2, 0]
    k[:, 2, 3] = k[:, 3, 2] = m[:, 1, 2] + m[:, 2, 1]
    # Per matrix, the row of the largest square, divided by twice its root: no cancellation.
    rows = np.arange(len(m))
    case = np.argmax(k[:, (0, 1, 2, 3), (0, 1, 2, 3)], axis=1)
    s = 2.0 * np.sqrt(np.maximum(k[rows, case, case], 1e-300))
    q = k[rows, case] / s[:, None]
    q[rows, case] = 0.25 * s
    return q / np.linalg.norm(q, axis=1)[:, None]


def euler_matrices(angles: np.ndarray, order: str) -> np.ndarray:
    """Rotation matrices (N, 3, 3) for Euler angles (N, 3) in Blender's convention: 'XYZ' turns about X first."""
    angles = np.asarray(angles, dtype=float)
    result = np.broadcast_to(np.eye(3), (len(angles), 3, 3)).copy()
    for axis in order:
        k = "XYZ".index(axis)
        c, s = np.cos(angles[:, k]), np.sin(angles[:, k])
        turn = np.zeros((len(angles), 3, 3))
        i, j = [a for a in range(3) if a != k]
        turn[:, k, k] = 1.0
        turn[:, i, i], turn[:, j, j] = c, c
        turn[:, i, j], turn[:, j, i] = -s, s
        if k == 1:  # about Y the sine signs swap (z x -> right-handed order)
            turn[:, i, j], turn[:, j, i] = s, -s
        result = turn @ result
    return result
