# SPDX-License-Identifier: GPL-3.0-or-later
"""A root that moves: the root bone (or a chosen pelvis) as a sub-base of the FABRIK tree that may shift and turn.

In the paper's multi-effector form a sub-base goes, on the way back in,
to the weighted centroid of where its branches' forward reaching put it.
The root is that sub-base for every chain that hangs from it, with the
difference that it carries the whole body above the chains' bases rigidly:

- *Out of reach*: each branch that does not reach from where the root is
  asks it to bring its base within the branch's reach of its target (the
  part beyond it, along the line from base to target); the root moves by
  the weighted centroid of what they ask, and turns by the weighted turn
  that best does the same, step after step until no branch asks more or
  what they ask balances. A branch that reaches from there keeps reaching
  (a hand that pulls forward against two pinned feet takes the hips only
  as far as the legs reach).
- *Free*: first the root follows the branches' pull (where each target
  asks its tip to move), by the share `Root.weight` of its weighted
  centroid, as a sub-base follows its branches; then as out of reach.

Every move stays within `Root.distance` and `Root.angle` of the root's home
(where the animator put it). Moving the root moves every chain below it
rigidly, so the plan solves those chains as before, against their goals
carried back by the move (`carried`): the chains' own rotations are the
same in both, and only the root's channels take the move.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple, Sequence

from ..math import quat, vec
from ..math.quat import Quat
from ..math.vec import Vec
from ..model.problem import Goal
from .floor import Floor

__all__ = ["FREE", "MODES", "OUT_OF_REACH", "Branch", "Move", "Root", "away", "carried", "place", "shortened", "validate"]

OUT_OF_REACH, FREE = "OUT_OF_REACH", "FREE"
MODES = (OUT_OF_REACH, FREE)

#: Steps of the out-of-reach balance at most; each costs a few float operations per branch.
STEPS = 30
#: The share of a branch's reach the root leaves it short of straight: a chain pulled exactly straight is where
#: the passes crawl (and a limb locked straight looks it).
SLACK = 0.005
#: Rounds of placing the root and solving the chains at most: after the first, only where a branch's limits
#: kept it short of the reach its bones have (`shortened`).
ROUNDS = 3
#: The same for a branch that reached from home, which the root takes no nearer straight than this (or than it
#: was): the passes slow down well before straight, and its reach is not what the move is for.
HOLD_SLACK = 0.02


class Move(NamedTuple):
    """A rigid move of a root bone (`bone`) and everything below it: a turn by `rotation` about `pivot`, then a
    shift by `translation` (armature space)."""

    rotation: Quat = quat.IDENTITY
    translation: Vec = (0.0, 0.0, 0.0)
    pivot: Vec = (0.0, 0.0, 0.0)
    bone: int = -1

    def apply(self, p: Vec) -> Vec:
        """Where the move takes point p."""
        return vec.add(vec.add(quat.rotate(self.rotation, vec.sub(p, self.pivot)), self.pivot), self.translation)

    def undo(self, p: Vec) -> Vec:
        """Where the move takes a point to reach p (its inverse)."""
        q = vec.sub(vec.sub(p, self.translation), self.pivot)
        return vec.add(quat.rotate(quat.conj(self.rotation), q), self.pivot)

    @property
    def still(self) -> bool:
        """Whether it moves nothing."""
        return self.rotation == quat.IDENTITY and self.translation == (0.0, 0.0, 0.0)


class Root(NamedTuple):
    """A root that may move: its bone, how (`MODES`), the share of the branches' pull it follows in `FREE` mode,
    how far it may shift (armature units) and turn (radians) from its home, its head where the start has it
    (`pivot`), and its home (the animator's place) as a move from there."""

    bone: int
    mode: str = OUT_OF_REACH
    weight: float = 0.5
    distance: float = 0.0
    angle: float = 0.0
    pivot: Vec = (0.0, 0.0, 0.0)
    home: Move = Move()


class Branch(NamedTuple):
    """A chain below the root, as the root sees it: its fixed base and its tip where the start has them, how far
    it reaches from its base, its target and its branch weight."""

    base: Vec
    tip: Vec
    reach: float
    target: Vec
    weight: float


def validate(root: Root) -> None:
    """Refuse a root whose settings mean nothing."""
    if root.mode not in MODES:
        raise ValueError(f"the root's mode must be one of {', '.join(MODES)}")
    values = (root.weight, root.distance, root.angle, *root.pivot, *root.home.rotation, *root.home.translation)
    if not all(math.isfinite(v) for v in values):
        raise ValueError("the root's weight, distance, angle and place must be finite numbers")
    if root.distance < 0.0 or root.angle < 0.0 or not 0.0 <= root.weight <= 1.0:
        raise ValueError("the root's distance and angle must be 0 or more, its weight between 0 and 1")


def place(root: Root, branches: Sequence[Branch], tolerance: float) -> Move:
    """Where the root goes, as a move from where the start has it (see the module)."""
    home = root.home
    pivot = home.apply(root.pivot)  # (the root's head at home: the shift and the turn are limited about it)
    bases = [vec.sub(home.apply(b.base), pivot) for b in branches]
    # A branch that reaches from home keeps reaching (no further from its target than it is, or than its reach
    # short of straight by HOLD_SLACK): the root helps the others only as far as that allows.
    holds = []
    for b in branches:
        far = vec.dist(b.target, home.apply(b.base))
        holds.append(max(far, b.reach * (1.0 - HOLD_SLACK)) if far <= b.reach else None)
    shift, turn = (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)
    if root.mode == FREE and root.weight > 0.0:
        pulls = [vec.sub(b.target, home.apply(b.tip)) for b in branches]
        tips = [vec.sub(home.apply(b.tip), pivot) for b in branches]
        shift, turn = _stepped(root, branches, tips, pulls, root.weight, True, shift, turn)
        shift = _held(root, branches, holds, [_turned(turn, b) for b in bases], pivot, shift)
    for _ in range(STEPS):
        before = (shift, turn)
        arms = [_turned(turn, b) for b in bases]
        asks = [
            (0.0, 0.0, 0.0) if held is not None else _beyond(b, vec.add(vec.add(arm, pivot), shift))
            for b, arm, held in zip(branches, arms, holds)
        ]
        shift, turn = _stepped(root, branches, arms, asks, 1.0, False, shift, turn)
        shift = _held(root, branches, holds, [_turned(turn, b) for b in bases], pivot, shift)
        if vec.dist(shift, before[0]) + vec.norm(vec.sub(turn, before[1])) * _size(bases) <= 0.01 * tolerance:
            break  # (all reach, or against a limit, or balanced between branches that ask opposite ways)
    rotation = quat.mul(quat.exp(turn), home.rotation)
    # The turn about the home head, then the shift, as one move about the start's head.
    translation = vec.add(home.translation, shift)
    return Move(quat.normalized(rotation), translation, root.pivot, root.bone)


def _stepped(
    root: Root, branches: Sequence[Branch], arms: Sequence[Vec], asks: Sequence[Vec], share: float, every: bool,
    shift: Vec, turn: Vec,
) -> tuple[Vec, Vec]:
    """One step of the sub-base rule: the root shifts by the weighted centroid of what the branches ask and turns by
    the weighted turn that best gives them the rest, each within its bound; `share` of each, among every branch or
    (not `every`) those that pull."""
    counted = [every or a != (0.0, 0.0, 0.0) for a in asks]
    total = sum(b.weight for b, c in zip(branches, counted) if c)
    if total <= 0.0:
        return shift, turn
    wanted = vec.add(shift, vec.scale(_weighted(branches, asks), share / total))
    shifted, _ = _limited(root, wanted, (0.0, 0.0, 0.0))
    moved = vec.sub(shifted, shift)
    moment, inertia = (0.0, 0.0, 0.0), 0.0
    for b, arm, ask, c in zip(branches, arms, asks, counted):
        if c:
            moment = vec.add(moment, vec.scale(vec.cross(arm, vec.sub(ask, moved)), b.weight))
            inertia += b.weight * vec.dot(arm, arm)
    if inertia > 0.0 and root.angle > 0.0:
        step = vec.scale(moment, share / inertia)
        turn = _limited(root, (0.0, 0.0, 0.0), quat.log(quat.mul(quat.exp(step), quat.exp(turn))))[1]
    return shifted, turn


def _held(
    root: Root, branches: Sequence[Branch], holds: Sequence[float | None], arms: Sequence[Vec], pivot: Vec, shift: Vec
) -> Vec:
    """The shift brought back until every branch that holds (`holds`: how far from its target its base may be, or
    None) is that near again (each in turn, a few rounds)."""
    for _ in range(8):
        back = False
        for branch, arm, held in zip(branches, arms, holds):
            if held is not None:
                ask = _beyond(branch, vec.add(vec.add(arm, pivot), shift), held)
                if vec.norm(ask) > 0.0:
                    shift, back = vec.add(shift, ask), True
        shift = _limited(root, shift, (0.0, 0.0, 0.0))[0]
        if not back:
            break
    return shift


def shortened(
    branches: Sequence[Branch], move: Move, tips: Sequence[Vec], errors: Sequence[float], tolerance: float
) -> list[Branch] | None:
    """The branches with the reach each really had where the last round left a tip short of its target within its
    bones' reach (its limits), or None: what it reached less what it missed by, so the next round mostly reaches."""
    out, changed = [], False
    for branch, tip, error in zip(branches, tips, errors):
        reached = vec.dist(branch.base, tip)
        wanted = vec.dist(branch.base, move.undo(branch.target))
        if error > tolerance and reached < wanted and reached < branch.reach * (1.0 - SLACK) - tolerance:
            branch = branch._replace(reach=max(0.0, reached - error) / (1.0 - SLACK))
            changed = True
        out.append(branch)
    return out if changed else None


def away(move: Move, home: Move) -> tuple[float, float]:
    """How far a move takes the root from its home, and how far it turns it (radians)."""
    return vec.dist(move.translation, home.translation), quat.angle_between(move.rotation, home.rotation)


def _beyond(branch: Branch, base: Vec, reach: float | None = None) -> Vec:
    """What a branch asks of its base at `base`: to come as far towards its target as the target lies beyond
    `reach` (by default its reach short of straight by `SLACK`); nothing where it is within."""
    to = vec.sub(branch.target, base)
    far = vec.norm(to)
    reach = branch.reach * (1.0 - SLACK) if reach is None else reach
    if far <= reach or far == 0.0:
        return (0.0, 0.0, 0.0)
    return vec.scale(to, (far - reach) / far)


def _weighted(branches: Sequence[Branch], values: Sequence[Vec]) -> Vec:
    """The branch-weighted sum of one vector per branch."""
    out = (0.0, 0.0, 0.0)
    for b, v in zip(branches, values):
        out = vec.add(out, vec.scale(v, b.weight))
    return out


def _limited(root: Root, shift: Vec, turn: Vec) -> tuple[Vec, Vec]:
    """The shift and turn held within the root's distance and angle."""
    far, angle = vec.norm(shift), vec.norm(turn)
    if far > root.distance:
        shift = vec.scale(shift, root.distance / far) if far > 0.0 else shift
    if angle > root.angle:
        turn = vec.scale(turn, root.angle / angle) if angle > 0.0 else turn
    return shift, turn


def _turned(turn: Vec, arm: Vec) -> Vec:
    """An arm from the pivot, turned by a rotation vector."""
    return quat.rotate(quat.exp(turn), arm) if turn != (0.0, 0.0, 0.0) else arm


def _size(points: Sequence[Vec]) -> float:
    """The largest distance of the points from the pivot (what a turn's angle moves them by, at most)."""
    return max((vec.norm(p) for p in points), default=0.0)


def carried(
    move: Move, goals: Sequence[Goal], which: Sequence[bool], floor: Floor | None
) -> tuple[list[Goal], Floor | None]:
    """The goals (those `which` says hang below the root) and the floor, carried back by the root's move: what
    the chains below it must reach from where the start has them, so that moved with the root they reach the
    goals themselves."""
    if move.still:
        return list(goals), floor
    back = quat.conj(move.rotation)
    out = []
    for goal, below in zip(goals, which):
        if below:
            goal = replace(
                goal,
                target=move.undo(goal.target),
                rotation=None if goal.rotation is None else quat.normalized(quat.mul(back, goal.rotation)),
                pole=None if goal.pole is None else move.undo(goal.pole),
            )
        out.append(goal)
    if floor is not None:
        floor = Floor(move.undo(floor.point), quat.rotate(back, floor.normal))
    return out, floor
