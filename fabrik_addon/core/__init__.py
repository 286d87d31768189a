# SPDX-License-Identifier: GPL-3.0-or-later
"""The solver library: plain Python and numpy, never bpy or mathutils."""

from .model.problem import Goal, SolveReport, SolveSettings
from .model.skeleton import Pose, Skeleton, skeleton_from_points
from .solving.plan import solve
from .solving.solvers import DESCRIPTIONS, SOLVERS

__all__ = [
    "DESCRIPTIONS", "Goal", "Pose", "SOLVERS", "Skeleton", "SolveReport", "SolveSettings", "skeleton_from_points", "solve",
]
