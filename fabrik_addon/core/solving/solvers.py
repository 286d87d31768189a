# SPDX-License-Identifier: GPL-3.0-or-later
"""The IK solvers the add-on offers, by identifier, all called as solve(skeleton, goals, start, settings)."""

from __future__ import annotations

from ..compared.alternatives import ALTERNATIVES, Solver
from . import plan

__all__ = ["DESCRIPTIONS", "SOLVERS", "Solver"]

#: Identifier -> solve function; every one takes (skeleton, goals, start=None, settings=SolveSettings()).
#: FABRIK's plan applies IK stretch itself; the others (`alternatives`) run on the stretched skeleton.
SOLVERS: dict[str, Solver] = {"FABRIK": plan.solve, **ALTERNATIVES}

#: Identifier -> (label, one-line description), in the order the UI lists them.
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "FABRIK": ("FABRIK", "Forward and backward reaching: fast, handles trees, limits, rotation and pole targets"),
    "CCD": ("CCD", "Cyclic coordinate descent: turns one bone at a time towards the target; position goals only"),
    "JACOBIAN_TRANSPOSE": (
        "Jacobian Transpose",
        "Gradient steps along the transposed Jacobian: simple, smooth, slower to converge; position goals only",
    ),
    "DLS": (
        "Damped Least Squares",
        "Levenberg-Marquardt steps: stable near straight poses, few iterations; position goals only",
    ),
    "TWO_BONE": (
        "Two-Bone (Analytic)",
        "Exact law-of-cosines solution for one goal on two connected bones, with pole; limits clamp afterwards",
    ),
}
