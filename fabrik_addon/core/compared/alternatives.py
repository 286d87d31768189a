# SPDX-License-Identifier: GPL-3.0-or-later
"""The solvers beside FABRIK, for comparison: each takes the whole rig, on the skeleton IK stretch grows."""

from __future__ import annotations

from typing import Callable, Sequence

from ..goals.stretch import supporting
from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Pose, Skeleton
from . import ccd, jacobian, two_bone

__all__ = ["ALTERNATIVES", "Solver"]

Solver = Callable[[Skeleton, Sequence[Goal], Pose | None, SolveSettings], tuple[Pose, SolveReport]]

#: Identifier -> solve function, each taking (skeleton, goals, start=None, settings=SolveSettings()).
ALTERNATIVES: dict[str, Solver] = {
    "CCD": supporting(ccd.solve),
    "JACOBIAN_TRANSPOSE": supporting(jacobian.solve_transpose),
    "DLS": supporting(jacobian.solve_dls),
    "TWO_BONE": supporting(two_bone.solve),
}
