# SPDX-License-Identifier: GPL-3.0-or-later
"""What the bone-turning solvers share: the working state, the goals, the iteration loop and pose assembly.

CCD and the Jacobian solvers turn bones about their heads and carry
everything below along by forward kinematics; `Rig` holds that state,
`Effectors` the goals in the form they need, and `solve_iteratively` runs a
solver's step under the same stopping rules as FABRIK (tolerance, stalling
with patience, iteration cap), keeping the best pose found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..math import matrix_rows, quat
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, begin
from ..model.skeleton import Pose, Skeleton, pose_with
from ..model.stopping import Stopping, iterate
from ..model.tree import MovingTree, moving_tree

__all__ = ["Effectors", "Rig", "pose_with", "solve_iteratively"]


class Rig:
    """The moving bones of a solve, posed by their local rotations (what `Skeleton.local_rotations` gives, so limits
    apply to them), with their heads and frames kept by forward kinematics."""

    def __init__(self, skeleton: Skeleton, tree: MovingTree, start: Pose) -> None:
        bones = list(tree.bones)
        m = len(bones)
        self.bones = bones
        self.parent = tree.parent
        self.limits = tree.limits
        self.lengths = np.asarray(tree.length, dtype=float)
        #: Per node, the nodes that turn with it (itself first), as an index array.
        self.subtree: list[np.ndarray] = [np.array([k]) for k in range(m)]
        for k in reversed(range(m)):
            p = tree.parent[k]
            if p >= 0:
                self.subtree[p] = np.concatenate((self.subtree[p], self.subtree[k]))
        start_frames = start.frames[bones]
        zero_at_start = np.empty((m, 3, 3))
        for k, b in enumerate(bones):
            d = skeleton.parents[b]
            rest = skeleton.rest_frames[b]
            zero_at_start[k] = rest if d < 0 else start.frames[d] @ skeleton.rest_frames[d].T @ rest
        self.zero = zero_at_start.copy()
        self.link = np.zeros((m, 3))
        for k, p in enumerate(tree.parent):
            if p >= 0:
                self.zero[k] = start_frames[p].T @ zero_at_start[k]
                self.link[k] = start_frames[p].T @ (start.heads[bones[k]] - start.heads[bones[p]])
        self.base_heads = start.heads[bones].copy()
        self.local = _orthonormal(np.swapaxes(zero_at_start, 1, 2) @ start_frames)
        self.heads = np.empty((m, 3))
        self.frames = np.empty((m, 3, 3))
        self.zero_frames = np.empty((m, 3, 3))
        self.forward()

    def forward(self) -> None:
        """Forward kinematics: heads and frames of every node from the local rotations."""
        for k, p in enumerate(self.parent):
            if p < 0:
                self.zero_frames[k] = self.zero[k]
                self.heads[k] = self.base_heads[k]
            else:
                self.zero_frames[k] = self.frames[p] @ self.zero[k]
                self.heads[k] = self.heads[p] + self.frames[p] @ self.link[k]
            self.frames[k] = self.zero_frames[k] @ self.local[k]

    def tips(self, nodes: np.ndarray) -> np.ndarray:
        """Tail positions of the given nodes."""
        return self.heads[nodes] + self.lengths[nodes, None] * self.frames[nodes, :, 1]

    def bring_inside_limits(self) -> None:
        """Project every limited node into its limit (a start pose may lie outside)."""
        changed = False
        for k, limit in enumerate(self.limits):
            if limit is not None:
                self.local[k] = _constrained(limit, self.local[k], None)
                changed = True
        if changed:
            self.forward()

    def turn(self, k: int, turn: np.ndarray) -> np.ndarray:
        """Turn node k by a world rotation about its head, apply its limit, and return the turn it really made; the
        nodes below follow at the next `forward`, and until then the caller moves the points it needs."""
        wanted = self.zero_frames[k].T @ turn @ self.frames[k]
        limit = self.limits[k]
        if limit is None:
            self.local[k] = np.array(quat.to_matrix(quat.from_matrix(wanted.tolist())))
        else:
            self.local[k] = _constrained(limit, wanted, self.local[k] if limit.is_stiff else None)
        applied = self.zero_frames[k] @ self.local[k] @ self.frames[k].T
        self.frames[k] = self.zero_frames[k] @ self.local[k]
        return applied

    def rotate_all(self, angles: np.ndarray) -> None:
        """Turn every node by a small world rotation vector (m, 3) about its head at once, each relative to its
        parent so the turns add up as the Jacobian assumes, then apply limits."""
        turns = matrix_rows.rotation_vector_matrices(angles)
        wanted = _orthonormal(np.swapaxes(self.zero_frames, 1, 2) @ turns @ self.frames)
        for k, limit in enumerate(self.limits):
            if limit is not None:
                wanted[k] = _constrained(limit, wanted[k], self.local[k] if limit.is_stiff else None)
        self.local = wanted
        self.forward()

    def snapshot(self) -> np.ndarray:
        """A copy of the local rotations (everything else follows from them)."""
        return self.local.copy()

    def restore(self, snapshot: np.ndarray) -> None:
        """Go back to a snapshot."""
        self.local = snapshot.copy()
        self.forward()

    def pose(self, skeleton: Skeleton, start: Pose) -> Pose:
        """The full pose: moving bones from the rig, bones below them following rigidly, the rest as at the start."""
        return pose_with(skeleton, start, self.bones, self.heads, self.frames)


@dataclass(frozen=True)
class Effectors:
    """The goals as the rig sees them: effector nodes, targets, weights, and which nodes each goal pulls."""

    nodes: np.ndarray
    targets: np.ndarray
    weights: np.ndarray
    #: Per goal, the nodes of its chain, tip first.
    chains: tuple[np.ndarray, ...]
    #: Per goal, the longest its chain can reach: bone length plus the rigid head-to-head links.
    reach: np.ndarray
    #: Per goal, whether its chain's top never moves (so the reach rules out far targets).
    fixed_base: tuple[bool, ...]
    #: Per node, the goals with weight whose chain includes it: the goals that pull it.
    pulled_by: tuple[tuple[int, ...], ...]
    #: Per node, the goals whose effector is the node or below it: the tips that move when it turns.
    below: tuple[tuple[int, ...], ...]

    @classmethod
    def of(cls, tree: MovingTree, rig: Rig, goals: Sequence[Goal]) -> "Effectors":
        """The effectors of these goals on this moving tree."""
        chains = tuple(np.array(chain) for chain in tree.goal_chain)
        reach = np.array([rig.lengths[c[0]] + np.linalg.norm(rig.link[c[:-1]], axis=1).sum() for c in chains])
        nodes = [int(c[0]) for c in chains]
        return cls(
            nodes=np.array(nodes),
            targets=np.array([g.target for g in goals], dtype=float),
            weights=np.array([g.weight for g in goals], dtype=float),
            chains=chains,
            reach=reach,
            fixed_base=tuple(tree.parent[c[-1]] < 0 for c in chains),
            pulled_by=tuple(
                tuple(g for g, goal in enumerate(goals) if goal.weight > 0.0 and k in tree.goal_chain[g])
                for k in range(len(rig.bones))
            ),
            below=tuple(
                tuple(g for g, node in enumerate(nodes) if node in rig.subtree[k]) for k in range(len(rig.bones))
            ),
        )

    def errors(self, rig: Rig) -> list[float]:
        """Distance from each effector tip to its target."""
        return np.linalg.norm(rig.tips(self.nodes) - self.targets, axis=1).tolist()

    def out_of_reach(self, rig: Rig, tolerance: float) -> bool:
        """True when some pulling goal's target lies beyond what its fixed-based chain can reach."""
        for g, chain in enumerate(self.chains):
            if self.weights[g] > 0.0 and self.fixed_base[g]:
                if np.linalg.norm(self.targets[g] - rig.base_heads[chain[-1]]) > self.reach[g] + tolerance:
                    return True
        return False


