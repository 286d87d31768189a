# SPDX-License-Identifier: GPL-3.0-or-later
"""A plan solved with a root that moves (`goals.root`): where the branches below it put it, then the parts
against the goals that move carries back; and the pose moved with it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..goals import root
from ..joints.tree_goals import longest_reach
from ..math import quat
from ..math.vec import Vec
from ..model.problem import Goal, SolveReport, SolveSettings
from ..model.skeleton import Pose, Skeleton
from ..model.tree import MovingTree, Start
from .loop import Solved

if TYPE_CHECKING:  # (the plan calls this module: it is named here for the type hints alone)
    from .plan import Carry, Plan

__all__ = ["below", "moved_pose", "solve"]


def solve(plan: Plan, goals: Sequence[Goal], start: Start, settings: SolveSettings, carry: Carry | None) -> Solved:
    """Solve with a root that may move: where the branches below it put it, then the parts against the goals the
    move carries back; where a branch's limits keep it short, the root goes on as far as that branch really reached,
    a few rounds."""
    moving = settings.root
    if moving is not plan.checked_root:
        root.validate(moving)
        plan.checked_root = moving
    hanging = below(plan, moving.bone)
    whose, branches = _branches(plan, goals, start, hanging)
    move = root.place(moving, branches, settings.tolerance)
    used, best = 0, None
    # (each round goes on from what the last frame left, not from the round before it)
    kept = dict(carry.rigs) if carry is not None else None
    for round_ in range(root.ROUNDS):
        if round_ and kept is not None:
            carry.rigs.clear()
            carry.rigs.update(kept)
        carried, plane = root.carried(move, goals, hanging, settings.floor)
        inner = replace(settings, root=None, floor=plane)
        if plan.whole or all(hanging):
            solved = plan.solve_parts(carried, start, inner, carry)
        else:  # (a part not below the root keeps the floor where it is)
            outer = replace(settings, root=None)
            solved = plan.solve_parts(carried, start, inner, carry, [hanging[p.goals[0]] for p in plan.parts], outer)
        used += solved.report.iterations
        if best is None or _better(solved.report, best[0].report):
            best = solved, move, dict(carry.rigs) if carry is not None else None
        if round_ == root.ROUNDS - 1 or solved.report.converged:
            break
        tips = [_tip(plan, goals[g].bone, plan.tree.goal_chain[g][0], start, solved) for g in whose]
        errors = [solved.report.errors[g] for g in whose]
        shorter = root.shortened(branches, move, tips, errors, settings.tolerance)
        if shorter is None:
            break
        branches, before = shorter, move
        move = root.place(moving, branches, settings.tolerance)
        if move == before:
            break
    solved, move, rigs = best  # (a later round can end further off: the best one is the answer)
    if rigs is not None:
        carry.rigs.clear()
        carry.rigs.update(rigs)
    solved.report.iterations = used
    solved.root = None if move.still else move  # (left where the start has it: its channels as they are)
    return solved


def _tip(plan: Plan, bone: int, node: int, start: Start, solved: Solved) -> Vec:
    """Where a solve left a goal's tip (the tail of its bone, or node of the tree)."""
    if solved.pose is not None:
        return tuple(map(float, solved.pose.tails[bone]))
    if solved.frames is None:
        return start.tails[node]
    y = quat.y_axis(solved.frames[node])
    head, length = solved.heads[node], plan.tree.length[node]
    return (head[0] + length * y[0], head[1] + length * y[1], head[2] + length * y[2])


def below(plan: Plan, bone: int) -> list[bool]:
    """Per goal, whether its chain hangs from `bone` (a root that may move). Raises ValueError where the bone
    is in a chain: a moving root carries the chains, it is not one of their joints."""
    found = plan.below_root.get(bone)
    if found is None:
        if bone in plan.bones:
            name = plan.skeleton.names[bone]
            raise ValueError(f"the root bone '{name}' is in an effector's chain: shorten the chain to below it")
        found = []
        for chain in plan.tree.goal_chain:
            top = _top(plan.tree, chain[0])
            found.append(bone in plan.skeleton.path_to_root(plan.tree.bones[top]))
        plan.below_root[bone] = found
    return found


def _branches(
    plan: Plan, goals: Sequence[Goal], start: Start, hanging: Sequence[bool]
) -> tuple[list[int], list[root.Branch]]:
    """The chains below a moving root, as it sees them (`root.Branch`), with the goal of each."""
    out, whose = [], []
    for g, goal in enumerate(goals):
        if not hanging[g] or goal.weight <= 0.0:
            continue
        node = plan.tree.goal_chain[g][0]
        path = [node]
        while plan.tree.parent[path[-1]] >= 0:
            path.append(plan.tree.parent[path[-1]])
        reach = longest_reach(plan.skeleton, plan.tree, path)
        out.append(root.Branch(start.heads[path[-1]], start.tails[node], reach, goal.target, goal.weight))
        whose.append(g)
    return whose, out


def _better(report: SolveReport, than: SolveReport) -> bool:
    """Whether a solve's report is better than another's: converged, else nearer its goals in all."""
    if report.converged != than.converged:
        return report.converged
    return sum(report.errors) < sum(than.errors)


def _top(tree: MovingTree, node: int) -> int:
    """The base node of the part a node is in."""
    while tree.parent[node] >= 0:
        node = tree.parent[node]
    return node


def moved_pose(skeleton: Skeleton, pose: Pose, move: root.Move) -> Pose:
    """The pose with the root's bone and every bone below it moved by the root's move (`root.Move`)."""
    moved = pose.copy()
    bones = skeleton.kept.shape.below_root.get(move.bone)
    if bones is None:
        bones = skeleton.kept.shape.below_root[move.bone] = [b for b in range(len(skeleton.names)) if move.bone in skeleton.path_to_root(b)]
    turn = np.array(quat.to_matrix(move.rotation))
    pivot, shift = np.array(move.pivot), np.array(move.translation)
    moved.heads[bones] = (pose.heads[bones] - pivot) @ turn.T + pivot + shift
    moved.frames[bones] = turn @ pose.frames[bones]
    return moved
