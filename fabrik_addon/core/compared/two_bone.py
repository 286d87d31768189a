# SPDX-License-Identifier: GPL-3.0-or-later
"""The exact two-bone solution: an upper bone and a connected lower bone, solved by the law of cosines.

With the base (the upper bone's head) fixed, the distance d to the target
decides the angle at the base, cos a = (l1^2 + d^2 - l2^2) / (2 l1 d); what is
left free is the plane the chain bends in:

- the bend axis of the start pose is kept (as nearly as the new target
  allows), so the elbow stays on its side; a straight start bends about the
  upper bone's X axis, as Blender rigs usually do;
- with a pole, the start pose is first turned as one body about the base
  the way Blender's IK turns it (see `pole`), so the chain bends in the
  plane Blender's solver ends in; a straight start, which Blender leaves
  straight, bends towards the turned up vector, so the elbow faces the
  pole. The FABRIK solver does the same.

Each bone turns the shortest way from where it was, so its roll is kept. A
target out of reach gets the chain straight at it (or, too close, folded
towards it). One solve is one analytic step: the iteration settings do not
apply, and stiffness (a per-iteration rate) means nothing here. Joint limits
are not part of the analytic solution: a bone with a limit is projected into
it afterwards (upper bone first, then the lower one re-aimed and projected),
and the report says converged only if the tip is still within tolerance.
The goal's `rotation` is not used.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..goals import pole
from ..math import quat
from ..math.matrix_rows import swing_matrix
from ..math.vec import EPSILON, perpendicular
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, begin
from ..model.skeleton import Pose, Skeleton
from .iterative import pose_with

__all__ = ["solve"]

NEEDS = "the two-bone solver needs exactly one goal on a chain of two connected bones"


def two_bone_chain(skeleton: Skeleton, goals: Sequence[Goal]) -> tuple[int, int]:
    """The (upper, lower) bones of the only goal's chain; ValueError when that is not two connected bones."""
    if len(goals) != 1:
        raise ValueError(f"{NEEDS}, not {len(goals)} goals")
    goal = goals[0]
    path = skeleton.path_to_root(goal.bone)
    chain = path if goal.chain_length == 0 else path[: goal.chain_length]
    name = skeleton.names[goal.bone]
    if len(chain) != 2:
        raise ValueError(f"{NEEDS}; the chain of bone '{name}' has {len(chain)} bone{'s' if len(chain) != 1 else ''}")
    lower, upper = chain
    if skeleton.offsets[lower].any():
        raise ValueError(f"{NEEDS}; bone '{name}' is not connected to '{skeleton.names[upper]}'")
    return upper, lower


def solve(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
) -> tuple[Pose, SolveReport]:
    """Put the goal's bone tip on its target by the law of cosines; return the pose and a report."""
    start, nothing_to_do = begin(skeleton, goals, start, settings)
    if nothing_to_do:
        return nothing_to_do
    upper, lower = two_bone_chain(skeleton, goals)
    goal = goals[0]
    target = np.asarray(goal.target, dtype=float)
    if goal.weight <= 0.0:
        error = float(np.linalg.norm(start.tails[lower] - target))
        reached = error <= settings.tolerance
        return start.copy(), SolveReport(0, [error], reached, "converged" if reached else "stalled")

    base = start.heads[upper]
    l1, l2 = float(skeleton.lengths[upper]), float(skeleton.lengths[lower])
    distance = float(np.linalg.norm(target - base))
    aim = (target - base) / distance if distance > EPSILON else start.frames[upper][:, 1]
    bent, straight_side = start, None  # the pose whose bend is kept; where a straight one bends to
    if goal.pole is not None and distance > EPSILON:
        bent, straight_side = _turned_by_pole(start, upper, lower, goal)
    elbow_direction = _elbow_direction(bent, upper, lower, aim, l1, distance, l2, straight_side)
    upper_frame = _turned(bent.frames[upper], elbow_direction)
    lower_frame = upper_frame @ start.frames[upper].T @ start.frames[lower]
    lower_frame = _aimed(lower_frame, base + l1 * upper_frame[:, 1], target)

    limited = skeleton.limits[upper] is not None or skeleton.limits[lower] is not None
    if limited:
        upper_frame, lower_frame = _within_limits(skeleton, start, upper, lower, upper_frame, lower_frame, target)

    elbow = base + l1 * upper_frame[:, 1]
    pose = pose_with(skeleton, start, [upper, lower], np.array([base, elbow]), np.array([upper_frame, lower_frame]))
    error = float(np.linalg.norm(pose.tails[lower] - target))
    reached = error <= settings.tolerance
    if reached:
        stopped_by = "converged"
    elif distance > l1 + l2 or distance < abs(l1 - l2):
        stopped_by = "unreachable"
    else:
        stopped_by = "stalled"  # the limits held the chain back; the analytic step cannot do better
    return pose, SolveReport(1, [error], reached, stopped_by)