#: One iteration of a solver: move the rig towards the effectors' targets.
Step = Callable[[Rig, Effectors], None]


def solve_iteratively(
    skeleton: Skeleton, goals: Sequence[Goal], start: Pose | None, settings: SolveSettings, step: Step
) -> tuple[Pose, SolveReport]:
    """Run `step` until every goal is within tolerance, progress stalls or the iteration cap; keep the best pose.

    The stopping rules are every solver's (`stopping`), on the error weighted
    by the goals' weights.
    """
    start, nothing_to_do = begin(skeleton, goals, start, settings)
    if nothing_to_do:
        return nothing_to_do
    tree = moving_tree(skeleton, goals)
    rig = Rig(skeleton, tree, start)
    rig.bring_inside_limits()
    effectors = Effectors.of(tree, rig, goals)
    errors = effectors.errors(rig)
    report = SolveReport(0, errors, max(errors) <= settings.tolerance, "converged")
    if report.converged:
        return rig.pose(skeleton, start), report

    steps = _Steps(rig, effectors, step, settings.tolerance)
    stopping = Stopping(settings, _weighted(effectors, errors))
    iterate(steps, stopping)
    report.iterations, report.stopped_by = stopping.iterations, stopping.stopped_by
    report.converged = stopping.stopped_by == "converged"
    report.errors = steps.errors
    if not report.converged and effectors.out_of_reach(rig, settings.tolerance):
        report.stopped_by = "unreachable"
    return rig.pose(skeleton, start), report


