# SPDX-License-Identifier: GPL-3.0-or-later
"""What every solver takes and returns: goals, settings and the report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .skeleton import Pose, Skeleton


@dataclass(frozen=True)
class Goal:
    """An end effector: the tail of `bone` should reach `target` (armature space)."""

    bone: int
    target: tuple[float, float, float]
    #: The branch weight: where branches meet, how hard this effector pulls the shared bones against the others.
    weight: float = 1.0
    #: The bones that may move, from `bone` upwards (0: up to the root); the bone above the chain stays fixed.
    chain_length: int = 0
    #: The tip bone's wanted frame (a unit quaternion w, x, y, z in armature space; Y along the bone), and how
    #: much it counts.
    rotation: tuple[float, float, float, float] | None = None
    rotation_weight: float = 1.0
    #: A pole point: the chain turns about its base-target line so that its first bone's up vector,
    #: X cos(pole_angle) + Z sin(pole_angle) in the start pose, faces it, as Blender's IK pole does (`pole`).
    pole: tuple[float, float, float] | None = None
    pole_angle: float = 0.0
    #: IK stretch: beyond reach, the chain's bones that have a stretch factor grow, as Blender's do (`stretch`).
    stretch: bool = False


@dataclass(frozen=True)
class SolveSettings:
    """The settings every solver takes; the stopping rules they follow are in `stopping`."""

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
    #: (warm-started animation). Without it, joints with limits that the goals leave free are also
    #: turned towards rest once the goals are reached, so a path that closes brings the pose back.
    explore: bool = True
    restarts: int = 3
    #: Whether the rig goes on from its previous solution frame after frame (Start From: Previous Solution), its
    #: first frame too: a pole then turns a chain as if at rest with its first bone where it stands (`pole.holds`),
    #: not by Blender's rule on the chain as it stands. A frame that goes on from the last (`explore` off) always
    #: does.
    from_previous: bool = False
    #: A plane no tip and no moving joint goes below (`floor.Floor`: a point and a unit normal, armature space),
    #: or None. FABRIK's plan holds it; the comparison solvers and IK stretch leave it out.
    floor: tuple | None = None
    #: A root that may move (`root.Root`), or None: the root stays where the animator put it. FABRIK's plan and
    #: the comparison solvers alike move it; `root.validate` checks it.
    root: tuple | None = None


def warm_poles(settings: SolveSettings) -> bool:
    """Whether poles turn chains as from the previous solution (`SolveSettings.from_previous`)."""
    return settings.from_previous or not settings.explore


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
    #: Per goal, the angle (radians) between the tip bone and its rotation goal; 0 for goals without one.
    rotation_errors: list[float] = field(default_factory=list)
    #: Whether a solve that went on from the last frame's pose turned some joint far from it (`loop.JUMP`).
    jumped: bool = False

    @property
    def max_error(self) -> float:
        """The largest goal error (0 with no goals)."""
        return max(self.errors, default=0.0)


def turned_off(goal: Goal, angle: float, span: float, tolerance: float) -> bool:
    """Whether a goal's tip is turned too far from its rotation goal: only a full-weight rotation goal is a
    requirement (less weight is a blend towards it), and its angle counts as a distance at the chain's reach
    `span`."""
    return goal.rotation is not None and goal.rotation_weight >= 1.0 and angle * span > tolerance


def goal_reached(goal: Goal, error: float, angle: float, span: float, tolerance: float) -> bool:
    """Whether one goal is reached: its tip within tolerance of its target, and not `turned_off` its rotation."""
    return error <= tolerance and not turned_off(goal, angle, span, tolerance)


def joined_report(parts: Sequence[Sequence[int]], reports: Sequence[SolveReport], count: int) -> SolveReport:
    """One report for goals solved in groups (`parts`: each group's goal indices): the most iterations any group
    took, every goal's errors, and the first reason one did not converge."""
    errors, angles = [0.0] * count, [0.0] * count
    iterations = restarts = 0
    stopped = []
    for part, report in zip(parts, reports):
        for g, error, angle in zip(part, report.errors, report.rotation_errors or [0.0] * len(part)):
            errors[g], angles[g] = error, angle
        iterations, restarts = max(iterations, report.iterations), restarts + report.restarts
        if not report.converged:
            stopped.append(report.stopped_by)
    stopped_by = next((why for why in ("unreachable", "stalled", "max_iterations") if why in stopped), "converged")
    report = SolveReport(iterations, errors, not stopped, stopped_by, restarts, angles)
    report.jumped = any(r.jumped for r in reports)
    return report


def validate_goals(skeleton: Skeleton, goals: Sequence[Goal]) -> None:
    """Refuse goals the solvers cannot use, with a message that names the problem."""
    n = len(skeleton)
    for k, goal in enumerate(goals):
        if not 0 <= goal.bone < n:
            raise ValueError(f"goal {k} names bone index {goal.bone}, outside 0..{n - 1}")
        t = goal.target  # (written out, no generator: every solve checks every goal)
        if len(t) != 3 or not (math.isfinite(t[0]) and math.isfinite(t[1]) and math.isfinite(t[2])):
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a target that is not a finite 3D point")
        if not math.isfinite(goal.weight) or goal.weight < 0.0:
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has weight {goal.weight}; use 0 or more")
        if goal.chain_length < 0:
            raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a negative chain length")
        if goal.rotation is not None:
            q = goal.rotation
            if len(q) != 4 or not all(math.isfinite(c) for c in q) or abs(sum(c * c for c in q) - 1.0) > 1e-6:
                raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a rotation that is not a unit quaternion")
            if not (math.isfinite(goal.rotation_weight) and 0.0 <= goal.rotation_weight <= 1.0):
                raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a rotation weight outside 0..1")
        if goal.pole is not None:
            t = goal.pole
            if len(t) != 3 or not (math.isfinite(t[0]) and math.isfinite(t[1]) and math.isfinite(t[2])):
                raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a pole that is not a finite 3D point")
            if not math.isfinite(goal.pole_angle):
                raise ValueError(f"goal {k} (bone '{skeleton.names[goal.bone]}') has a pole angle that is not finite")


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
    if settings.floor is not None:
        point, normal = settings.floor
        if not all(math.isfinite(c) for c in (*point, *normal)) or abs(math.hypot(*normal) - 1.0) > 1e-6:
            raise ValueError("the floor must be a finite point and a unit normal")


def begin(
    skeleton: Skeleton, goals: Sequence[Goal], start: Pose | None, settings: SolveSettings
) -> tuple[Pose, tuple[Pose, SolveReport] | None]:
    """What every solver does first: check the input, default the start to rest; the answer if there is nothing to do."""
    validate_goals(skeleton, goals)
    validate_settings(settings)
    start = skeleton.rest_pose() if start is None else start
    return start, None if goals else (start.copy(), SolveReport(0, [], True, "converged"))
