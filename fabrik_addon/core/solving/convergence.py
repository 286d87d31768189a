# SPDX-License-Identifier: GPL-3.0-or-later
"""Solvers side by side: the error after each iteration from the same start, and a plot of it in numpy."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np

from ..model.problem import Goal, SolveSettings
from ..model.skeleton import Pose, Skeleton
from .solvers import SOLVERS

__all__ = ["COLOURS", "COLOUR_NAMES", "COMPARED", "error_curves", "plot_rgba", "reached_at"]

#: The solvers compared by default, in legend order.
COMPARED: tuple[str, ...] = ("FABRIK", "CCD", "JACOBIAN_TRANSPOSE", "DLS")

#: Solver identifier -> RGB (0..1) of its curve; solvers not listed take grey.
COLOURS: dict[str, tuple[float, float, float]] = {
    "FABRIK": (0.95, 0.55, 0.10),
    "CCD": (0.20, 0.70, 0.95),
    "JACOBIAN_TRANSPOSE": (0.35, 0.85, 0.35),
    "DLS": (0.90, 0.30, 0.75),
    "TWO_BONE": (0.95, 0.90, 0.30),
}
#: The same colours in words, for a legend beside the plot (the plot has no font); other solvers: "grey".
COLOUR_NAMES: dict[str, str] = {
    "FABRIK": "orange", "CCD": "blue", "JACOBIAN_TRANSPOSE": "green", "DLS": "magenta", "TWO_BONE": "yellow",
}

_BACKGROUND = (0.12, 0.12, 0.12)
_GRID = (0.25, 0.25, 0.25)
_AXES = (0.65, 0.65, 0.65)
#: Errors are clamped to this before taking log10, so an exact hit still has a place on the plot.
_FLOOR = 1e-12


def error_curves(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None,
    settings: SolveSettings,
    solvers: Sequence[str] = COMPARED,
    iterations: int = 30,
    floor: float | None = None,
) -> dict[str, list[float]]:
    """Per solver, the summed tip-to-target distance after 0, 1, ... `iterations` iterations, each its answer capped
    there (exact for every solver without hooks into its loop); an empty list for a solver that cannot take the
    problem."""
    floor = settings.tolerance * 1e-4 if floor is None else floor
    curves: dict[str, list[float]] = {}
    for name in solvers:
        solve = SOLVERS[name]
        curve: list[float] = []
        try:
            for k in range(iterations + 1):
                capped = replace(settings, max_iterations=k, tolerance=floor)
                _, report = solve(skeleton, goals, start.copy() if start is not None else None, capped)
                curve.append(float(sum(report.errors)))
                if report.converged:
                    # Converged before the cap: a higher cap returns the same pose, so skip the reruns.
                    curve.extend([curve[-1]] * (iterations - k))
                    break
        except ValueError:
            curve = []
        curves[name] = curve
    return curves


def reached_at(curve: Sequence[float], tolerance: float) -> int | None:
    """The first iteration whose summed error is within `tolerance`, or None when none is."""
    return next((k for k, error in enumerate(curve) if error <= tolerance), None)


def plot_rgba(
    curves: dict[str, Sequence[float]], width: int = 480, height: int = 270, tolerance: float | None = None
) -> np.ndarray:
    """Rasterise the curves (log10 error against iteration) into a top-down RGBA float32 image (height, width, 4): a
    colour per solver, a grid, a dashed line at `tolerance` and a legend of boxes (the names are the caller's text:
    there is no font here)."""
    width, height = max(int(width), 32), max(int(height), 32)
    image = np.empty((height, width, 4), np.float32)
    image[..., :3] = _BACKGROUND
    image[..., 3] = 1.0
    left, right, top, bottom = 8, width - 6, 6, height - 8  # plot area, in pixels (y grows downwards)
    drawn = {name: np.asarray(c, float) for name, c in curves.items() if len(c)}
    values = [np.log10(np.maximum(c, _FLOOR)) for c in drawn.values()]
    if tolerance is not None and tolerance > 0:
        values.append(np.array([math.log10(tolerance)]))
    low = math.floor(min((v.min() for v in values), default=-6.0))
    high = math.ceil(max((v.max() for v in values), default=0.0))
    if high <= low:
        high = low + 1
    count = max((len(c) for c in drawn.values()), default=2) - 1
    count = max(count, 1)

    def x_of(k: np.ndarray) -> np.ndarray:
        return left + (right - left) * np.asarray(k, float) / count

    def y_of(log_error: np.ndarray) -> np.ndarray:
        return bottom - (bottom - top) * (np.asarray(log_error, float) - low) / (high - low)

    for decade in range(low, high + 1):
        _hline(image, int(round(float(y_of(decade)))), left, right, _GRID)
    for tenth in range(11):
        _vline(image, int(round(float(x_of(count * tenth / 10)))), top, bottom, _GRID)
    if tolerance is not None and tolerance > 0:
        _hline(image, int(round(float(y_of(math.log10(tolerance))))), left, right, _AXES, dash=4)
    _hline(image, bottom, left, right, _AXES)
    _vline(image, left, top, bottom, _AXES)
    for name, curve in drawn.items():
        colour = COLOURS.get(name, (0.6, 0.6, 0.6))
        xs, ys = x_of(np.arange(len(curve))), y_of(np.log10(np.maximum(curve, _FLOOR)))
        if len(curve) == 1:
            _dot(image, xs[0], ys[0], colour)
        for k in range(len(curve) - 1):
            _segment(image, xs[k], ys[k], xs[k + 1], ys[k + 1], colour)
    box = max(6, min(width, height) // 24)
    for i, name in enumerate(curves):
        x0, y0 = right - box - 4, top + 4 + i * (box + 4)
        image[y0 : y0 + box, x0 : x0 + box, :3] = COLOURS.get(name, (0.6, 0.6, 0.6))
    return image


def _hline(image: np.ndarray, y: int, x0: int, x1: int, colour, dash: int = 0) -> None:
    """A horizontal line (dashed every `dash` pixels when nonzero)."""
    if 0 <= y < image.shape[0]:
        xs = np.arange(x0, x1 + 1)
        if dash:
            xs = xs[(xs // dash) % 2 == 0]
        image[y, xs, :3] = colour


def _vline(image: np.ndarray, x: int, y0: int, y1: int, colour) -> None:
    """A vertical line."""
    if 0 <= x < image.shape[1]:
        image[y0 : y1 + 1, x, :3] = colour


def _dot(image: np.ndarray, x: float, y: float, colour) -> None:
    """A 3x3 dot, for a curve of one point."""
    xi, yi = int(round(x)), int(round(y))
    image[max(yi - 1, 0) : yi + 2, max(xi - 1, 0) : xi + 2, :3] = colour


def _segment(image: np.ndarray, x0: float, y0: float, x1: float, y1: float, colour) -> None:
    """A line two pixels thick, sampled densely enough to leave no gaps."""
    steps = int(max(abs(x1 - x0), abs(y1 - y0))) * 2 + 2
    t = np.linspace(0.0, 1.0, steps)
    xs = np.rint(x0 + (x1 - x0) * t).astype(int)
    ys = np.rint(y0 + (y1 - y0) * t).astype(int)
    h, w = image.shape[:2]
    for dx, dy in ((0, 0), (1, 0), (0, 1)):  # thickened so a curve stays visible when scaled down in the panel
        xi, yi = np.clip(xs + dx, 0, w - 1), np.clip(ys + dy, 0, h - 1)
        image[yi, xi, :3] = colour