class _Steps:
    """A solver's steps on the rig and the errors they leave, for `stopping.iterate`."""

    def __init__(self, rig: Rig, effectors: Effectors, step: Step, tolerance: float) -> None:
        self.rig, self.effectors, self.do, self.tolerance = rig, effectors, step, tolerance
        self.errors = effectors.errors(rig)

    def step(self, reach: float) -> tuple[float, bool, float]:
        self.do(self.rig, self.effectors)
        self.errors = errors = self.effectors.errors(self.rig)
        weighted = _weighted(self.effectors, errors)
        return weighted, max(errors) <= self.tolerance, weighted

    def snapshot(self) -> tuple:
        return self.rig.snapshot(), self.errors

    def restore(self, snapshot: tuple) -> None:
        self.rig.restore(snapshot[0])
        self.errors = snapshot[1]


def _weighted(effectors: Effectors, errors: list[float]) -> float:
    """The error the solvers lower: each goal's distance times its weight."""
    return float(effectors.weights @ np.asarray(errors))


def _constrained(limit: limits.JointLimit, local: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """A local rotation matrix projected into its limit (with `previous`, stiffness holds part of the change back)."""
    before = None if previous is None else quat.from_matrix(previous.tolist())
    return np.array(quat.to_matrix(limits.constrain(limit, quat.from_matrix(local.tolist()), before)))


def _orthonormal(matrices: np.ndarray) -> np.ndarray:
    """The matrices (m, 3, 3) made exact rotations again, Y axis first, so rounding never bends or stretches a bone."""
    y = matrices[:, :, 1]
    y = y / np.sqrt((y * y).sum(axis=1))[:, None]
    x = matrices[:, :, 0]
    x = x - y * (x * y).sum(axis=1)[:, None]
    x = x / np.sqrt((x * x).sum(axis=1))[:, None]
    out = np.empty_like(matrices)
    out[:, :, 0], out[:, :, 1] = x, y
    # z = x cross y, written out: np.cross costs more than the rest of this together on small arrays
    out[:, 0, 2] = x[:, 1] * y[:, 2] - x[:, 2] * y[:, 1]
    out[:, 1, 2] = x[:, 2] * y[:, 0] - x[:, 0] * y[:, 2]
    out[:, 2, 2] = x[:, 0] * y[:, 1] - x[:, 1] * y[:, 0]
    return out


