# SPDX-License-Identifier: GPL-3.0-or-later
"""CCD: Cyclic Coordinate Descent inverse kinematics.

Wang & Chen, "A combined optimization method for solving the inverse
kinematics problem of mechanical manipulators", IEEE Trans. Robotics and
Automation 7 (1991). One iteration walks the bones from the tips towards the
chains' tops; each bone turns about its head by the shortest rotation that
takes the line from its head to the effector tip onto the line from its head
to the target. Everything below the bone turns with it, rigidly.

Trees and several goals: a bone that several goals' chains share is turned
once per sweep, by the weighted average of the turns the goals ask for
(weighted by the goals' branch weights), rather than by each goal in turn.
Taking goals in turn lets the last goal win every shared bone and makes the
result depend on the order of the goals; the average treats them alike and
lets the weights arbitrate, as FABRIK's weighted sub-base centroid does. On a
single chain it is exactly classic CCD. A goal pulls only the bones of its own
chain (`chain_length`), and a goal of weight 0 pulls nothing.

Joint limits are applied after every turn, by projecting the bone's local
rotation (relative to its parent's current frame) into its limit; stiffness
holds back part of each turn.

Only position goals are used: the goals' `rotation` and `pole` are ignored.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..math import quat
from ..math.vec import EPSILON, Vec, add, perpendicular, sub
from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Pose, Skeleton
from .iterative import Effectors, Rig, solve_iteratively

__all__ = ["solve"]


def ccd_sweep(rig: Rig, effectors: Effectors) -> None:
    """One CCD iteration: every moving bone, children first, turns its effectors towards their targets; no ancestor
    has turned yet when a bone does, so only the tips below it follow each turn."""
    tips = [tuple(tip) for tip in rig.tips(effectors.nodes).tolist()]
    targets = [tuple(target) for target in effectors.targets.tolist()]
    for k in reversed(range(len(rig.bones))):
        if not effectors.pulled_by[k]:
            continue
        head = tuple(rig.heads[k].tolist())
        # The weighted sum of the asked-for turns, normalised: a weighted average of nearby
        # rotations (shortest arcs all have w >= 0, so they lie on the same side of the sphere).
        total = [0.0, 0.0, 0.0, 0.0]
        for g in effectors.pulled_by[k]:
            asked = _shortest_turn(head, tips[g], targets[g])
            if asked is not None:
                w = effectors.weights[g]
                total = [t + w * a for t, a in zip(total, asked)]
        size = math.sqrt(sum(c * c for c in total))
        if size < 1e-12:
            continue  # nothing to do, or asks that cancel out
        applied = rig.turn(k, np.array(quat.to_matrix(tuple(c / size for c in total)))).tolist()
        for g in effectors.below[k]:
            tips[g] = add(head, _times(applied, sub(tips[g], head)))
    rig.forward()  # brings every bone below a turned one along, from the local rotations


def _times(m: list[list[float]], v: Vec) -> Vec:
    """The 3x3 matrix m (rows) times v."""
    return (
        m[0][0] * v[0] + m[0][1] * v[1] + m[0][2] * v[2],
        m[1][0] * v[0] + m[1][1] * v[1] + m[1][2] * v[2],
        m[2][0] * v[0] + m[2][1] * v[1] + m[2][2] * v[2],
    )


def _shortest_turn(head: Vec, tip: Vec, target: Vec) -> quat.Quat | None:
    """The shortest rotation about `head` taking the tip's direction onto the target's (None if either is undefined)."""
    u = (tip[0] - head[0], tip[1] - head[1], tip[2] - head[2])
    v = (target[0] - head[0], target[1] - head[1], target[2] - head[2])
    nu = math.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    nv = math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
    if nu < EPSILON or nv < EPSILON:
        return None
    u = (u[0] / nu, u[1] / nu, u[2] / nu)
    v = (v[0] / nv, v[1] / nv, v[2] / nv)
    # Facing right away, any half turn will do: take one about a fixed perpendicular.
    opposite = u[0] * v[0] + u[1] * v[1] + u[2] * v[2] < -1.0 + 1e-12
    return quat.arc(u, v, perpendicular(u) if opposite else u)


def solve(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
) -> tuple[Pose, SolveReport]:
    """Move the skeleton so that each goal's bone tip reaches its target, by CCD; return the pose and a report."""
    return solve_iteratively(skeleton, goals, start, settings, ccd_sweep)
