# SPDX-License-Identifier: GPL-3.0-or-later
"""Small 3-vector helpers on plain float tuples.

The solver moves one joint at a time, and on single 3-vectors plain tuples
beat numpy's per-call cost (docs/benchmarks.md, "How the code computes"), so
the inner loops use these and numpy is kept for work that batches.
"""

from __future__ import annotations

import math

Vec = tuple[float, float, float]

#: Below this length a direction is treated as undefined (coincident joints).
EPSILON = 1e-12


def add(a: Vec, b: Vec) -> Vec:
    """a + b."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub(a: Vec, b: Vec) -> Vec:
    """a - b."""
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def scale(a: Vec, s: float) -> Vec:
    """a * s."""
    return (a[0] * s, a[1] * s, a[2] * s)


def dot(a: Vec, b: Vec) -> float:
    """a . b."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a: Vec, b: Vec) -> Vec:
    """a x b."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm(a: Vec) -> float:
    """Euclidean length of a."""
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def dist(a: Vec, b: Vec) -> float:
    """Distance between points a and b."""
    x, y, z = a[0] - b[0], a[1] - b[1], a[2] - b[2]
    return math.sqrt(x * x + y * y + z * z)


def reach(fixed: Vec, toward: Vec, length: float) -> Vec | None:
    """The point at `length` from `fixed` on the line towards `toward` (FABRIK's one move).

    None when the two points coincide, so the line is undefined; the caller
    then keeps the bone's previous direction.
    """
    dx, dy, dz = toward[0] - fixed[0], toward[1] - fixed[1], toward[2] - fixed[2]
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    if d < EPSILON:
        return None
    s = length / d
    return (fixed[0] + dx * s, fixed[1] + dy * s, fixed[2] + dz * s)


def perpendicular(a: Vec) -> Vec:
    """A unit vector perpendicular to unit a, chosen the same way every time."""
    helper = (0.0, 0.0, 1.0) if abs(a[2]) < 0.9 else (1.0, 0.0, 0.0)
    c = cross(a, helper)
    return scale(c, 1.0 / norm(c))
