# SPDX-License-Identifier: GPL-3.0-or-later
"""The goals as a tree posed in its joints' coordinates sees them (`TreeGoals`): each goal's weight, reach and
rows, how near its tip is, and what the limits let a chain reach."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from ..goals.floor import Floor, height
from ..math import quat
from ..math.quat import Quat
from ..math.vec import Vec
from ..model.problem import Goal, goal_reached
from ..model.skeleton import Skeleton
from ..model.tree import MovingTree, chain_reach
from .angles import AngleRig

__all__ = ["TreeGoals", "goal_errors_of", "longest_reach", "rotation_error"]


def _goal_structure(tree: MovingTree, rotated: tuple[int, ...]) -> tuple[list[float], list[set[int]], set[int]]:
    """`TreeGoals`' reach, moved_by and idle_twists for a tree whose goals turn the nodes `rotated`."""
    moved_by = []
    for node in tree.tips:
        above = set()
        k = node
        while k >= 0:
            above.add(k)
            k = tree.parent[k]
        moved_by.append(above)
    idle = {k for k in range(len(tree.bones)) if not tree.children[k] and k not in rotated}
    return [chain_reach(tree, chain) for chain in tree.goal_chain], moved_by, idle


class TreeGoals:
    """The goals as the refinement sees them: effector nodes, targets, weights, rotation goals, reach."""

    def __init__(
        self, tree: MovingTree, goals: Sequence[Goal], floor: Floor | None = None,
        held: Sequence[tuple[int, bool]] = (),
    ) -> None:
        self.tree = tree
        self.goals = goals
        #: The plane no joint may go below (`floor`), or None; the joints it holds (`floor.liftable`).
        self.floor = floor
        self.held = held
        self.nodes = tree.tips
        self.targets = [(float(t[0]), float(t[1]), float(t[2])) for t in (g.target for g in goals)]
        self.weights = [math.sqrt(max(0.0, g.weight)) for g in goals]
        self.rotations = [None if g.rotation is None else quat.normalized(g.rotation) for g in goals]
        self.rotation_weights = [g.rotation_weight for g in goals]
        rotated = tuple(node for node, rotation in zip(self.nodes, self.rotations) if rotation is not None)
        known = tree.kept.goal_structures.get(rotated)
        if known is None:  # (what depends on the tree and which goals turn alone is kept with the tree)
            known = tree.kept.goal_structures[rotated] = _goal_structure(tree, rotated)
        #: Per goal, its chain's summed bone length: the scale of its errors (rotation goals count at it).
        self.reach: list[float] = known[0]
        #: Per goal, the nodes whose turn moves its tip: its tip node and every moving ancestor.
        self.moved_by: list[set[int]] = known[1]
        #: Leaf nodes without a rotation goal: their twist moves nothing the goals ask about.
        self.idle_twists: set[int] = known[2]
        #: The goals that give the refinement rows, in their order: per goal of weight above 0, its index, node,
        #: weight and the scale of its three rotation rows (0: it has none; angles count as lengths at the chain's
        #: reach, so both kinds of error weigh alike).
        self.rows: list[tuple[int, int, float, float]] = [
            (g, node, w, 0.0 if rotation is None else max(0.0, w * weight * span))
            for g, (node, w, rotation, weight, span) in enumerate(
                zip(self.nodes, self.weights, self.rotations, self.rotation_weights, self.reach)
            )
            if w > 0.0
        ]

    def cost(self, errors: Sequence[float], rotation_errors: Sequence[float]) -> float:
        """The weighted squared error the refinement lowers (angles count as lengths at the chain's reach)."""
        total = 0.0
        for g, d in enumerate(errors):
            total += (self.weights[g] * d) ** 2
            if self.rotations[g] is not None and rotation_errors:
                total += (self.weights[g] * self.rotation_weights[g] * rotation_errors[g] * self.reach[g]) ** 2
        return total

    def under_floor(self, rig: AngleRig) -> list[tuple[int, bool, Vec, float]]:
        """The joints it holds below the floor as the rig is posed: node, whether it is the tail, the point and its
        depth; none without a floor."""
        floor = self.floor
        if floor is None:
            return []
        out = []
        for k, tail in self.held:
            point = rig.tip(k) if tail else rig.heads[k]
            depth = -height(floor, point)
            if depth > 0.0:
                out.append((k, tail, point, depth))
        return out

    def floor_cost(self, rig: AngleRig) -> float:
        """What the joints below the floor add to the squared error: their depths, squared."""
        return sum(depth * depth for *_, depth in self.under_floor(rig))

    def reached(self, errors: Sequence[float], rotation_errors: Sequence[float], tolerance: float) -> bool:
        """Every goal reached (`problem.goal_reached`)."""
        return all(
            goal_reached(goal, errors[g], rotation_errors[g] if rotation_errors else 0.0, self.reach[g], tolerance)
            for g, goal in enumerate(self.goals)
        )

    def out_of_reach(
        self, heads: Sequence[Vec], skeleton: Skeleton, tolerance: float
    ) -> dict[int, tuple[float, float, float]]:
        """Goals whose target lies beyond all their chain could reach from a base that never moves, each with the
        nearest point it could reach, the tolerance inside (off the straight pose, where every method crawls);
        `heads`: the nodes' heads as the solve starts."""
        aims = {}
        tree = self.tree
        longest_of = tree.kept.longest_reach  # (per chain: it depends on the tree alone)
        for g, chain in enumerate(tree.goal_chain):
            top = chain[-1]
            if self.weights[g] <= 0.0 or tree.parent[top] >= 0:
                continue
            longest = longest_of.get(chain)
            if longest is None:
                longest = longest_of[chain] = longest_reach(skeleton, tree, chain)
            base = heads[top]
            target = self.targets[g]
            away = (target[0] - base[0], target[1] - base[1], target[2] - base[2])
            distance = math.sqrt(away[0] * away[0] + away[1] * away[1] + away[2] * away[2])
            if distance > longest * (1.0 + 1e-9):
                share = max(0.0, longest - tolerance) / distance
                aims[g] = (base[0] + away[0] * share, base[1] + away[1] * share, base[2] + away[2] * share)
        return aims


def longest_reach(skeleton: Skeleton, tree: MovingTree, chain: Sequence[int]) -> float:
    """The farthest a chain (nodes, tip first) reaches from its base: its bones and the rigid offsets between
    them laid end to end. No pose inside any limits gets further."""
    bones = [tree.bones[k] for k in chain]
    return sum(tree.length[k] for k in chain) + float(np.linalg.norm(skeleton.offsets[bones[:-1]], axis=1).sum())


def goal_errors_of(rig: AngleRig, problem: TreeGoals) -> tuple[list[float], list[float]]:
    """Each goal's tip distance, and each goal's angle to its rotation goal (0 without one), as the rig is posed."""
    dists = [math.dist(rig.tip(node), target) for node, target in zip(problem.nodes, problem.targets)]
    angles = [
        0.0 if rotation is None else quat.angle_between(rig.frames[node], rotation)
        for node, rotation in zip(problem.nodes, problem.rotations)
    ]
    return dists, angles


def rotation_error(frame: Quat, target: Quat) -> Vec:
    """The world rotation vector that turns `frame` onto `target`."""
    return quat.log(quat.mul(target, quat.conj(frame)))
