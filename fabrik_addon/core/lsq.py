# SPDX-License-Identifier: GPL-3.0-or-later
"""Damped least squares on small systems in plain floats: the refinement's and settling's steps on a finger, an arm
or a robot, where numpy's cost per call outweighs its loops.

A Jacobian is a list of rows, one per error component, each with a value
per coordinate; the systems solved are as small as the goals' rows (three
for a position goal, six with a rotation goal).
"""

from __future__ import annotations

from operator import mul

__all__ = ["damped_gram", "solve", "transposed_times"]


def damped_gram(rows: list[list[float]], weighted: list[list[float]], damping: float) -> list[list[float]]:
    """`weighted` times the transpose of `rows`, plus damping squared on the diagonal (J W J^T + d^2 I, with the
    weighted rows J W)."""
    m = len(rows)
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
    """x with a x = b, for a small square system (`a` is not changed); zeros where it is singular."""
    m = len(b)
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
    # Gaussian elimination with partial pivoting.
    a = [list(row) for row in a]
    x = list(b)
    for col in range(m):
        pivot = max(range(col, m), key=lambda r: abs(a[r][col]))
        if a[pivot][col] == 0.0:
            return [0.0] * m
        if pivot != col:
            a[col], a[pivot] = a[pivot], a[col]
            x[col], x[pivot] = x[pivot], x[col]
        row = a[col]
        inverse = 1.0 / row[col]
        for r in range(col + 1, m):
            other = a[r]
            f = other[col] * inverse
            if f != 0.0:
                for k in range(col, m):
                    other[k] -= f * row[k]
                x[r] -= f * x[col]
    for col in range(m - 1, -1, -1):
        row = a[col]
        x[col] = (x[col] - sum(map(mul, row[col + 1:], x[col + 1:]))) / row[col]
    return x
