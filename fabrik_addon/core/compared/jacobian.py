# SPDX-License-Identifier: GPL-3.0-or-later
"""Jacobian inverse kinematics: the Jacobian transpose and damped least squares (DLS).

Buss, "Introduction to inverse kinematics with Jacobian transpose,
pseudoinverse and damped least squares methods" (2004). Every moving bone is a
ball joint at its head with three degrees of freedom, small turns about the
world X, Y and Z axes. Turning bone k by the rotation vector w moves the tip of
an effector below it by w x (tip - head_k), so the Jacobian of all effector
tips with respect to all joints is made of 3x3 blocks -[tip - head_k]x. Each
iteration linearises there and takes one step:

- transpose: dtheta = alpha J^T e, with alpha = <e, J J^T e> / |J J^T e|^2, the
  step length that best reduces the error along that direction;
- DLS (Levenberg-Marquardt): dtheta = J^T (J J^T + lambda^2 I)^-1 e, where the
  damping lambda (proportional to the chains' reach, so it has the units of
  length that J carries) keeps the step bounded near singular poses.

A goal's rows are scaled by the square root of its branch weight, so each
solver lowers the weighted sum of squared errors (weight 0: the goal is left
out). A goal only pulls the bones of its own chain: its rows are zero for the
other bones. No joint turns by more than `MAX_STEP` radians per iteration,
and after each step every limited bone's local rotation is projected into
its limit, as in the CCD solver, whose working state and loop these share.

Only position goals are used: the goals' `rotation` and `pole` are ignored.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Pose, Skeleton
from .iterative import Effectors, Rig, solve_iteratively

__all__ = ["DAMPING", "MAX_STEP", "solve_dls", "solve_transpose"]

#: DLS damping lambda as a fraction of the longest chain's reach.
DAMPING = 0.1
#: The largest turn of any joint in one iteration, in radians (larger steps are scaled down as a whole).
MAX_STEP = 0.2
#: The turn that bends a chain out of a singular pose (straight, with the target on its line).
NUDGE = 0.1


def jacobian(rig: Rig, effectors: Effectors) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The weighted Jacobian (3 rows per pulling goal, 3 columns per node) and error vector, and the goals' order."""
    active = [g for g in range(len(effectors.nodes)) if effectors.weights[g] > 0.0]
    m = len(rig.bones)
    tips = rig.tips(effectors.nodes[active])
    blocks = np.zeros((len(active), 3, m, 3))
    for row, g in enumerate(active):
        chain = effectors.chains[g]
        r = tips[row] - rig.heads[chain]
        # d tip / d w = -[r]x, the cross-product matrix of r with the sign turned
        block = np.zeros((len(chain), 3, 3))
        block[:, 0, 1], block[:, 0, 2], block[:, 1, 2] = r[:, 2], -r[:, 1], r[:, 0]
        block[:, 1, 0], block[:, 2, 0], block[:, 2, 1] = -r[:, 2], r[:, 1], -r[:, 0]
        blocks[row][:, chain, :] = np.swapaxes(block, 0, 1)
    scale = np.sqrt(effectors.weights[active])
    j = (blocks * scale[:, None, None, None]).reshape(3 * len(active), 3 * m)
    e = ((effectors.targets[active] - tips) * scale[:, None]).reshape(-1)
    return j, e, active


def transpose_step(j: np.ndarray, e: np.ndarray, damping: float) -> np.ndarray:
    """The Jacobian-transpose step, at the length that best lowers the linearised error (no damping)."""
    direction = j.T @ e
    moved = j @ direction
    size = moved @ moved
    return direction * (e @ moved / size) if size > 0.0 else direction


def dls_step(j: np.ndarray, e: np.ndarray, damping: float) -> np.ndarray:
    """The damped least squares step J^T (J J^T + lambda^2 I)^-1 e."""
    return j.T @ np.linalg.solve(j @ j.T + damping * damping * np.eye(len(e)), e)


StepRule = Callable[[np.ndarray, np.ndarray, float], np.ndarray]


def jacobian_step(rule: StepRule, damping: float) -> Callable[[Rig, Effectors], None]:
    """One iteration of a Jacobian solver with this step rule: linearise, step, clamp, apply, limit."""

    def step(rig: Rig, effectors: Effectors) -> None:
        j, e, active = jacobian(rig, effectors)
        if not active:
            return
        lam = damping * max(effectors.reach[active])
        angles = rule(j, e, lam).reshape(-1, 3)
        if _singular(j, e, effectors, active, rig):
            # Straight, with the target on its line: no small turn moves the tip along the line, so
            # both rules give no step. Bending each pulled bone a little about its X axis gets out.
            pulled = np.array([bool(goals) for goals in effectors.pulled_by])
            angles = NUDGE * rig.frames[:, :, 0] * pulled[:, None]
        largest = np.linalg.norm(angles, axis=1).max()
        if largest > MAX_STEP:
            angles *= MAX_STEP / largest
        rig.rotate_all(angles)

    return step


def _singular(j: np.ndarray, e: np.ndarray, effectors: Effectors, active: list[int], rig: Rig) -> bool:
    """True at a singular pose that is not a solution: no goal's chain can help it, and one wants its tip pulled in."""
    # J^T e vanishing for every goal alone is the singularity (targets that merely conflict cancel only in
    # the sum). A chain stretched straight at a target out of reach is singular too, but as close as it
    # gets: its error points outwards, so only an error pointing back towards the chain's top counts.
    pulled_in = False
    for row, g in enumerate(active):
        rows = slice(3 * row, 3 * row + 3)
        error = np.linalg.norm(e[rows])
        if error == 0.0:
            continue
        if np.linalg.norm(j[rows].T @ e[rows]) > 1e-9 * error * effectors.reach[g]:
            return False
        chain = effectors.chains[g]
        outwards = rig.tips(chain[:1])[0] - rig.heads[chain[-1]]
        pulled_in = pulled_in or bool(e[rows] @ outwards < 0.0)
    return pulled_in


def solve_transpose(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
) -> tuple[Pose, SolveReport]:
    """Move the skeleton so that each goal's bone tip reaches its target, by the Jacobian transpose."""
    return solve_iteratively(skeleton, goals, start, settings, jacobian_step(transpose_step, 0.0))


def solve_dls(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
    *,
    damping: float = DAMPING,
) -> tuple[Pose, SolveReport]:
    """Move the skeleton so that each goal's bone tip reaches its target, by damped least squares."""
    return solve_iteratively(skeleton, goals, start, settings, jacobian_step(dls_step, damping))
