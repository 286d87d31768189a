# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotations in numpy: frames, shortest swings and quaternions, batched over bones."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def orthonormalize_y(frames: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
    """Make each 3x3 frame a proper rotation, keeping its Y axis (the bone direction) exact."""
    out = np.empty_like(frames)
    for i, f in enumerate(frames):
        y = f[:, 1]
        ny = np.linalg.norm(y)
        if not np.isfinite(ny) or ny < 1e-9:
            label = names[i] if i < len(names) else str(i)
            raise ValueError(f"bone '{label}' has a rest frame without a usable Y axis")
        y = y / ny
        x = f[:, 0] - y * (f[:, 0] @ y)
        if np.linalg.norm(x) < 1e-9:
            x = _any_perpendicular(y)
        x = x / np.linalg.norm(x)
        out[i] = np.column_stack((x, y, np.cross(x, y)))
    return out


def frames_from_y(directions: np.ndarray) -> np.ndarray:
    """A frame per unit direction with that direction as Y and a deterministic X."""
    frames = np.zeros((len(directions), 3, 3))
    for i, y in enumerate(directions):
        x = _any_perpendicular(y)
        frames[i] = np.column_stack((x, y, np.cross(x, y)))
    return frames


def _any_perpendicular(y: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to unit y, chosen the same way every time."""
    helper = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    x = np.cross(y, helper)
    return x / np.linalg.norm(x)


def swing_matrix(a: np.ndarray, b: np.ndarray, axis_if_opposite: np.ndarray) -> np.ndarray:
    """The shortest rotation taking unit vector a to unit vector b (a half turn about the given axis if opposite)."""
    d = float(a @ b)
    if d < -1.0 + 1e-6:
        # Near opposite the formula loses precision: half turn about an axis perpendicular
        # to a (which takes a to -a), then the short rest of the way.
        k = axis_if_opposite - a * float(a @ axis_if_opposite)
        k = k / np.linalg.norm(k) if np.linalg.norm(k) > 1e-9 else _any_perpendicular(a)
        half_turn = 2.0 * np.outer(k, k) - np.eye(3)
        return swing_matrix(-a, b, k) @ half_turn
    c = np.cross(a, b)
    cx = np.array([[0.0, -c[2], c[1]], [c[2], 0.0, -c[0]], [-c[1], c[0], 0.0]])
    return np.eye(3) + cx + cx @ cx / (1.0 + d)


def matrix_to_quaternion(m: np.ndarray) -> np.ndarray:
    """Quaternions (w, x, y, z) with w >= 0 for rotation matrices of shape (..., 3, 3)."""
    m = np.asarray(m, dtype=float)
    flat = m.reshape(-1, 3, 3)
    q = np.empty((len(flat), 4))
    for i, r in enumerate(flat):
        t = r[0, 0] + r[1, 1] + r[2, 2]
        if t > 0.0:
            s = 2.0 * np.sqrt(1.0 + t)
            q[i] = (0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s)
        elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
            s = 2.0 * np.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2])
            q[i] = ((r[2, 1] - r[1, 2]) / s, 0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s)
        elif r[1, 1] > r[2, 2]:
            s = 2.0 * np.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2])
            q[i] = ((r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s)
        else:
            s = 2.0 * np.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1])
            q[i] = ((r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s)
    q /= np.linalg.norm(q, axis=1)[:, None]
    q[q[:, 0] < 0] *= -1.0
    return q.reshape(m.shape[:-2] + (4,))


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrices for quaternions (w, x, y, z) of shape (..., 4)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack(
        (
            np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)), axis=-1),
            np.stack((2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)), axis=-1),
            np.stack((2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), axis=-1),
        ),
        axis=-2,
    )


def swing_matrices(a: np.ndarray, b: np.ndarray, axes_if_opposite: np.ndarray) -> np.ndarray:
    """`swing_matrix` for many pairs of unit vectors at once: (m, 3) each, result (m, 3, 3)."""
    d = np.einsum("ij,ij->i", a, b)
    c = np.cross(a, b)
    k = np.zeros((len(a), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -c[:, 2], c[:, 1], -c[:, 0]
    k[:, 1, 0], k[:, 2, 0], k[:, 2, 1] = c[:, 2], -c[:, 1], c[:, 0]
    safe = d >= -1.0 + 1e-6
    scale = np.where(safe, 1.0 / np.where(safe, 1.0 + d, 1.0), 0.0)
    out = np.eye(3) + k + (k @ k) * scale[:, None, None]
    for i in np.flatnonzero(~safe):
        out[i] = swing_matrix(a[i], b[i], axes_if_opposite[i])
    return out


def orthonormalized(frames: np.ndarray) -> np.ndarray:
    """Frames (m, 3, 3) made exactly orthonormal again, keeping each Y axis' direction (rounding adds up otherwise)."""
    y = frames[:, :, 1] / np.linalg.norm(frames[:, :, 1], axis=1)[:, None]
    x = frames[:, :, 0] - y * np.einsum("ij,ij->i", frames[:, :, 0], y)[:, None]
    x /= np.linalg.norm(x, axis=1)[:, None]
    return np.stack((x, y, np.cross(x, y)), axis=2)


def quaternions_from_matrices(m: np.ndarray) -> np.ndarray:
    """Unit quaternions (w, x, y, z) for rotation matrices (N, 3, 3), all at once (Shepperd's method)."""
    m = np.asarray(m, dtype=float)
    trace = m[:, 0, 0] + m[:, 1, 1] + m[:, 2, 2]
    # Pick, per matrix, the largest of 4w^2, 4x^2, 4y^2, 4z^2 to divide by: no cancellation.
    diag = np.stack((trace, m[:, 0, 0], m[:, 1, 1], m[:, 2, 2]), axis=1)
    case = np.argmax(diag, axis=1)
    q = np.empty((len(m), 4))
    r = m
    for c in range(4):
        i = case == c
        if not i.any():
            continue
        a = r[i]
        if c == 0:
            s = 2.0 * np.sqrt(1.0 + trace[i])
            q[i] = np.stack((0.25 * s, (a[:, 2, 1] - a[:, 1, 2]) / s, (a[:, 0, 2] - a[:, 2, 0]) / s, (a[:, 1, 0] - a[:, 0, 1]) / s), 1)
        elif c == 1:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 0, 0] - a[:, 1, 1] - a[:, 2, 2], 1e-300))
            q[i] = np.stack(((a[:, 2, 1] - a[:, 1, 2]) / s, 0.25 * s, (a[:, 0, 1] + a[:, 1, 0]) / s, (a[:, 0, 2] + a[:, 2, 0]) / s), 1)
        elif c == 2:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 1, 1] - a[:, 0, 0] - a[:, 2, 2], 1e-300))
            q[i] = np.stack(((a[:, 0, 2] - a[:, 2, 0]) / s, (a[:, 0, 1] + a[:, 1, 0]) / s, 0.25 * s, (a[:, 1, 2] + a[:, 2, 1]) / s), 1)
        else:
            s = 2.0 * np.sqrt(np.maximum(1.0 + a[:, 2, 2] - a[:, 0, 0] - a[:, 1, 1], 1e-300))
            q[i] = np.stack(((a[:, 1, 0] - a[:, 0, 1]) / s, (a[:, 0, 2] + a[:, 2, 0]) / s, (a[:, 1, 2] + a[:, 2, 1]) / s, 0.25 * s), 1)
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
