# SPDX-License-Identifier: GPL-3.0-or-later
"""The solver library: plain Python and numpy, never bpy or mathutils."""

from .model.problem import Goal, SolveReport, SolveSettings
from .model.skeleton import Pose, Skeleton, skeleton_from_points
from .solve.plan import solve
from .solve.solvers import DESCRIPTIONS, SOLVERS

__all__ = [
    "DESCRIPTIONS", "Goal", "Pose", "SOLVERS", "Skeleton", "SolveReport", "SolveSettings", "skeleton_from_points", "solve",
]
