# SPDX-License-Identifier: GPL-3.0-or-later
"""Damped least squares on small systems: the refinement's and settling's steps on a finger, an arm or a robot in
plain floats, where numpy's cost per call outweighs its loops, and with numpy where a system grows.

A Jacobian is a list of rows, one per error component, each with a value
per coordinate; the systems solved have a row per error component (three
for a position goal, three more for a rotation goal, one for each joint
below the floor).
"""

from __future__ import annotations

from operator import mul

import numpy as np

__all__ = ["damped_gram", "damped_gram_plain", "damped_step", "damped_steps", "solve", "transposed_times"]

#: A Jacobian of more entries than this has its Gram matrix multiplied out by numpy.
PLAIN_ENTRIES = 60
#: A damped step of more rows than this is taken by numpy from the Jacobian on (its Gram matrix, the solve and the
#: transpose in three calls, against a loop each).
PLAIN_STEP_ROWS = 3


def damped_gram(rows: np.ndarray, weighted: np.ndarray, damping: float) -> np.ndarray:
    """`weighted` times the transpose of `rows`, plus damping squared on the diagonal (J W J^T + d^2 I, with the
    weighted rows J W), on numpy arrays (`damped_gram_plain` on lists)."""
    gram = weighted @ rows.T
    gram.flat[:: len(gram) + 1] += damping * damping
    return gram


def damped_gram_plain(rows: list[list[float]], weighted: list[list[float]], damping: float) -> list[list[float]]:
    """`damped_gram` on lists of rows (by numpy where the Jacobian has more than PLAIN_ENTRIES entries)."""
    m = len(rows)
    if m and m * len(rows[0]) > PLAIN_ENTRIES:
        return damped_gram(np.array(rows), np.array(weighted), damping).tolist()
    gram = [[0.0] * m for _ in range(m)]
    for i in range(m):
        for k in range(i + 1):
            gram[i][k] = gram[k][i] = sum(map(mul, weighted[i], rows[k]))
        gram[i][i] += damping * damping
    return gram


def damped_step(rows: list[list[float]], e: list[float], damping: float, count: int) -> list[float]:
    """The damped least-squares step J^T (J J^T + d^2 I)^-1 e for the Jacobian's `rows` (each `count` long)."""
    return damped_steps(rows, rows, damping, [e], count)[0]


def damped_steps(
    rows: list[list[float]], weighted: list[list[float]], damping: float, sides: list[list[float]], count: int
) -> list[list[float]]:
    """Per right-hand side b in `sides`, (J W)^T (J W J^T + d^2 I)^-1 b, with the Jacobian's `rows` (each `count`
    long) and its weighted rows J W: the damped least-squares steps of one Gram matrix."""
    if len(rows) <= PLAIN_STEP_ROWS:
        gram = damped_gram_plain(rows, weighted, damping)
        return [transposed_times(weighted, solve(gram, b), count) for b in sides]
    j = np.array(weighted)
    gram = damped_gram(j if weighted is rows else np.array(rows), j, damping)
    try:
        return (j.T @ np.linalg.solve(gram, np.array(sides).T)).T.tolist()
    except np.linalg.LinAlgError:
        return [[0.0] * count for _ in sides]


def transposed_times(rows: list[list[float]], y: list[float], count: int) -> list[float]:
    """The transpose of `rows` (each `count` long) times y."""
    return [sum(map(mul, column, y)) for column in zip(*rows)] if rows else [0.0] * count


def solve(a: list[list[float]], b: list[float]) -> list[float]:
    """x with a x = b, for a small square system (`a` is not changed); zeros where it is singular (larger ones:
    `damped_steps` by numpy)."""
    m = len(b)
    # Gaussian elimination with partial pivoting, as numpy's (a damped Gram matrix of few rows may be nearly
    # singular: Cramer's rule loses its digits there).
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
        for r in range(col + 1, m):
            other = a[r]
            f = other[col] / row[col]
            if f != 0.0:
                for k in range(col, m):
                    other[k] -= f * row[k]
                x[r] -= f * x[col]
    for col in range(m - 1, -1, -1):
        row = a[col]
        x[col] = (x[col] - sum(map(mul, row[col + 1:], x[col + 1:]))) / row[col]
    return x
