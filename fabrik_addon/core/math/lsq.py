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
        solved = _three(gram, sides) if len(gram) == 3 else None
        if solved is None:
            return [transposed_times(weighted, solve(gram, b), count) for b in sides]
        r0, r1, r2 = weighted
        return [[a * y0 + b * y1 + c * y2 for a, b, c in zip(r0, r1, r2)] for y0, y1, y2 in solved]
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


def _three(a: list[list[float]], sides: list[list[float]]) -> list[list[float]] | None:
    """x with a x = b for each b, a a 3x3 symmetric positive definite matrix (one position goal's damped Gram
    matrix: Cholesky's factors written out, half the work of elimination); None where it is not positive
    definite."""
    d0 = a[0][0]
    if not d0 > 0.0:
        return None
    l00 = d0 ** 0.5
    l10, l20 = a[1][0] / l00, a[2][0] / l00
    d1 = a[1][1] - l10 * l10
    if not d1 > 0.0:
        return None
    l11 = d1 ** 0.5
    l21 = (a[2][1] - l20 * l10) / l11
    d2 = a[2][2] - l20 * l20 - l21 * l21
    if not d2 > 0.0:
        return None
    l22 = d2 ** 0.5
    out = []
    for b0, b1, b2 in sides:
        y0 = b0 / l00
        y1 = (b1 - l10 * y0) / l11
        y2 = (b2 - l20 * y0 - l21 * y1) / l22
        x2 = y2 / l22
        x1 = (y1 - l21 * x2) / l11
        out.append([(y0 - l10 * x1 - l20 * x2) / l00, x1, x2])
    return out
