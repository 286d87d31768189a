# SPDX-License-Identifier: GPL-3.0-or-later
"""What every solver takes and returns: goals, settings and the report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .skeleton import Skeleton


@dataclass(frozen=True)
class Goal:
    """An end effector: the tail of `bone` should reach `target` (armature space).

    `chain_length` counts the bones that may move, from `bone` upwards
    (0 = all the way to the root); the bone above the chain stays fixed.
    `weight` is the branch weight: where branches meet, it decides how hard
    this effector pulls the shared bones compared with the others.
    """

    bone: int
    target: tuple[float, float, float]
    weight: float = 1.0
    chain_length: int = 0


@dataclass(frozen=True)
class SolveSettings:
    """Stopping rules shared by the solvers."""

    max_iterations: int = 50
    #: An effector is reached when its tip is within this distance of its target (armature units).
    tolerance: float = 1e-4
    #: Stop when one iteration lowers the summed error by less than this fraction of it.
    stall_fraction: float = 1e-5
    #: How many iterations in a row may fail to do that before the solve stops (the best pose is kept).
    patience: int = 10
    #: With limits or unconnected bones, when the careful descent from the start pose gets stuck,
    #: let plain FABRIK wander and then try `restarts` other start poses inside the limits. This
    #: reaches more targets, but the pose may jump far from the start; turn it off for continuity
    #: (warm-started animation).
    explore: bool = True
    restarts: int = 3


@dataclass
class SolveReport:
    """What a solve did: iterations, the error of each goal, and why it stopped."""

    iterations: int
    errors: list[float] = field(default_factory=list)
    converged: bool = False
    #: "converged", "unreachable", "stalled" or "max_iterations".
    stopped_by: str = "converged"
    #: How many other start poses were tried (joint limits only).
    restarts: int = 0

    @property
    def max_error(self) -> float:
        """The largest goal error (0 with no goals)."""
        return max(self.errors, default=0.0)


def validate_goals(skeleton: Skeleton, goals: Sequence[Goal]) -> None:
    """Refuse goals the solvers cannot use, with a message that names the problem."""
    n = len(skeleton)
    for k, goal in enumerate(goals):
        if not 0 <= goal.bone < n:
            raise ValueError(f"goal {k} names bone index {goal.bone}, outside 0..{n - 1}")
        if len(goal.target) != 3 or not all(math.isfinite(c) for c in goal.target):
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a target that is not a finite 3D point")
        if not math.isfinite(goal.weight) or goal.weight < 0.0:
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has weight {goal.weight}; use 0 or more")
        if goal.chain_length < 0:
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a negative chain length")


def validate_settings(settings: SolveSettings) -> None:
    """Refuse settings that would make a solve meaningless."""
    if settings.max_iterations < 0:
        raise ValueError("max_iterations must be 0 or more")
    if not (math.isfinite(settings.tolerance) and settings.tolerance >= 0.0):
        raise ValueError("tolerance must be a finite number, 0 or more")
    if settings.restarts < 0:
        raise ValueError("restarts must be 0 or more")
    if settings.patience < 1:
        raise ValueError("patience must be 1 or more")
    if not (math.isfinite(settings.stall_fraction) and settings.stall_fraction >= 0.0):
        raise ValueError("stall_fraction must be a finite number, 0 or more")
