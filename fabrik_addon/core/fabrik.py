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
Algorithm 1; `iterate_chain`); `forward_reaching` and
`backward_reaching` are the same passes for trees, frames and limits.

Joint limits act inside both passes, as in the constrained forms of FABRIK:
in the backward pass each limited bone's direction is projected into the cone
its parent allows; in the forward pass, where the child has already moved,
the parent is turned instead so that the child's limit holds. For that, and
for unconnected bones (a head offset that is rigid in the parent's frame),
each bone's full frame is carried through the passes, turned by the shortest
rotation whenever its direction changes, so its roll is kept.

The iterations stop when every effector is within tolerance, when a few
iterations in a row no longer lower the error (the best pose is kept), or at
the iteration cap. A single free chain whose target is out of reach is
stretched straight towards it at once, as in the paper; two free bones
start on the triangle their iterations converge to (`settle_two_bones`),
which near full reach they would crawl to for hundreds of iterations.

Around the passes, `solve` does what the paper leaves open. Poles follow
Blender's rule (`pole`). IK stretch grows bones first (`stretch`). Under
joint limits, FABRIK's straight-line moves get a chain near its target in a
few iterations but then fight the limits, so once an iteration no longer
halves the error the pose goes to a refinement in the limits' own angles
(`refine`), and dead ends of the limits get other start poses; one
iteration cap covers all of it, and chains that share no bones are solved
apart. Free trees with unconnected bones crawl in FABRIK too (a finger
hanging off the palm pulls it about its offset): once the error has not
halved over a few iterations, the same refinement finishes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Sequence

import numpy as np

from . import limits, matrix_rows, pole, quat, refine
from . import stretch as ik_stretch
from .problem import Goal, Progress, SolveReport, SolveSettings, begin, goal_reached
from .skeleton import Pose, Skeleton, pose_with, zero_links
from .limits import JointLimit
from .quat import Quat
from .vec import EPSILON, Vec, add, dist, dot, norm, perpendicular, reach, scale, sub

__all__ = ["solve"]


@dataclass(frozen=True)
class MovingTree:
    """The bones some goal may move, as a tree of their own (nodes in parent-first order).

    A node's parent is its nearest moving ancestor; bones between the two
    stay as they are, so they act as a rigid offset. A node without a moving
    ancestor keeps its head where it is: that is the fixed base of a chain.
    """

    bones: tuple[int, ...]
    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    length: tuple[float, ...]
    #: Goal indices whose effector is the tail of each node.
    goals_at: tuple[tuple[int, ...], ...]
    #: The joint limit of each node (None when free).
    limits: tuple[JointLimit | None, ...]
    #: Per node, its only child when that child is limited (the forward pass then respects it), else -1.
    limited_child: tuple[int, ...]
    #: Per node, whether its head sits on its moving parent's tail (False for base nodes).
    connected: tuple[bool, ...]
    #: Per goal, the nodes of its chain, tip first.
    goal_chain: tuple[tuple[int, ...], ...]
    #: What solvers derive from the tree alone and keep for its next solve (the tree is cached per goal layout).
    derived: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def part(self, goal_ids: Sequence[int]) -> tuple[MovingTree, list[int]]:
        """The tree of some goals' chains alone (a group of `components`), and which of this tree's nodes are its
        nodes; the same tree `moving_tree` builds for those goals."""
        nodes = sorted({k for g in goal_ids for k in self.goal_chain[g]})
        node_of = {k: i for i, k in enumerate(nodes)}
        goal_of = {g: i for i, g in enumerate(goal_ids)}
        return MovingTree(
            tuple(self.bones[k] for k in nodes),
            tuple(node_of.get(self.parent[k], -1) for k in nodes),
            tuple(tuple(node_of[c] for c in self.children[k] if c in node_of) for k in nodes),
            tuple(self.length[k] for k in nodes),
            tuple(tuple(goal_of[g] for g in self.goals_at[k] if g in goal_of) for k in nodes),
            tuple(self.limits[k] for k in nodes),
            tuple(node_of.get(self.limited_child[k], -1) for k in nodes),
            tuple(self.connected[k] for k in nodes),
            tuple(tuple(node_of[k] for k in self.goal_chain[g]) for g in goal_ids),
        ), nodes

    def subtree(self, k: int) -> list[int]:
        """Node k and every node below it, parents first."""
        below = {k}
        for j in range(k + 1, len(self.bones)):
            if self.parent[j] in below:
                below.add(j)
        return sorted(below)

    @cached_property  # (the tree is cached per goal layout, and solves ask on every frame)
    def needs_frames(self) -> bool:
        """True when limits or rigid offsets need each bone's frame carried through the passes."""
        return any(limit is not None for limit in self.limits) or not all(
            c for c, p in zip(self.connected, self.parent) if p >= 0
        )

    @cached_property
    def offset_parents(self) -> tuple[bool, ...]:
        """Per node, whether a child hangs from it at an offset (the passes place that child by its frame)."""
        return tuple(any(not self.connected[c] for c in children) for children in self.children)

    def carried_frames(self, framed: bool) -> tuple[bool, ...] | None:
        """Per node, whether FABRIK's passes turn its frame as it moves; None for every node, where limits, or
        goals that read frames (`framed`: poles, rotation goals), need them all. Otherwise only the frames
        children hang from at an offset are needed on the way; the others turn once, the shortest way, when the
        passes are done (`Joints.final_frames`), as every bone of a free chain does."""
        if framed or any(limit is not None for limit in self.limits):
            return None
        return self.offset_parents

    @cached_property
    def is_single_chain(self) -> bool:
        """True when the nodes form one unbranched chain."""
        return sum(1 for p in self.parent if p < 0) == 1 and all(len(c) <= 1 for c in self.children)


def moving_tree(skeleton: Skeleton, goals: Sequence[Goal]) -> MovingTree:
    """The moving part of the skeleton for these goals (cached per goal layout)."""
    key = ("moving_tree", tuple((g.bone, g.chain_length) for g in goals))
    tree = skeleton._cache.get(key)
    if tree is None:
        tree = _build_moving_tree(skeleton, goals)
        skeleton._cache[key] = tree
    return tree


def _build_moving_tree(skeleton: Skeleton, goals: Sequence[Goal]) -> MovingTree:
    """Union of the goals' chains, re-linked to nearest moving ancestors."""
    moving: set[int] = set()
    for goal in goals:
        path = skeleton.path_to_root(goal.bone)
        moving.update(path if goal.chain_length == 0 else path[: goal.chain_length])
    bones = tuple(b for b in skeleton.order if b in moving)
    node_of = {b: k for k, b in enumerate(bones)}
    parent = []
    for b in bones:
        a = skeleton.parents[b]
        while a >= 0 and a not in node_of:
            a = skeleton.parents[a]
        parent.append(node_of.get(a, -1))
    children = tuple(tuple(c for c, p in enumerate(parent) if p == k) for k in range(len(bones)))
    goals_at = tuple(tuple(g for g, goal in enumerate(goals) if goal.bone == b) for b in bones)
    length = tuple(float(skeleton.lengths[b]) for b in bones)
    node_limits = tuple(skeleton.limits[b] for b in bones)
    limited_child = tuple(c[0] if len(c) == 1 and node_limits[c[0]] is not None else -1 for c in children)
    connected = tuple(
        p >= 0 and skeleton.parents[b] == bones[p] and not skeleton.offsets[b].any() for b, p in zip(bones, parent)
    )
    goal_chain = []
    for goal in goals:
        path = skeleton.path_to_root(goal.bone)
        path = path if goal.chain_length == 0 else path[: goal.chain_length]
        goal_chain.append(tuple(node_of[b] for b in path))
    return MovingTree(
        bones, tuple(parent), children, length, goals_at, node_limits, limited_child, connected, tuple(goal_chain)
    )


class Joints:
    """The working state: head, tail and (when limits or offsets need it) frame of every moving bone."""

    def __init__(self, skeleton: Skeleton, tree: MovingTree, start: Pose, framed: bool = False) -> None:
        moving = list(tree.bones)
        # Plain floats (tolist), not numpy scalars: the passes do their arithmetic several times faster on them.
        self.heads: list[Vec] = [tuple(h) for h in start.heads[moving].tolist()]
        self.tails: list[Vec] = [tuple(t) for t in start.tails[moving].tolist()]
        #: The fixed head of each base node (None for the others).
        self.base: list[Vec | None] = [self.heads[k] if p < 0 else None for k, p in enumerate(tree.parent)]
        #: Each node's head offset from its parent's tail in the parent's frame (None when connected).
        self.offset: list[Vec | None] = [None] * len(tree.bones)
        #: Armature-space frame of each node, or None for a free connected tree that needs none.
        self.frames: list[Quat] | None = None
        #: Per node, Q such that the frame the bone has with no rotation of its own is parent frame * Q
        #: (or Q itself for a base node, whose parent does not move).
        self.zero: list[Quat] = []
        #: Per node, whether the passes turn its frame as it moves (None: every node's; `carried_frames`).
        self.carried: tuple[bool, ...] | None = None
        if not (framed or tree.needs_frames):
            return  # a free connected tree: positions are all the passes need
        self.carried = tree.carried_frames(framed)
        start_frames = [quat.from_matrix(m) for m in start.frames[moving].tolist()]
        for k, p in enumerate(tree.parent):
            if p >= 0 and not tree.connected[k]:
                self.offset[k] = quat.rotate(quat.conj(start_frames[p]), sub(self.heads[k], self.tails[p]))
        self.zero = zero_links(skeleton, tree.bones, tree.parent, start)
        self.frames = start_frames

    def snapshot(self) -> tuple:
        """A copy of the joint positions and frames."""
        return list(self.heads), list(self.tails), None if self.frames is None else list(self.frames)

    def restore(self, snapshot: tuple) -> None:
        """Go back to a snapshot."""
        self.heads, self.tails = list(snapshot[0]), list(snapshot[1])
        self.frames = None if snapshot[2] is None else list(snapshot[2])

    def direction(self, k: int, length: float) -> Vec:
        """Current unit direction of node k."""
        return scale(sub(self.tails[k], self.heads[k]), 1.0 / length)

    def offset_now(self, k: int, p: int) -> Vec:
        """Node k's head offset from its parent's tail, turned with the parent."""
        return quat.rotate(self.frames[p], self.offset[k])

    def zero_frame(self, tree: MovingTree, k: int, frames: list[Quat] | None = None) -> Quat:
        """The frame node k would have with no rotation of its own (its limits are relative to it)."""
        p = tree.parent[k]
        frames = self.frames if frames is None else frames
        return self.zero[k] if p < 0 else quat.mul(frames[p], self.zero[k])

    def turn(self, k: int, before: Vec, after: Vec) -> None:
        """Turn node k's frame by the shortest rotation taking direction `before` to `after`."""
        frame = self.frames[k]
        self.frames[k] = quat.normalized(quat.mul(quat.arc(before, after, quat.x_axis(frame)), frame))

    def final_frames(self, tree: MovingTree) -> list[Quat] | None:
        """The nodes' frames once the passes are done: those carried as they are, each other one turned the
        shortest way from its own direction to its bone's."""
        if self.carried is None:
            return self.frames
        out = []
        for k, (frame, carried) in enumerate(zip(self.frames, self.carried)):
            if not carried:
                turn = quat.arc(quat.y_axis(frame), self.direction(k, tree.length[k]), quat.x_axis(frame))
                frame = quat.normalized(quat.mul(turn, frame))
            out.append(frame)
        return out


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


def iterate_chain(
    joints: Joints, length: Sequence[float], target: Vec, settings: SolveSettings, window: int = 0
) -> SolveReport:
    """The paper's Algorithm 1: one free chain pulled at its tip, both passes per iteration until the tip is
    within tolerance, by the stopping rules every solve shares (a stall stops it; the best joints are kept).
    With a `window`, it also stops (stopped_by "handover") once the best error has not halved over that many
    iterations.

    It works on the joints p_0..p_n themselves (the heads, then the tip), as the
    paper does, and leaves the heads and tails of the best iteration in `joints`.
    """
    points = joints.heads + [joints.tails[-1]]
    base = joints.base[0]
    error = dist(points[-1], target)
    report = SolveReport(0, [error], False, "max_iterations", rotation_errors=[0.0])
    progress = Progress(settings, error)
    best, best_error = points[:], error
    history = [error]  # (for the window: the best error after each iteration)
    for iteration in range(1, settings.max_iterations + 1):
        chain_forward(points, length, target)
        chain_backward(points, length, base)
        error = dist(points[-1], target)
        report.iterations = iteration
        if error <= settings.tolerance:
            best, best_error = points, error
            report.converged, report.stopped_by = True, "converged"
            break
        if progress.improves(error):
            best, best_error = points[:], error
        elif progress.stalled:
            report.stopped_by = "stalled"
            break
        if window:
            history.append(best_error)
            if iteration >= window and best_error > 0.5 * history[iteration - window]:
                report.stopped_by = "handover"
                break
    joints.heads, joints.tails = best[:-1], best[1:]
    report.errors = [best_error]
    return report


def forward_reaching(
    tree: MovingTree,
    joints: Joints,
    targets: list[Vec],
    weights: list[float],
    branch: list[float],
    turns: Sequence[tuple[Quat, float] | None] = (),
) -> None:
    """Tips to root: each bone goes where its goals and child branches ask; its head follows on the line.

    Every goal on a bone and every child branch asks for one point of the bone
    to be somewhere: a goal wants the tail on its target, a child wants the
    point it hangs from (the tail, or the tail plus the child's offset) on the
    child's new head. The weighted centroid of those points goes to the
    weighted centroid of the asks -- the paper's sub-base rule -- and the head
    is placed on the line back to where it was.
    """
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


def _bend_if_straight_at(tree: MovingTree, joints: Joints, chain: tuple[int, ...], goal: Goal, tolerance: float) -> None:
    """Bend a straight chain a little when its target lies on its own line (and not on its tip already).

    FABRIK moves joints along lines; with every joint and the target on one
    line no pass can bend the chain (the paper's degenerate case), so it is
    started bent a little about its first bone's X axis.
    """
    if len(chain) < 2:
        return
    top = chain[-1]
    base = joints.heads[top]
    axis = sub(joints.tails[chain[0]], base)
    length = norm(axis)
    if length < EPSILON:
        return
    if dist(joints.tails[chain[0]], goal.target) <= tolerance:
        return  # reached as it is: bent, it would only have to crawl back straight
    axis = scale(axis, 1.0 / length)
    # (the target first: off the line, as it mostly is, it ends the check at once)
    points = [goal.target] + [joints.tails[k] for k in chain]
    for point in points:
        d = sub(point, base)
        if norm(sub(d, scale(axis, dot(d, axis)))) > 1e-5 * length:
            return  # not straight, or the target is off the line (1e-5: single-precision poses count as straight)
    # Bend about the first bone's own X axis, a rig's usual hinge (pole.holds bent a chain with a pole already).
    # At the joint the branch hangs from: the next bone's head, which an offset keeps off this bone's tail.
    hinge = joints.heads[chain[-2]]
    bend_axis = quat.x_axis(joints.frames[top]) if joints.frames is not None else perpendicular(axis)
    turn = quat.about_axis(bend_axis, 0.2)
    for k in tree.subtree(chain[-2]):  # the whole branch turns, not only this goal's chain
        joints.heads[k] = add(hinge, quat.rotate(turn, sub(joints.heads[k], hinge)))
        joints.tails[k] = add(hinge, quat.rotate(turn, sub(joints.tails[k], hinge)))
        if joints.frames is not None:
            joints.frames[k] = quat.normalized(quat.mul(turn, joints.frames[k]))


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
    """Root to tips: each base goes back to its fixed place, each head onto its parent, each tail on the line.

    A limited bone's direction is then projected into what its limit allows
    relative to its parent, which is already final; `before_pass` (the frames
    at the start of the iteration) lets stiffness hold part of the turn back.
    """
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


def solve_chain(
    tree: MovingTree, joints: Joints, goals: Sequence[Goal], settings: SolveSettings, window: int = 0
) -> SolveReport | None:
    """The paper's own case on joints without frames, one chain pulled at its tip: a target out of reach
    stretches it straight at once (the paper's reach test); otherwise its two passes (`iterate_chain`, with
    its `window`), two bones starting on their triangle (`settle_two_bones`). None, the joints untouched, for
    any other tree or a goal of no weight."""
    if not pulled_at_tip(tree, goals):
        return None
    target = tuple(float(c) for c in goals[0].target)
    if dist(joints.base[0], target) >= sum(tree.length):
        stretch_towards(tree, joints, target)
        error = dist(joints.tails[-1], target)
        reached = error <= settings.tolerance  # a target exactly at full reach
        return SolveReport(0, [error], reached, "converged" if reached else "unreachable")
    if goals[0].weight <= 0.0:
        return None
    if is_two_bone_chain(tree, goals):
        settle_two_bones(tree, joints, target)
    return iterate_chain(joints, tree.length, target, settings, window)


def pulled_at_tip(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """One goal on the last bone of a single chain: the paper's own case (its reach test, its two passes)."""
    return len(goals) == 1 and tree.is_single_chain and goals[0].bone == tree.bones[-1]


def is_two_bone_chain(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """True for two connected free bones pulled at the tip by one position goal (a limb without limits)."""
    return (
        len(tree.bones) == 2 and not tree.needs_frames and pulled_at_tip(tree, goals)
        and goals[0].weight > 0.0 and goals[0].rotation is None
    )


def two_bone_triangle(base: Vec, middle: Vec, target: Vec, l1: float, l2: float) -> Vec | None:
    """Where FABRIK's passes leave the middle joint of two bones in the end: the triangle of the two bones and
    the base-target line, in the plane of base, middle joint and target, on the middle joint's side.

    Both passes move the middle joint along lines through points of that plane
    and never across the base-target line, so the iterations stay in it and
    close in on this one triangle; near full reach they crawl (at 99.9 % of
    the reach, hundreds of iterations). None where there is no triangle (out
    of reach, or folded closer than the bones allow) or no plane (the middle
    joint on the line).
    """
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


def goal_errors(tree: MovingTree, joints: Joints, goals: Sequence[Goal], node_of_goal: list[int]) -> list[float]:
    """Distance from each effector to its target."""
    return [dist(joints.tails[node_of_goal[g]], goal.target) for g, goal in enumerate(goals)]


def solve(
    skeleton: Skeleton,
    goals: Sequence[Goal],
    start: Pose | None = None,
    settings: SolveSettings = SolveSettings(),
) -> tuple[Pose, SolveReport]:
    """Move the skeleton so that each goal's bone tip reaches its target; return the pose and a report.

    `settings.max_iterations` caps the whole solve: FABRIK's iterations, the
    refinement's and every restart's together.
    """
    start, nothing_to_do = begin(skeleton, goals, start, settings)
    if nothing_to_do:
        return nothing_to_do
    if ik_stretch.applies(skeleton, goals):  # IK stretch: grow the bones, then solve on them (see `stretch`)
        return ik_stretch.solve(solve, skeleton, goals, start, settings)
    tree = moving_tree(skeleton, goals)
    parts = components(tree)
    if len(parts) > 1:  # chains that share no bones: each stops when it has reached, not when the slowest has
        return _solve_apart(skeleton, goals, parts, start, settings)
    if any(limit is not None for limit in tree.limits):
        return _solve_limited(skeleton, tree, goals, start, settings)
    if tree.needs_frames and all(g.rotation is None and g.pole is None for g in goals):
        return _solve_offsets(skeleton, tree, goals, start, settings)
    joints, report = _solve_from(skeleton, tree, goals, start, settings, careful=True)
    pose = _pose_from_joints(skeleton, start, tree, joints)
    framed = tree.needs_frames or any(g.rotation is not None or g.pole is not None for g in goals)
    left = settings.max_iterations - report.iterations
    if report.converged or report.stopped_by == "unreachable" or not framed or not settings.explore or left <= 0:
        return pose, report
    # The careful descent found no way on from where it started; plain FABRIK may wander
    # further and find the target, within what is left of the budget. The better result wins.
    joints, other = _solve_from(skeleton, tree, goals, pose, replace(settings, max_iterations=left), careful=False)
    other_pose = _pose_from_joints(skeleton, pose, tree, joints)
    total = report.iterations + other.iterations
    if other.converged or sum(other.errors) < sum(report.errors):
        pose, report = other_pose, other
    report.iterations, report.restarts = total, 1
    return pose, report


#: A free tree with offsets hands FABRIK's pose to the refinement once its best error has not halved over this
#: many iterations (`batch_offsets` stops its frames by the same rule).
SLOW_WINDOW = 5

#: In continuity mode, a limited solve whose start has every goal within this share of its chain's reach moves
#: by one settling step where that reaches, else is refined from the start as it is before FABRIK runs (see
#: `_solve_limited`).
NEAR = 0.1


def _solve_offsets(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Pose, settings: SolveSettings
) -> tuple[Pose, SolveReport]:
    """Free trees with unconnected bones (position goals): FABRIK's careful descent, then the refinement.

    On such trees FABRIK's passes slow to a crawl well short of many
    reachable targets (a finger hanging off the palm pulls the palm about
    its offset). So the descent hands over once its best error has not
    halved over `SLOW_WINDOW` iterations, and the refinement (free joints
    turn about three axes) finishes from there; where that stalls, it tries
    again from the start pose itself. One iteration cap covers all of it.
    Frames the descent converges are exactly what `batch_offsets` gives.
    """
    budget = settings.max_iterations
    joints, report = _solve_from(skeleton, tree, goals, start, settings, careful=True, window=SLOW_WINDOW)
    pose = _pose_from_joints(skeleton, start, tree, joints)
    problem = refine.Problem(tree, goals)
    if report.converged or all(g.weight <= 0.0 for g in goals):  # (goals of no weight pull nothing)
        if report.stopped_by == "handover":
            report.stopped_by = "stalled"
        return pose, report
    if problem.out_of_reach(refine.node_heads(tree, start), skeleton, settings.tolerance):
        # No pose reaches every target: FABRIK's stretch towards them is as good an answer, and the
        # per-frame bake (`batch`) need not solve such frames again.
        report.stopped_by = "unreachable"
        return pose, report
    used = report.iterations
    best = pose, report
    for attempt, attempt_start in enumerate((pose, start)):
        if used >= budget or (attempt > 0 and not settings.explore):
            break
        rig = refine.AngleRig(skeleton, tree, attempt_start)
        refined = refine.solve(rig, problem, settings.tolerance, budget - used)
        used += refined.iterations
        if refined.converged or refined.cost < problem.cost(best[1].errors, []):
            best = rig.pose(skeleton, start), SolveReport(
                used, refined.errors, refined.converged, "converged" if refined.converged else refined.stopped_by
            )
        if best[1].converged:
            break
    pose, report = best
    report.iterations, report.restarts = used, attempt
    if not report.converged:
        report.stopped_by = "max_iterations" if used >= budget else "stalled"
    return pose, report


def _near(problem: refine.Problem, rig: refine.AngleRig) -> bool:
    """Whether every goal that pulls is within NEAR of its chain's reach of its target as the rig is posed."""
    return all(
        w <= 0.0 or dist(rig.tip(node), target) <= NEAR * size
        for node, target, w, size in zip(problem.nodes, problem.targets, problem.weights, problem.reach)
    )


def follows_limited(skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """Whether `solve` in continuity mode moves this tree by `follow_limited` where it can: one limited tree
    (chains that share no bones are solved apart) without poles or IK stretch."""
    return (
        any(limit is not None for limit in tree.limits) and len(components(tree)) == 1
        and all(g.pole is None for g in goals) and not ik_stretch.applies(skeleton, goals)
    )


def follow_limited(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], rig: refine.AngleRig, settings: SolveSettings
) -> SolveReport | None:
    """Continuity mode's move on a limited tree (`_solve_limited`): from the rig as the start poses it (the last
    frame's solution), where every goal is near its target and in reach and no pole turns a chain, one settling
    step that reaches every goal (`refine.follow`); what is left of the pull towards rest is the next frame's.
    The report, or None with the rig as it was, where the whole solve must run."""
    if settings.explore or any(g.pole is not None for g in goals):
        return None
    problem = refine.Problem(tree, goals)
    if problem.out_of_reach(rig.heads, skeleton, settings.tolerance) or not _near(problem, rig):
        return None
    return _followed(problem, rig, settings)


def _followed(problem: refine.Problem, rig: refine.AngleRig, settings: SolveSettings) -> SolveReport | None:
    """`follow_limited` where its conditions hold: the report of the settling step, or None where it did not
    reach (the rig as it was)."""
    steps, followed = refine.follow(rig, problem, settings.tolerance, settings.max_iterations)
    if not followed:
        return None
    errors, rotation_errors = refine.goal_errors_of(rig, problem)
    return SolveReport(steps, errors, True, "converged", rotation_errors=rotation_errors)


def _settling_aim(tree: MovingTree, holds: list[pole.PoleHold], to_rest: bool) -> refine.Aim:
    """Where settling pulls: each pole chain's first bone turned about its base-target line into the pole's
    plane (the rest of the chain follows it unchanged), and with `to_rest` every other limited joint to rest."""

    def aim(rig: refine.AngleRig, free: refine.Freedom) -> np.ndarray:
        coordinates = free.coordinates
        wanted = refine.rest_aim(rig, free) if to_rest else np.full(len(coordinates), np.nan)
        for hold in holds:
            top = hold.chain[-1]
            turn = pole.turn_for(hold, rig.heads[top], rig.frames[top])
            if turn is None:
                continue
            for i, value in refine.values_after_turn(rig, coordinates, top, turn).items():
                wanted[i] = value
            for k in hold.chain[:-1]:  # the rest of the chain keeps its shape
                for i, c in enumerate(coordinates):
                    if c.node == k:
                        wanted[i] = np.nan
        return wanted

    return aim


def _report_at(skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], pose: Pose, tolerance: float) -> SolveReport:
    """What a solve that stopped at this pose would report, without an iteration."""
    rig = refine.AngleRig(skeleton, tree, pose)
    refined = refine.solve(rig, refine.Problem(tree, goals), tolerance, 0)
    return SolveReport(0, refined.errors, refined.converged, refined.stopped_by, rotation_errors=refined.rotation_errors)


def components(tree: MovingTree) -> list[list[int]]:
    """The goals grouped by the part of the moving tree they pull: chains that share no bones never meet."""
    root_of = []
    for k, p in enumerate(tree.parent):
        root_of.append(k if p < 0 else root_of[p])
    groups: dict[int, list[int]] = {}
    for g, chain in enumerate(tree.goal_chain):
        groups.setdefault(root_of[chain[0]], []).append(g)
    return list(groups.values())


def _solve_apart(
    skeleton: Skeleton, goals: Sequence[Goal], parts: list[list[int]], start: Pose, settings: SolveSettings
) -> tuple[Pose, SolveReport]:
    """Solve each group of goals that shares no bones with the others on its own, each with the whole budget.

    None of them moves a bone of another, so one stuck or unreachable chain
    costs the others nothing. The report joins theirs: the most iterations
    any of them took, every error, and the first reason one did not converge.
    """
    pose = start
    reports = []
    for part in parts:
        pose, report = solve(skeleton, [goals[g] for g in part], pose, settings)
        reports.append(report)
    return pose, joined_report(parts, reports, len(goals))


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
    return SolveReport(iterations, errors, not stopped, stopped_by, restarts, angles)


def _solve_limited(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Pose, settings: SolveSettings
) -> tuple[Pose, SolveReport]:
    """FABRIK, then the refinement in the limits' own angles; then other starts inside the limits, within one budget.

    Where the limits are open cones, FABRIK first runs as on the free tree
    (`_solve_as_free`): a pose it converges to inside every limit is the
    answer, as the limited passes would have moved every joint alike. Else
    the limited solve goes on from that pose.

    FABRIK's passes bring the chains near their targets in few iterations,
    but its straight-line moves and the limits' angles pull different ways
    once the limits bind, and from there on it stalls. So each attempt runs
    FABRIK while every iteration still halves the error, then hands the pose
    to `refine`, which finishes in the coordinates the limits are written in.
    When that ends in a dead end of the limits, another start pose inside
    them is tried (the same ones every time: deterministic), keeping the
    coordinates that cannot move any goal (a tool's roll without a rotation
    goal) where they were.

    In continuity mode (warm starts) the start is the previous frame's
    solution, settled towards rest: near its targets, one settling step that
    reaches them is the answer (`follow_limited`). Where it does not reach, a
    start near its targets is refined as it is first, and FABRIK's attempt
    follows only where that stalls: the refinement keeps the pose among the
    settled ones, where FABRIK's moves would scatter the joints the goals
    leave free.
    """
    budget = settings.max_iterations
    problem = refine.Problem(tree, goals)
    used, attempt_start = 0, start
    free = _solve_as_free(skeleton, tree, goals, start, settings)
    if free is not None:
        pose, report = free
        used = report.iterations
        if report.converged and _inside_limits(skeleton, tree, start, pose):
            return refine.with_idle_twists_from(skeleton, tree, problem, pose, start), report
        # Some joint left its limit: the limited solve goes on from FABRIK's pose, so that where the limits
        # begin to bind from one frame to the next, the pose moves on from where the free passes had it.
        attempt_start = pose
    aims = problem.out_of_reach(refine.node_heads(tree, start), skeleton, settings.tolerance)
    if aims:
        # Beyond reach: get as close as the limits allow, aiming at the nearest point in reach.
        asked, goals = goals, [replace(g, target=aims[i]) if i in aims else g for i, g in enumerate(goals)]
        problem = refine.Problem(tree, goals)
    out_of_reach = bool(aims)
    # In continuity mode the start is the last frame's settled solution: near its targets, one settling step
    # may reach them (`follow_limited`); else it is refined as it is first (below). FABRIK's straight-line moves
    # would scatter the joints the goals leave free, which settling then brings back, at several times the cost.
    start_rig = None if settings.explore or out_of_reach else refine.AngleRig(skeleton, tree, start)
    near_first = start_rig is not None and _near(problem, start_rig)
    if near_first and all(g.pole is None for g in goals):
        report = _followed(problem, start_rig, settings)
        if report is not None:
            return start_rig.pose(skeleton, start), report
    rng = None  # (made when a random start is first needed)
    attempt = 0
    best: tuple[refine.AngleRig | None, Pose | None, SolveReport] | None = None  # (the rig, or else the pose)
    # Every attempt's idle twists go back to the start pose's.
    twists = refine.start_twists(skeleton, tree, problem, start)
    while True:
        left = replace(settings, max_iterations=budget - used)
        joints = None  # FABRIK's result, where it ran and moved the attempt's start
        rig = None
        if attempt == (0 if near_first else 1):
            # The first other start is the same pose without FABRIK: on arms that turn mostly about their
            # own bones (twists) FABRIK's moves can lead away from where the angles would have gone.
            rig = start_rig if attempt == 0 else refine.AngleRig(skeleton, tree, attempt_start)
            errors, rotation_errors = refine.goal_errors_of(rig, problem)
            converged = problem.reached(errors, rotation_errors, settings.tolerance)
            report = SolveReport(
                0, errors, converged, "converged" if converged else "stalled", rotation_errors=rotation_errors
            )
        else:
            # Stretching towards a target out of reach is FABRIK's own move: let it go on until it stalls there.
            joints, report = _solve_from(skeleton, tree, goals, attempt_start, left, careful=True, handover=not out_of_reach)
        moved = None if joints is None else (joints.heads, joints.frames)
        used += report.iterations
        refined_rig = None
        if not report.converged and rig is None:
            # What is kept is the pose as the limits' coordinates read it (the refinement starts from it too):
            # where FABRIK's best was a start outside the limits (a pole's turn can take the first bone out of
            # them) that no pass beat, that start comes back inside and its tip moves, so its errors are measured
            # again.
            rig = refine.AngleRig(skeleton, tree, attempt_start, moved)
            report.errors, report.rotation_errors = refine.goal_errors_of(rig, problem)
        if not report.converged and used < budget:
            refined = refine.solve(rig, problem, settings.tolerance, budget - used)
            used += refined.iterations
            if refined.cost <= problem.cost(report.errors, report.rotation_errors) or refined.converged:
                refined_rig = rig
                report = SolveReport(
                    used, refined.errors, refined.converged, "converged" if refined.converged else refined.stopped_by,
                    rotation_errors=refined.rotation_errors,
                )
        if refined_rig is None and not report.converged:
            refined_rig = refine.AngleRig(skeleton, tree, attempt_start, moved)  # (again: the refinement moved `rig`)
        pose = None  # (a refined attempt is kept as its rig: the pose is made once, from the best)
        if refined_rig is not None:
            refine.set_idle_twists(refined_rig, problem, twists)
        else:
            pose = _pose_from_joints(skeleton, attempt_start, tree, joints)
            pose = refine.with_idle_twists_from(skeleton, tree, problem, pose, start, twists)
        if best is None or report.converged or problem.cost(report.errors, report.rotation_errors) < problem.cost(
            best[2].errors, best[2].rotation_errors
        ):
            best = refined_rig, pose, report
        fallback = near_first and attempt == 0  # (FABRIK's attempt after the refinement's own, in any mode)
        if best[2].converged or out_of_reach or used >= budget or (
            not fallback and (not settings.explore or attempt >= settings.restarts)
        ):
            break
        attempt += 1
        if attempt > 1 and rng is None:
            rng = np.random.default_rng(len(tree.bones))
        attempt_start = start if attempt == 1 else refine.random_start(skeleton, tree, goals, start, rng)
    rig, pose, report = best
    holds = (
        pole.holds(tree, Joints(skeleton, tree, start, framed=True), goals, settings.tolerance)
        if any(g.pole for g in goals) else []
    )
    if report.converged and (holds or not settings.explore) and used < budget:
        # The joints the goals leave free settle: into the plane the poles ask for (the refinement and the
        # restarts know nothing of poles), and in continuity mode (warm starts) towards rest, so paths that
        # close, close.
        rig = rig or refine.AngleRig(skeleton, tree, pose)
        aim = _settling_aim(tree, holds, to_rest=not settings.explore)
        used += refine.settle(rig, problem, settings.tolerance, budget - used, aim)
        refine.set_idle_twists(rig, problem, twists)
    if rig is not None:
        pose = rig.pose(skeleton, start)
    report.iterations, report.restarts = used, attempt
    if aims:
        tails = pose.tails
        report.errors = [dist(tuple(tails[g.bone]), g.target) for g in asked]
        report.converged = max(report.errors) <= settings.tolerance
    if not report.converged:
        report.stopped_by = "unreachable" if out_of_reach else ("max_iterations" if used >= budget else "stalled")
    return pose, report


def _solve_as_free(
    skeleton: Skeleton, tree: MovingTree, goals: Sequence[Goal], start: Pose, settings: SolveSettings
) -> tuple[Pose, SolveReport] | None:
    """FABRIK's passes on a limited tree as if it were free (the pose and the report, its limits not checked),
    handing over once they crawl; None where the limits change the passes themselves (see `open_cones_as_free`),
    and for rotation goals, poles and continuity mode.

    Where no limit binds, a limited pass moves every joint as the free pass
    does (each projection into a limit leaves the joint as it is): only the
    frames carried through the passes differ, and the refinement the limited
    solve hands over to once the passes stop halving the error. So a chain
    whose cones stay open (a tentacle, a spine) is the paper's free chain,
    with its frames turned by the shortest arc, as on any free chain.
    """
    if not settings.explore or any(g.rotation is not None or g.pole is not None for g in goals):
        return None  # (rotation goals and poles need the frames; continuity mode settles the limited solve's pose)
    free = open_cones_as_free(tree)
    if free is None:
        return None
    joints, report = _solve_from(skeleton, free, goals, start, settings, careful=True, window=SLOW_WINDOW)
    return _pose_from_joints(skeleton, start, free, joints), report


def open_cones_as_free(tree: MovingTree) -> MovingTree | None:
    """The tree without its limits, where every bone hangs from its parent's tail and every limit leaves the rest
    direction a cone to swing in and the rest twist a range to turn in (no lock, hinge or stiffness); else None.
    (Kept with the tree.)"""
    if "free" not in tree.derived:
        tree.derived["free"] = _without_open_cones(tree)
    return tree.derived["free"]


def _without_open_cones(tree: MovingTree) -> MovingTree | None:
    """`open_cones_as_free`, worked out."""
    if not all(c for c, p in zip(tree.connected, tree.parent) if p >= 0):
        return None
    for limit in tree.limits:
        if limit is None:
            continue
        (lo_x, hi_x), (lo_z, hi_z), (lo_y, hi_y) = limit.x_range, limit.z_range, limit.y_range
        # (a locked twist: the free passes' shortest turns would leave it a hair off, at every solve)
        if limit.is_stiff or not (lo_x < 0.0 < hi_x and lo_z < 0.0 < hi_z and lo_y < 0.0 < hi_y):
            return None
    n = len(tree.bones)
    return replace(tree, limits=(None,) * n, limited_child=(-1,) * n)


def _inside_limits(skeleton: Skeleton, tree: MovingTree, start: Pose, pose: Pose) -> bool:
    """Whether every limited moving bone of the pose is inside its limit."""
    bones = list(tree.bones)
    frames = [quat.from_matrix(m) for m in pose.frames[bones].tolist()]
    zero = zero_links(skeleton, bones, tree.parent, start)
    for k, limit in enumerate(tree.limits):
        if limit is None:
            continue
        p = tree.parent[k]
        local = quat.mul(quat.conj(zero[k] if p < 0 else quat.mul(frames[p], zero[k])), frames[k])
        if not limits.allows(limit, local):
            return False
    return True


def _solve_from(
    skeleton: Skeleton,
    tree: MovingTree,
    goals: Sequence[Goal],
    start: Pose,
    settings: SolveSettings,
    careful: bool,
    handover: bool = False,
    window: int = 0,
) -> tuple[Joints | None, SolveReport]:
    """FABRIK iterations from one start pose; `careful` undoes iterations that make things worse. The result is
    left in the joints (None: the start pose itself, reached as it is; `_pose_from_joints` makes it a pose).

    With `handover` the iterations stop (stopped_by "handover") at the first
    one that does not halve the error, and with a `window` once the best error
    has not halved over that many iterations: from there on another method finishes.
    """
    framed = any(g.rotation is not None or g.pole is not None for g in goals)
    joints = Joints(skeleton, tree, start, framed)
    targets = [tuple(float(c) for c in g.target) for g in goals]
    turns = [None if g.rotation is None else (quat.normalized(g.rotation), g.rotation_weight) for g in goals]
    if all(t is None for t in turns):
        turns = []
    poles = pole.holds(tree, joints, goals, settings.tolerance)
    for chain, goal in zip(tree.goal_chain, goals):
        _bend_if_straight_at(tree, joints, chain, goal, settings.tolerance)
    weights = [float(g.weight) for g in goals]
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    branch = branch_weights(tree, weights)

    # (goal, tip node, rotation, chain reach) per rotation goal
    rotation_goals = [
        (g, node_of_goal[g], turn[0], chain_reach(tree, tree.goal_chain[g])) for g, turn in enumerate(turns) if turn
    ]

    def summed(errors: list[float], angles: list[float]) -> float:
        """The error the iterations lower: tip distances, and rotation goals' angles at their chains' reach."""
        return sum(errors) + sum(angles[g] * span * goals[g].rotation_weight for g, _, _, span in rotation_goals)

    errors = goal_errors(tree, joints, goals, node_of_goal)
    angles = rotation_errors(joints, rotation_goals, len(goals))
    report = SolveReport(0, errors, goals_reached(goals, errors, angles, rotation_goals, settings.tolerance), "converged", rotation_errors=angles)
    if report.converged and joints.frames is None:
        return None, report
    report.converged = False  # a limited start pose still has to be brought inside its limits

    if joints.frames is None and not handover:
        paper = solve_chain(tree, joints, goals, settings, window)  # (one free chain pulled at its tip)
        if paper is not None:
            return joints, paper
    if is_two_bone_chain(tree, goals) and settle_two_bones(tree, joints, targets[0]):
        # A limb whose pole makes it carry frames, on its target in the plane `pole.holds` turned it to: the
        # passes would leave it where it is.
        report.errors, report.converged = goal_errors(tree, joints, goals, node_of_goal), True
        return joints, report

    # Limits and unconnected bones make FABRIK's passes less well-behaved: one
    # iteration can make things worse and wander off to a far pose. There each
    # iteration reaches for a point part of the way from the tips to the targets,
    # and a step that does not lower the error is undone and tried at half the
    # reach; steps that work let the reach grow back to the whole way.
    controlled = careful and joints.frames is not None
    step = 1.0
    progress = Progress(settings, summed(errors, angles))
    best_joints, best_errors, best_angles = joints.snapshot(), errors, angles
    # For the window: the least summed error of the goals that pull (weight above 0) so far, after each iteration.
    pulling = [g for g, goal in enumerate(goals) if goal.weight > 0.0]
    history = [sum(errors[g] for g in pulling)]
    report.stopped_by = "max_iterations"
    stiff = any(limit is not None and limit.is_stiff for limit in tree.limits)
    for iteration in range(1, settings.max_iterations + 1):
        before_pass = list(joints.frames) if stiff else None
        aims = targets
        if controlled and step < 1.0:
            aims = [_part_way(joints.tails[node_of_goal[g]], t, step) for g, t in enumerate(targets)]
        forward_reaching(tree, joints, aims, weights, branch, turns)
        for hold in poles:
            pole.turn_about_pole(tree, joints, hold)
        backward_reaching(tree, joints, before_pass)
        errors = goal_errors(tree, joints, goals, node_of_goal)
        angles = rotation_errors(joints, rotation_goals, len(goals))
        report.iterations = iteration
        if goals_reached(goals, errors, angles, rotation_goals, settings.tolerance):
            best_joints, best_errors, best_angles = None, errors, angles
            report.converged, report.stopped_by = True, "converged"
            break
        current = summed(errors, angles)
        if handover and current > 0.5 * progress.best:
            report.stopped_by = "handover"
            break
        if progress.improves(current):
            best_joints, best_errors, best_angles = joints.snapshot(), errors, angles
            step = min(1.0, 2.0 * step)
        else:
            if progress.stalled:
                report.stopped_by = "stalled"
                break
            if controlled:
                joints.restore(best_joints)
                step *= 0.5
        if window:
            history.append(min(history[-1], sum(errors[g] for g in pulling)))
            if iteration >= window and history[-1] > 0.5 * history[iteration - window]:
                report.stopped_by = "handover"
                break
    if best_joints is not None:
        joints.restore(best_joints)
    report.errors, report.rotation_errors = best_errors, best_angles
    return joints, report


def chain_reach(tree: MovingTree, chain: tuple[int, ...]) -> float:
    """The summed length of a chain's bones: the scale at which a rotation goal's angle counts as a distance
    (kept with the tree: every solve's status asks for each goal's)."""
    key = ("reach", chain)
    reach = tree.derived.get(key)
    if reach is None:
        reach = tree.derived[key] = sum(tree.length[k] for k in chain)
    return reach


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


def _part_way(tip: Vec, target: Vec, step: float) -> Vec:
    """The point `step` of the way from tip to target."""
    return (tip[0] + step * (target[0] - tip[0]), tip[1] + step * (target[1] - tip[1]), tip[2] + step * (target[2] - tip[2]))


def pulls(tree: MovingTree, weights: list[float], branch: list[float]) -> list[tuple[float, list[tuple[str, int, float]]]]:
    """Per node, what pulls its tail in the forward pass, as the batched solvers use it: (total weight,
    [("goal" | "child", index, weight)]); goals and child branches without weight do not pull."""
    out = []
    for k in range(len(tree.bones)):
        node = [("goal", g, float(weights[g])) for g in tree.goals_at[k] if weights[g] > 0.0]
        node += [("child", c, float(branch[c])) for c in tree.children[k] if branch[c] > 0.0]
        out.append((sum(w for _, _, w in node), node))
    return out


def branch_weights(tree: MovingTree, weights: list[float]) -> tuple[float, ...]:
    """For each node, the summed weight of the effectors at or below it (kept with the tree for the last weights
    asked: a live rig asks for the same every frame)."""
    key = tuple(weights)
    known = tree.derived.get("branch")
    if known is not None and known[0] == key:
        return known[1]
    branch = [sum(weights[g] for g in goals) for goals in tree.goals_at]
    for k in reversed(range(len(tree.bones))):
        p = tree.parent[k]
        if p >= 0:
            branch[p] += branch[k]
    tree.derived["branch"] = (key, tuple(branch))
    return tree.derived["branch"][1]


def _pose_from_joints(skeleton: Skeleton, start: Pose, tree: MovingTree, joints: Joints | None) -> Pose:
    """Turn solved joint positions into a full pose: moving bones swing, the rest follow their parents rigidly
    (no joints: the start pose, as `_solve_from` leaves one reached as it is)."""
    if joints is None:
        return start.copy()
    moving = list(tree.bones)
    if joints.frames is not None:
        frames = matrix_rows.orthonormalized(matrix_rows.quaternion_to_matrix(np.asarray(joints.final_frames(tree))))
    else:
        # A free connected tree carried no frames: each bone turns the shortest way from where it started.
        directions = (np.asarray(joints.tails) - np.asarray(joints.heads)) / np.asarray(tree.length)[:, None]
        frames = matrix_rows.swung_frames(start.frames[moving], directions)
    return pose_with(skeleton, start, moving, np.asarray(joints.heads), frames)
