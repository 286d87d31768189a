# SPDX-License-Identifier: GPL-3.0-or-later
"""Damped least squares on small systems: the refinement's and settling's steps on a finger, an arm or a robot in
plain floats, where numpy's cost per call outweighs its loops, and with numpy where a system grows.

A Jacobian is a list of rows, one per error component, each with a value
per coordinate; the systems solved are as small as the goals' rows (three
for a position goal, six with a rotation goal).
"""

from __future__ import annotations

from operator import mul

import numpy as np

__all__ = ["damped_gram", "solve", "transposed_times"]

#: A Jacobian of more entries than this has its Gram matrix multiplied out by numpy.
PLAIN_ENTRIES = 60


def damped_gram(rows: list[list[float]], weighted: list[list[float]], damping: float) -> list[list[float]]:
    """`weighted` times the transpose of `rows`, plus damping squared on the diagonal (J W J^T + d^2 I, with the
    weighted rows J W)."""
    m = len(rows)
    if m and m * len(rows[0]) > PLAIN_ENTRIES:
        gram = np.array(weighted) @ np.array(rows).T
        gram[np.diag_indices(m)] += damping * damping
        return gram.tolist()
    gram = [[0.0] * m for _ in range(m)]
    for i in range(m):
        for k in range(i + 1):
            gram[i][k] = gram[k][i] = sum(map(mul, weighted[i], rows[k]))
        gram[i][i] += damping * damping
    return gram


def transposed_times(rows: list[list[float]], y: list[float]) -> list[float]:
    """The transpose of `rows` times y."""
    return [sum(map(mul, column, y)) for column in zip(*rows)] if rows else []


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b, for a small square system; zeros where it is singular."""
    m = len(b)
    if m == 0:
        return []
    if m == 3:  # (a position goal's rows: Cramer's rule)
        (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = a
        m0, m1, m2 = b1 * c2 - b2 * c1, b2 * c0 - b0 * c2, b0 * c1 - b1 * c0
        det = a0 * m0 + a1 * m1 + a2 * m2
        if det == 0.0:
            return [0.0] * 3
        x0, x1, x2 = b
        return [
            (x0 * m0 + x1 * (a2 * c1 - a1 * c2) + x2 * (a1 * b2 - a2 * b1)) / det,
            (x0 * m1 + x1 * (a0 * c2 - a2 * c0) + x2 * (a2 * b0 - a0 * b2)) / det,
            (x0 * m2 + x1 * (a1 * c0 - a0 * c1) + x2 * (a0 * b1 - a1 * b0)) / det,
        ]
    try:  # (larger systems: numpy's elimination costs less than a loop's from six rows up)
        return np.linalg.solve(np.array(a), np.array(b)).tolist()
    except np.linalg.LinAlgError:
        return [0.0] * m
