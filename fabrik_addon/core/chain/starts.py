# SPDX-License-Identifier: GPL-3.0-or-later
"""Where FABRIK's iterations start: what the paper leaves open before its first pass.

FABRIK moves joints along lines, so some starts leave its passes a long
crawl or no way at all; each of these puts the joints where the passes
would end, or gives them a way to bend, before the iterations (`fabrik`):

- `settle_two_bones`: two free bones on the triangle their iterations
  converge to, which near full reach they would crawl to for hundreds of
  iterations;
- `spread_evenly`: a chain of three or more bones pulled at its tip with its
  bend spread evenly along it until the tip is on the target (`bend`, one
  step), where the passes would pile the bend onto the joints nearest the
  target;
- `bend_if_straight_at`: a straight chain with its target on its own line
  (the paper's degenerate case) bent a little about its first bone's X axis.
"""

from __future__ import annotations

import math
from typing import Sequence

from ..goals import pole
from ..math import quat
from ..math.vec import EPSILON, Vec, add, cross, dist, dot, norm, perpendicular, scale, sub
from ..model.problem import Goal, SolveSettings
from ..model.tree import Joints, MovingTree
from . import bend

__all__ = [
    "bend_if_straight_at", "is_two_bone_chain", "pulled_at_tip", "settle_two_bones", "spread_evenly", "spreads",
    "two_bone_triangle",
]


def pulled_at_tip(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """One goal on the last bone of a single chain: the paper's own case (its reach test, its two passes)."""
    return len(goals) == 1 and tree.is_single_chain and goals[0].bone == tree.bones[-1]


def spreads(tree: MovingTree, goals: Sequence[Goal], settings: SolveSettings) -> bool:
    """Whether FABRIK starts this tree with its bend spread evenly (`spread_evenly`): a single connected chain of
    three or more bones pulled at its tip by a position goal of some weight (a rotation goal of no weight pulls
    nothing), and an iteration to spend on it."""
    goal = goals[0] if len(goals) == 1 else None
    return (
        goal is not None and len(tree.bones) >= bend.SHORTEST and not tree.needs_frames and pulled_at_tip(tree, goals)
        and goal.weight > 0.0 and (goal.rotation is None or goal.rotation_weight <= 0.0) and settings.max_iterations > 0
    )


def spread_evenly(tree: MovingTree, joints: Joints, target: Vec) -> bool:
    """Start a chain that `spreads` with its bend spread evenly until its tip is on a target in reach (`bend`),
    frames turned with their bones where they are carried. Whether it did: where no such bend exists the chain
    stays as it is."""
    if dist(joints.base[0], target) >= sum(tree.length):
        return False
    found = bend.spread(joints.heads + [joints.tails[-1]], tree.length, target)
    if found is None:
        return False
    points, axis, delta, turn = found
    joints.heads, joints.tails = points[:-1], points[1:]
    if joints.frames is not None:
        joints.frames = bend.turned_frames(joints.frames, axis, delta, turn)
    return True


def is_two_bone_chain(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """True for two connected free bones pulled at the tip by one position goal (a limb without limits)."""
    return (
        len(tree.bones) == 2 and not tree.needs_frames and pulled_at_tip(tree, goals)
        and goals[0].weight > 0.0 and goals[0].rotation is None
    )


def two_bone_triangle(base: Vec, middle: Vec, target: Vec, l1: float, l2: float) -> Vec | None:
    """Where FABRIK's passes leave the middle joint of two bones in the end: the triangle of the two bones and the
    base-target line, on the middle joint's side (near full reach the passes crawl there). None where there is no
    triangle or no plane."""
    d = dist(base, target)
    if not abs(l1 - l2) < d < l1 + l2:
        return None
    u = scale(sub(target, base), 1.0 / d)
    arm = sub(middle, base)
    side = sub(arm, scale(u, dot(arm, u)))
    width = norm(side)
    if width <= pole.STRAIGHT * (l1 + l2):
        return None
    cosine = (l1 * l1 + d * d - l2 * l2) / (2.0 * l1 * d)
    sine = math.sqrt(max(0.0, 1.0 - cosine * cosine))
    return add(base, add(scale(u, l1 * cosine), scale(side, l1 * sine / width)))


def settle_two_bones(tree: MovingTree, joints: Joints, target: Vec) -> bool:
    """Start a two-bone chain (`is_two_bone_chain`) where FABRIK's iterations converge: the middle joint on
    its triangle, the tip on the target, each bone's frame (where frames are carried) turned the shortest way.
    Whether it did: a chain without a triangle stays as it is; the iterations that follow behave as ever."""
    middle = two_bone_triangle(joints.heads[0], joints.tails[0], target, tree.length[0], tree.length[1])
    if middle is None:
        return False
    before = [joints.direction(k, tree.length[k]) for k in (0, 1)] if joints.frames is not None else None
    joints.tails[0] = joints.heads[1] = middle
    joints.tails[1] = tuple(float(c) for c in target)
    if before is not None:
        for k in (0, 1):
            joints.turn(k, before[k], joints.direction(k, tree.length[k]))
    return True


def bend_if_straight_at(tree: MovingTree, joints: Joints, chain: tuple[int, ...], goal: Goal, tolerance: float) -> None:
    """Bend a straight chain a little about its first bone's X axis when its target lies on its own line (and not on
    its tip already): there no pass of FABRIK can bend it, the paper's degenerate case."""
    if len(chain) < 2:
        return
    top = chain[-1]
    base = joints.heads[top]
    two = len(chain) == 2  # (longer chains with a bent tip bend evenly from it: `spread_evenly`)
    axis = sub(joints.tails[chain[1] if two else chain[0]], base)
    length = norm(axis)
    if length < EPSILON:
        return
    if dist(joints.tails[chain[0]], goal.target) <= tolerance:
        return  # reached as it is: bent, it would only have to crawl back straight
    axis = scale(axis, 1.0 / length)
    # (the target first: off the line, as it mostly is, it ends the check at once)
    points = [goal.target] + ([joints.heads[chain[0]]] if two else [joints.tails[k] for k in chain])
    for point in points:
        d = sub(point, base)
        if norm(sub(d, scale(axis, dot(d, axis)))) > 1e-5 * length:
            return  # not straight, or the target is off the line (1e-5: single-precision poses count as straight)
    # Bend about the first bone's own X axis, a rig's usual hinge (pole.holds bent a chain with a pole already).
    # At the joint the branch hangs from: the next bone's head, which an offset keeps off this bone's tail.
    pivot = top if two else chain[-2]
    hinge = joints.heads[pivot]
    if joints.frames is not None:
        bend_axis = quat.x_axis(joints.frames[top])
    else:
        d = sub(joints.tails[chain[0]], base)
        side = cross(axis, sub(d, scale(axis, dot(d, axis))))
        bend_axis = scale(side, 1.0 / norm(side)) if two and norm(side) > 1e-9 * length else perpendicular(axis)
    turn = quat.about_axis(bend_axis, 0.2)
    for k in tree.subtree(pivot):  # the whole branch turns, not only this goal's chain
        joints.heads[k] = add(hinge, quat.rotate(turn, sub(joints.heads[k], hinge)))
        joints.tails[k] = add(hinge, quat.rotate(turn, sub(joints.tails[k], hinge)))
        if joints.frames is not None:
            joints.frames[k] = quat.normalized(quat.mul(turn, joints.frames[k]))
