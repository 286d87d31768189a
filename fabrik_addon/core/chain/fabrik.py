# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK: Forward And Backward Reaching Inverse Kinematics.

Aristidou & Lasenby, "FABRIK: A fast, iterative solver for the Inverse
Kinematics problem", Graphical Models 73 (2011). The solver works on joint
positions. One iteration is two passes over the bones:

1. Forward reaching, from the end effectors towards the root: put the
   effector's joint on its target, then walk back up the chain, placing each
   joint on the line to the joint it had, at the bone's length. Where several
   branches meet, each branch asks for a position of the shared joint (the
   sub-base); the joint goes to the weighted centroid of those asks, weighted
   by the branch weights of the effectors in each branch.
2. Backward reaching, from the fixed root out to every tip: put the root back
   where it was, then walk down the tree the same way.

One free chain pulled at its tip runs the two passes as the paper writes
them (`chain_forward`, `chain_backward`, on the joints p_0..p_n as in its
Algorithm 1); `forward_reaching` and `backward_reaching` are the same passes
for trees, frames and limits.

Joint limits act inside both passes, as in the constrained forms of FABRIK:
in the backward pass each limited bone's direction is projected into the cone
its parent allows; in the forward pass, where the child has already moved,
the parent is turned instead so that the child's limit holds. For that, and
for unconnected bones (a head offset that is rigid in the parent's frame),
each bone's full frame is carried through the passes, turned by the shortest
rotation whenever its direction changes, so its roll is kept.

`solve_from` runs the iterations from one start by the stopping rules every
solver shares (`stopping`): until every effector is within tolerance, the
error stops improving (the best pose is kept), or the iteration cap. As in
the paper, a single free chain whose target is out of reach is stretched
straight towards it at once (`stretch_towards`). Where the iterations start
in the cases the paper leaves open -- two bones near full reach, a long
chain's bend, a straight chain on its target's line -- is `starts`; which
method a rig takes, limits that bind and IK stretch, the plan decides (`plan`).
"""

from __future__ import annotations

import math
from typing import Sequence

from ..goals import pole
from ..math import quat
from ..math.quat import Quat
from ..math.vec import EPSILON, Vec, add, dist, perpendicular, reach, scale, sub
from ..model import limits
from ..model.problem import Goal, SolveReport, SolveSettings, goal_reached, warm_poles
from ..model.stopping import Stopping, iterate
from ..model.tree import Joints, MovingTree, Start, branch_weights, chain_reach
from .starts import bend_if_straight_at, is_two_bone_chain, pulled_at_tip, settle_two_bones, spread_evenly, spreads

__all__ = ["SLOW_WINDOW", "backward_reaching", "chain_backward", "chain_forward", "forward_reaching", "solve_from"]

#: A tree that another method finishes hands over once FABRIK's best error has not halved over this many
#: iterations (`stopping.Stopping`'s window).
SLOW_WINDOW = 5


# The paper's passes.

def chain_forward(points: list[Vec], length: Sequence[float], target: Vec) -> None:
    """The paper's forward reaching on one chain's joints p_0..p_n (its Algorithm 1): p_n onto the target, then
    each p_i onto the line to where it was, at d_i from p_{i+1}. `forward_reaching` is the same pass for trees."""
    px, py, pz = target  # p_{i+1} as placed
    ox, oy, oz = points[-1]  # p_{i+1} as it was
    points[-1] = (px, py, pz)
    for i in range(len(length) - 1, -1, -1):
        hx, hy, hz = points[i]
        dx, dy, dz = hx - px, hy - py, hz - pz
        r = math.sqrt(dx * dx + dy * dy + dz * dz)
        if r < EPSILON:  # p_i is where p_{i+1} went: keep the bone's direction
            p = (px + hx - ox, py + hy - oy, pz + hz - oz)
        else:
            s = length[i] / r  # the paper's lambda_i = d_i / r_i
            p = (px + dx * s, py + dy * s, pz + dz * s)
        points[i] = p
        ox, oy, oz = hx, hy, hz
        px, py, pz = p


def chain_backward(points: list[Vec], length: Sequence[float], base: Vec) -> None:
    """The paper's backward reaching on one chain's joints: p_0 back onto its base, then each p_{i+1} onto the
    line to where it was, at d_i from p_i. `backward_reaching` is the same pass for trees."""
    px, py, pz = base  # p_i as placed
    ox, oy, oz = points[0]  # p_i as it was
    points[0] = (px, py, pz)
    for i in range(len(length)):
        tx, ty, tz = points[i + 1]
        dx, dy, dz = tx - px, ty - py, tz - pz
        r = math.sqrt(dx * dx + dy * dy + dz * dz)
        if r < EPSILON:  # p_{i+1} is where p_i went: keep the bone's direction
            p = (px + tx - ox, py + ty - oy, pz + tz - oz)
        else:
            s = length[i] / r
            p = (px + dx * s, py + dy * s, pz + dz * s)
        points[i + 1] = p
        ox, oy, oz = tx, ty, tz
        px, py, pz = p


def forward_reaching(
    tree: MovingTree,
    joints: Joints,
    targets: list[Vec],
    weights: list[float],
    branch: list[float],
    turns: Sequence[tuple[Quat, float] | None] = (),
) -> None:
    """Tips to root: each bone goes where its goals and child branches ask, the weighted centroid of what they ask
    (the paper's sub-base rule); its head follows on the line back to where it was."""
    heads, tails, length = joints.heads, joints.tails, tree.length
    framed = joints.frames is not None
    carried = joints.carried
    for k in reversed(range(len(tree.bones))):
        total = 0.0
        asks = 0
        wx = wy = wz = 0.0  # weighted asks
        px = py = pz = 0.0  # weighted offsets of the asked-for points from the tail
        for g in tree.goals_at[k]:
            w = weights[g]
            if w <= 0.0:
                continue
            ask = t = targets[g]
            wx, wy, wz, total, asks = wx + w * t[0], wy + w * t[1], wz + w * t[2], total + w, asks + 1
        for c in tree.children[k]:
            w = branch[c]
            if w <= 0.0:
                continue
            ask = h = heads[c]
            wx, wy, wz, total, asks = wx + w * h[0], wy + w * h[1], wz + w * h[2], total + w, asks + 1
            if joints.offset[c] is not None:
                o = joints.offset_now(c, k)
                px, py, pz = px + w * o[0], py + w * o[1], pz + w * o[2]
        if total <= 0.0:
            continue  # nothing pulls this bone
        # One ask is taken as it is (w * p / w may be a rounding off p).
        wanted = ask if asks == 1 else (wx / total, wy / total, wz / total)
        if px == py == pz == 0.0:
            turned = framed and (carried is None or carried[k])
            before = joints.direction(k, length[k]) if turned else None
            head = reach(wanted, heads[k], length[k])
            heads[k] = head if head is not None else sub(wanted, sub(tails[k], heads[k]))
            tails[k] = wanted
            if turned:
                joints.turn(k, before, joints.direction(k, length[k]))
        else:
            _move_rigidly(joints, k, add(tails[k], (px / total, py / total, pz / total)), wanted)
        if turns:
            for g in tree.goals_at[k]:
                if turns[g] is not None:
                    _turn_towards(tree, joints, k, *turns[g])
        if framed and tree.limited_child[k] >= 0:
            _respect_child_limit(tree, joints, k, tree.limited_child[k])
        if framed and tree.parent[k] < 0 and tree.limits[k] is not None:
            _respect_base_limit(tree, joints, k)


def _turn_towards(tree: MovingTree, joints: Joints, k: int, rotation: Quat, weight: float) -> None:
    """A rotation goal: turn the tip bone (about its tail, which is on the target) towards the goal's frame."""
    frame = joints.frames[k]
    wanted = quat.slerp(frame, rotation, weight)
    joints.frames[k] = wanted
    joints.heads[k] = sub(joints.tails[k], scale(quat.y_axis(wanted), tree.length[k]))


def _respect_base_limit(tree: MovingTree, joints: Joints, k: int) -> None:
    """Forward pass: a base bone's parent never moves, so its own limit is known now; turn it about its tail."""
    zero = joints.zero[k]
    local = quat.mul(quat.conj(zero), joints.frames[k])
    allowed = limits.constrain(tree.limits[k], local)
    if _same_rotation(allowed, local):
        return
    joints.frames[k] = frame = quat.normalized(quat.mul(zero, allowed))
    joints.heads[k] = sub(joints.tails[k], scale(quat.y_axis(frame), tree.length[k]))


def _move_rigidly(joints: Joints, k: int, point: Vec, wanted: Vec) -> None:
    """FABRIK's move for a bone pulled at a point off its axis: that point to `wanted`, the head onto the line."""
    head, tail = joints.heads[k], joints.tails[k]
    arm = dist(point, head)
    if arm < EPSILON:
        shift = sub(wanted, point)
        joints.heads[k], joints.tails[k] = add(head, shift), add(tail, shift)
        return
    before = scale(sub(point, head), 1.0 / arm)
    new_head = reach(wanted, head, arm) or sub(wanted, sub(point, head))
    after = scale(sub(wanted, new_head), 1.0 / arm)
    turn = quat.arc(before, after, perpendicular(before))
    joints.tails[k] = add(new_head, quat.rotate(turn, sub(tail, head)))
    joints.heads[k] = new_head
    joints.frames[k] = quat.normalized(quat.mul(turn, joints.frames[k]))


def _respect_child_limit(tree: MovingTree, joints: Joints, k: int, c: int) -> None:
    """Forward pass: if child c now sits outside what its limit allows, turn bone k (about c's head) instead."""
    limit = tree.limits[c]
    zero = quat.mul(joints.frames[k], joints.zero[c])
    local = quat.mul(quat.conj(zero), joints.frames[c])
    allowed = limits.constrain(limit, local)
    if _same_rotation(allowed, local):
        return
    # The parent frame for which the child's rotation is exactly `allowed`.
    frame = quat.normalized(quat.mul(quat.mul(joints.frames[c], quat.conj(allowed)), quat.conj(joints.zero[c])))
    hinge = joints.heads[c]
    offset = joints.offset[c]
    joints.frames[k] = frame
    joints.tails[k] = hinge if offset is None else sub(hinge, quat.rotate(frame, offset))
    joints.heads[k] = sub(joints.tails[k], scale(quat.y_axis(frame), tree.length[k]))


def backward_reaching(tree: MovingTree, joints: Joints, before_pass: list[Quat] | None = None) -> None:
    """Root to tips: each base goes back to its fixed place, each head onto its parent, each tail on the line; a
    limited bone's direction is then held within its limit relative to its final parent (`before_pass` lets
    stiffness hold part of the turn back)."""
    heads, tails, length = joints.heads, joints.tails, tree.length
    framed = joints.frames is not None
    carried = joints.carried
    for k in range(len(tree.bones)):
        p = tree.parent[k]
        old_tail = tails[k]
        old_bone = sub(old_tail, heads[k])
        if p < 0:
            heads[k] = joints.base[k]
        elif joints.offset[k] is None:
            heads[k] = tails[p]
        else:
            heads[k] = add(tails[p], joints.offset_now(k, p))
        tail = reach(heads[k], old_tail, length[k])
        tails[k] = tail if tail is not None else add(heads[k], old_bone)
        if not framed or (carried is not None and not carried[k]):
            continue
        joints.turn(k, scale(old_bone, 1.0 / length[k]), joints.direction(k, length[k]))
        limit = tree.limits[k]
        if limit is None:
            continue
        zero = joints.zero_frame(tree, k)
        local = quat.mul(quat.conj(zero), joints.frames[k])
        previous = None
        if before_pass is not None:
            previous = quat.mul(quat.conj(joints.zero_frame(tree, k, before_pass)), before_pass[k])
        allowed = limits.constrain(limit, local, previous)
        if allowed is local:
            continue  # inside its limit: as it is
        joints.frames[k] = frame = quat.normalized(quat.mul(zero, allowed))
        tails[k] = add(heads[k], scale(quat.y_axis(frame), length[k]))


def _same_rotation(a: Quat, b: Quat, eps: float = 1e-12) -> bool:
    """True when two unit quaternions give the same rotation."""
    d = abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
    return d > 1.0 - eps


# The iterations, from one start.


def solve_from(
    tree: MovingTree,
    goals: Sequence[Goal],
    start: Start,
    settings: SolveSettings,
    careful: bool = True,
    halving: bool = False,
    window: int = 0,
) -> tuple[Joints | None, SolveReport]:
    """FABRIK from one start: the joints it leaves (None: the start reaches every goal) and the report. The starts
    the paper leaves open and the poles' turns come first; `careful`, `halving` and `window` decide when an
    iteration is undone or handed over."""
    framed = False
    for goal in goals:  # (a loop, not any() over a generator: every solve asks)
        if goal.rotation is not None or goal.pole is not None:
            framed = True
            break
    joints = Joints(tree, start, framed)
    holds = joints.holds = pole.holds(tree, joints, goals, settings.tolerance, warm_poles(settings)) if framed else []
    for chain, goal in zip(tree.goal_chain, goals):
        bend_if_straight_at(tree, joints, chain, goal, settings.tolerance)
    tolerance = settings.tolerance
    if joints.frames is None and not halving and pulled_at_tip(tree, goals):
        t = goals[0].target
        target = (float(t[0]), float(t[1]), float(t[2]))
        error = dist(joints.tails[-1], target)
        if error <= tolerance:
            return None, SolveReport(0, [error], True, "converged", rotation_errors=[0.0])
        if dist(joints.base[0], target) >= sum(tree.length):  # the paper's reach test: out of reach
            stretch_towards(tree, joints, target)
            error = dist(joints.tails[-1], target)
            reached = error <= tolerance  # (a target exactly at full reach)
            return joints, SolveReport(0, [error], reached, "converged" if reached else "unreachable", rotation_errors=[0.0])
        if goals[0].weight > 0.0:
            if is_two_bone_chain(tree, goals):
                settle_two_bones(tree, joints, target)
            elif spreads(tree, goals, settings) and spread_evenly(tree, joints, target):
                error = dist(joints.tails[-1], target)
                if error <= tolerance:  # (the spread is the solve's one step)
                    return joints, SolveReport(1, [error], True, "converged", rotation_errors=[0.0])
            iterations = _ChainIterations(joints, tree.length, target, tolerance)
            stopping = Stopping(settings, iterations.error, window=window)
            iterate(iterations, stopping)
            joints.heads, joints.tails = iterations.points[:-1], iterations.points[1:]
            return joints, SolveReport(
                stopping.iterations, [iterations.error], stopping.stopped_by == "converged", stopping.stopped_by,
                rotation_errors=[0.0],
            )
    if joints.frames is not None and is_two_bone_chain(tree, goals):
        t = goals[0].target
        target = (float(t[0]), float(t[1]), float(t[2]))
        if settle_two_bones(tree, joints, target):
            # A limb whose pole makes it carry frames, on its target in the plane `pole.holds` turned it to: the
            # passes would leave it where it is.
            return joints, SolveReport(0, [dist(joints.tails[1], target)], True, "converged", rotation_errors=[0.0])
    if spreads(tree, goals, settings):
        t = goals[0].target
        target = (float(t[0]), float(t[1]), float(t[2]))
        if spread_evenly(tree, joints, target):
            for hold in holds:
                pole.turn_about_pole(tree, joints, hold)
            error = dist(joints.tails[-1], target)
            if error <= tolerance:
                return joints, SolveReport(1, [error], True, "converged", rotation_errors=[0.0])
    iterations = _TreeIterations(tree, joints, goals, holds, tolerance)
    error, reached, pulling = iterations.measure()
    report = SolveReport(0, iterations.errors, reached, "converged", rotation_errors=iterations.angles)
    if reached and joints.frames is None:
        return None, report
    report.converged = False  # a limited start pose still has to be brought inside its limits
    stopping = Stopping(settings, error, pulling, window, halving)
    iterate(iterations, stopping, careful=careful and joints.frames is not None)
    report.iterations, report.stopped_by = stopping.iterations, stopping.stopped_by
    report.converged = stopping.stopped_by == "converged"
    report.errors, report.rotation_errors = iterations.errors, iterations.angles
    return joints, report


class _ChainIterations:
    """The paper's Algorithm 1 on one free chain's joints p_0..p_n (the heads, then the tip), for
    `stopping.iterate`."""

    def __init__(self, joints: Joints, length: Sequence[float], target: Vec, tolerance: float) -> None:
        self.points = joints.heads + [joints.tails[-1]]
        self.length, self.target, self.base, self.tolerance = length, target, joints.base[0], tolerance
        self.error = dist(self.points[-1], target)

    def step(self, reach: float) -> tuple[float, bool, float]:
        """Both passes (a free chain is never descended carefully: `reach` is the whole way), and the error."""
        points = self.points
        chain_forward(points, self.length, self.target)
        chain_backward(points, self.length, self.base)
        self.error = error = dist(points[-1], self.target)
        return error, error <= self.tolerance, error

    def snapshot(self) -> tuple:
        return self.points[:], self.error

    def restore(self, snapshot: tuple) -> None:
        self.points, self.error = snapshot[0][:], snapshot[1]


class _TreeIterations:
    """FABRIK's iterations on a tree (`forward_reaching`, the poles' holds, `backward_reaching`) and the errors
    they leave, for `stopping.iterate`."""

    def __init__(
        self, tree: MovingTree, joints: Joints, goals: Sequence[Goal], holds: list[pole.PoleHold], tolerance: float
    ) -> None:
        self.tree, self.joints, self.goals, self.holds, self.tolerance = tree, joints, goals, holds, tolerance
        self.targets = [tuple(float(c) for c in g.target) for g in goals]
        self.weights = [float(g.weight) for g in goals]
        self.node_of_goal = tree.tips
        self.branch = branch_weights(tree, self.weights)
        turns = [None if g.rotation is None else (quat.normalized(g.rotation), g.rotation_weight) for g in goals]
        self.turns = turns if any(t is not None for t in turns) else []
        #: (goal, tip node, rotation, chain reach) per rotation goal.
        self.rotation_goals = [
            (g, self.node_of_goal[g], turn[0], chain_reach(tree, tree.goal_chain[g]))
            for g, turn in enumerate(self.turns) if turn
        ]
        self.pulling = [g for g, goal in enumerate(goals) if goal.weight > 0.0]
        self.stiff = tree.is_stiff
        self.errors: list[float] = []
        self.angles: list[float] = []

    def step(self, reach: float) -> tuple[float, bool, float]:
        tree, joints = self.tree, self.joints
        before_pass = list(joints.frames) if self.stiff else None
        aims = self.targets
        if reach < 1.0:
            aims = [part_way(joints.tails[self.node_of_goal[g]], t, reach) for g, t in enumerate(aims)]
        forward_reaching(tree, joints, aims, self.weights, self.branch, self.turns)
        for hold in self.holds:
            pole.turn_about_pole(tree, joints, hold)
        backward_reaching(tree, joints, before_pass)
        return self.measure()

    def measure(self) -> tuple[float, bool, float]:
        """The error the iterations lower: tip distances, and rotation goals' angles at their chains' reach."""
        goals = self.goals
        self.errors = errors = goal_errors(self.tree, self.joints, goals, self.node_of_goal)
        self.angles = angles = rotation_errors(self.joints, self.rotation_goals, len(goals))
        summed = sum(errors) + sum(angles[g] * span * goals[g].rotation_weight for g, _, _, span in self.rotation_goals)
        reached = goals_reached(goals, errors, angles, self.rotation_goals, self.tolerance)
        return summed, reached, sum(errors[g] for g in self.pulling)

    def snapshot(self) -> tuple:
        return self.joints.snapshot(), self.errors, self.angles

    def restore(self, snapshot: tuple) -> None:
        self.joints.restore(snapshot[0])
        self.errors, self.angles = snapshot[1], snapshot[2]


# The paper's reach test, and the errors.




def stretch_towards(tree: MovingTree, joints: Joints, target: Vec) -> None:
    """Lay a single connected chain straight from its base towards an unreachable target."""
    base = joints.base[0]
    reach_total = sum(tree.length)
    direction = scale(sub(target, base), 1.0 / dist(target, base))
    along = 0.0
    for k in range(len(tree.bones)):
        joints.heads[k] = add(base, scale(direction, along))
        along += tree.length[k]
        joints.tails[k] = add(base, scale(direction, along))
    assert abs(along - reach_total) < 1e-9 * max(1.0, reach_total)


def goal_errors(tree: MovingTree, joints: Joints, goals: Sequence[Goal], node_of_goal: list[int]) -> list[float]:
    """Distance from each effector to its target."""
    return [dist(joints.tails[node_of_goal[g]], goal.target) for g, goal in enumerate(goals)]


def rotation_errors(joints: Joints, rotation_goals: list, count: int) -> list[float]:
    """Per goal, the angle (radians) between its tip bone's frame and its rotation goal; 0 without one."""
    angles = [0.0] * count
    for g, node, goal_rotation, _ in rotation_goals:
        angles[g] = quat.angle_between(joints.frames[node], goal_rotation)
    return angles


def goals_reached(
    goals: Sequence[Goal], errors: list[float], angles: list[float], rotation_goals: list, tolerance: float
) -> bool:
    """Every goal reached (`problem.goal_reached`; a rotation goal's angle counts at its chain's reach)."""
    if max(errors) > tolerance:
        return False
    return all(goal_reached(goals[g], errors[g], angles[g], span, tolerance) for g, _, _, span in rotation_goals)


def part_way(tip: Vec, target: Vec, step: float) -> Vec:
    """The point `step` of the way from tip to target."""
    return (tip[0] + step * (target[0] - tip[0]), tip[1] + step * (target[1] - tip[1]), tip[2] + step * (target[2] - tip[2]))