def _turned_by_pole(start: Pose, upper: int, lower: int, goal: Goal) -> tuple[Pose, np.ndarray | None]:
    """The start pose turned as Blender's IK turns it for the goal's pole (the start itself where that is
    undefined), and the turned up vector, the side a straight start bends to."""
    base = start.heads[upper]
    turn = pole.blender_turn(
        base, start.tails[lower], start.frames[upper], np.asarray(goal.target, dtype=float),
        np.asarray(goal.pole, dtype=float), goal.pole_angle,
    )
    if turn is None:
        return start, None
    bent = start.copy()
    bent.heads[[upper, lower]] = base + (start.heads[[upper, lower]] - base) @ turn.T
    bent.frames[[upper, lower]] = turn @ start.frames[[upper, lower]]
    return bent, turn @ pole.up_vector(start.frames[upper], goal.pole_angle)


def _elbow_direction(
    start: Pose, upper: int, lower: int, aim: np.ndarray, l1: float, d: float, l2: float,
    straight_side: np.ndarray | None = None,
) -> np.ndarray:
    """The upper bone's new direction: at the law-of-cosines angle from the aim, on the elbow's side."""
    if d <= EPSILON:
        return aim  # target on the base: any direction is as good, keep the bone's own
    cos_a = min(1.0, max(-1.0, (l1 * l1 + d * d - l2 * l2) / (2.0 * l1 * d)))
    side = np.cross(aim, _bend_axis(start, upper, lower, aim, straight_side))
    return cos_a * aim + math.sqrt(1.0 - cos_a * cos_a) * side


def _bend_axis(
    start: Pose, upper: int, lower: int, aim: np.ndarray, straight_side: np.ndarray | None = None
) -> np.ndarray:
    """The unit axis the chain bends about, perpendicular to the aim: the start's own; for a straight start the
    one that puts the elbow on `straight_side` when given, else the upper bone's X."""
    elbow, tip = start.heads[lower], start.tails[lower]
    candidates = (
        np.cross(elbow - start.heads[upper], tip - elbow),
        start.frames[upper][:, 0],
        start.frames[upper][:, 2],
    )
    if pole.bend_normal((start.heads[upper], elbow, tip)) is None:
        # Straight, as far as single precision tells: no bend of its own. The elbow goes to aim x axis.
        candidates = candidates[1:] if straight_side is None else (np.cross(straight_side, aim),) + candidates[1:]
    for axis in candidates:
        across = axis - aim * (aim @ axis)
        size = float(np.linalg.norm(across))
        if size > 1e-9 * max(1.0, float(np.linalg.norm(axis))):
            return across / size
    return np.asarray(perpendicular(tuple(aim)))


def _turned(frame: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The frame turned the shortest way so that its Y axis points along the unit direction (its roll kept)."""
    return swing_matrix(frame[:, 1], direction, frame[:, 0]) @ frame


def _aimed(frame: np.ndarray, head: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The frame of a bone at `head` turned the shortest way to point at the target (kept if the target is on it)."""
    towards = target - head
    size = float(np.linalg.norm(towards))
    return frame if size <= EPSILON else _turned(frame, towards / size)


def _within_limits(
    skeleton: Skeleton,
    start: Pose,
    upper: int,
    lower: int,
    upper_frame: np.ndarray,
    lower_frame: np.ndarray,
    target: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Project the upper bone into its limit, re-aim the lower bone at the target from its new head, project it."""
    rest = skeleton.rest_frames
    parent = skeleton.parents[upper]
    zero = rest[upper] if parent < 0 else start.frames[parent] @ rest[parent].T @ rest[upper]
    moved = _projected(skeleton.limits[upper], zero, upper_frame)
    lower_frame = moved @ upper_frame.T @ lower_frame
    upper_frame = moved
    lower_frame = _aimed(lower_frame, start.heads[upper] + skeleton.lengths[upper] * upper_frame[:, 1], target)
    zero = upper_frame @ rest[upper].T @ rest[lower]
    return upper_frame, _projected(skeleton.limits[lower], zero, lower_frame)


def _projected(limit: limits.JointLimit | None, zero: np.ndarray, frame: np.ndarray) -> np.ndarray:
    """The frame whose local rotation (relative to the zero frame) is the nearest its limit allows."""
    if limit is None:
        return frame
    local = quat.from_matrix((zero.T @ frame).tolist())
    return zero @ np.array(quat.to_matrix(limits.constrain(limit, local)))
