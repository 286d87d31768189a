# SPDX-License-Identifier: GPL-3.0-or-later
"""The tree types the solvers work on: the bones some goals move, and FABRIK's joints on them.

`MovingTree` is the part of a skeleton the goals move, as a tree of its own
(built once per goal layout and kept on the skeleton). `Start` is where one
solve of it starts, and `Joints` is FABRIK's working state on it: each moving
bone's head and tail, and its frame where limits, offsets or the goals need
it, on plain floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Sequence

import numpy as np

from ..math import matrix_rows, quat
from ..math.quat import Quat
from ..math.vec import Vec, perpendicular, scale, sub
from .limits import JointLimit
from .problem import Goal
from .skeleton import Pose, Skeleton, pose_with, zero_links

__all__ = [
    "Joints", "MovingTree", "Start", "branch_weights", "chain_reach", "components", "moving_tree", "posed", "pulls",
    "swung_frames", "tails_of",
]


@dataclass
class TreeKept:
    """What the solvers work out from a tree alone and keep for its next solve, each under its own name (the tree is
    kept per goal layout, so a live rig's frames share it)."""

    #: Per node: it and every node below it (`MovingTree.subtree`).
    subtrees: dict = field(default_factory=dict)
    #: Per chain: its bones' summed length (`chain_reach`).
    reaches: dict = field(default_factory=dict)
    #: The effector weights last asked for, and each node's summed weight at or below it (`branch_weights`).
    branch: tuple | None = None
    #: Per goal: whether no other goal hangs below its pole's chain (`pole`).
    pole_alone: dict = field(default_factory=dict)
    #: Per set of nodes with rotation goals: the goals' structure (`tree_goals.TreeGoals`).
    goal_structures: dict = field(default_factory=dict)
    #: Per chain: its longest reach from its fixed base (`tree_goals.TreeGoals`).
    longest_reach: dict = field(default_factory=dict)
    #: Per (idle twists, goal nodes): the coordinates a solve may move (`angles.freedom`).
    freedoms: dict = field(default_factory=dict)
    #: What forward kinematics of the nodes needs (`local.local_tree`).
    local: object = None


@dataclass(frozen=True)
class MovingTree:
    """The bones some goal may move, as a tree of their own (parents first): a node's parent is its nearest moving
    ancestor, the bones in between a rigid offset; a node without one keeps its head, the fixed base of a chain."""

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
    #: What solvers work out from the tree alone and keep for its next solve.
    kept: TreeKept = field(default_factory=TreeKept, init=False, compare=False, repr=False)

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

    def subtree(self, k: int) -> tuple[int, ...]:
        """Node k and every node below it, parents first (kept with the tree: poles ask on every frame)."""
        known = self.kept.subtrees.get(k)
        if known is None:
            below = {k}
            for j in range(k + 1, len(self.bones)):
                if self.parent[j] in below:
                    below.add(j)
            known = self.kept.subtrees[k] = tuple(sorted(below))
        return known

    @cached_property  # (the tree is cached per goal layout, and solves ask on every frame)
    def is_limited(self) -> bool:
        """True when some node has a joint limit."""
        return any(limit is not None for limit in self.limits)

    @cached_property
    def is_stiff(self) -> bool:
        """True when some node's limit has stiffness."""
        return any(limit is not None and limit.is_stiff for limit in self.limits)

    @cached_property
    def tips(self) -> tuple[int, ...]:
        """Per goal, the node whose tail is its effector."""
        return tuple(chain[0] for chain in self.goal_chain)

    @cached_property
    def needs_frames(self) -> bool:
        """True when limits or rigid offsets need each bone's frame carried through the passes."""
        return self.is_limited or not all(c for c, p in zip(self.connected, self.parent) if p >= 0)

    @cached_property
    def offset_parents(self) -> tuple[bool, ...]:
        """Per node, whether a child hangs from it at an offset (the passes place that child by its frame)."""
        return tuple(any(not self.connected[c] for c in children) for children in self.children)

    def carried_frames(self, framed: bool) -> tuple[bool, ...] | None:
        """Per node, whether FABRIK's passes turn its frame as it moves (None: all of them, where limits or goals
        that read frames need them); the others turn once, the shortest way, when the passes are done, as every bone
        of a free chain does."""
        if framed or self.is_limited:
            return None
        return self.offset_parents

    @cached_property
    def base_nodes(self) -> tuple[int, ...]:
        """The nodes without a moving parent: each chain's fixed base."""
        return tuple(k for k, p in enumerate(self.parent) if p < 0)

    @cached_property
    def is_single_chain(self) -> bool:
        """True when the nodes form one unbranched chain."""
        return sum(1 for p in self.parent if p < 0) == 1 and all(len(c) <= 1 for c in self.children)


def moving_tree(skeleton: Skeleton, goals: Sequence[Goal]) -> MovingTree:
    """The moving part of the skeleton for these goals (cached per goal layout)."""
    key = tuple((g.bone, g.chain_length) for g in goals)
    tree = skeleton.kept.trees.get(key)
    if tree is None:
        tree = skeleton.kept.trees[key] = _build_moving_tree(skeleton, goals)
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


def components(tree: MovingTree) -> list[list[int]]:
    """The goals grouped by the part of the moving tree they pull: chains that share no bones never meet."""
    root_of = []
    for k, p in enumerate(tree.parent):
        root_of.append(k if p < 0 else root_of[p])
    groups: dict[int, list[int]] = {}
    for g, chain in enumerate(tree.goal_chain):
        groups.setdefault(root_of[chain[0]], []).append(g)
    return list(groups.values())


def chain_reach(tree: MovingTree, chain: tuple[int, ...]) -> float:
    """The summed length of a chain's bones: the scale at which a rotation goal's angle counts as a distance
    (kept with the tree: every solve's status asks for each goal's)."""
    reach = tree.kept.reaches.get(chain)
    if reach is None:
        reach = tree.kept.reaches[chain] = sum(tree.length[k] for k in chain)
    return reach


def branch_weights(tree: MovingTree, weights: list[float]) -> tuple[float, ...]:
    """For each node, the summed weight of the effectors at or below it (kept with the tree for the last weights
    asked: a live rig asks for the same every frame)."""
    key = tuple(weights)
    known = tree.kept.branch
    if known is not None and known[0] == key:
        return known[1]
    branch = [sum(weights[g] for g in goals) for goals in tree.goals_at]
    for k in reversed(range(len(tree.bones))):
        p = tree.parent[k]
        if p >= 0:
            branch[p] += branch[k]
    tree.kept.branch = key, tuple(branch)
    return tree.kept.branch[1]


def pulls(tree: MovingTree, weights: list[float]) -> list[tuple[float, list[tuple[str, int, float]]]]:
    """Per node, what pulls its tail in the forward pass, as the passes on numpy rows use it: (total weight,
    [("goal" | "child", index, weight)]); goals and child branches without weight do not pull."""
    branch = branch_weights(tree, weights)
    out = []
    for k in range(len(tree.bones)):
        node = [("goal", g, float(weights[g])) for g in tree.goals_at[k] if weights[g] > 0.0]
        node += [("child", c, float(branch[c])) for c in tree.children[k] if branch[c] > 0.0]
        out.append((sum(w for _, _, w in node), node))
    return out


class Start:
    """Where one solve of a moving tree starts: each node's frame, head and tail, and `zero` (the turn to its frame
    with no rotation of its own); made from a pose (`of_pose`) or by forward kinematics (`local.start_of`), the
    whole pose only where asked (`pose`)."""

    __slots__ = (
        "frames", "heads", "tails", "zero", "rotations", "fixed", "translations", "_pose", "_make_pose", "_place",
        "_rotations_of",
    )

    def __init__(
        self,
        frames: list[Quat] | None,
        heads: list[Vec] | None,
        tails: list[Vec] | None,
        zero: list[Quat] | None,
        pose: Pose | Callable[[], Pose],
        rotations: list[Quat] | None = None,
        fixed: list | None = None,
        translations: list | None = None,
        place: Callable[[], tuple[list[Quat], list[Vec], list[Vec], list[Quat]]] | None = None,
        rotations_of: Callable[[], list[Quat]] | None = None,
    ) -> None:
        """`place`, where given, makes frames, heads, tails and zero when one of them is first asked for (a solve
        that goes on from what the last frame left may need none of them); `rotations_of`, where given, makes the
        rotations when first asked for (a start placed where the last solve left it)."""
        if place is None:
            self.frames, self.heads, self.tails, self.zero = frames, heads, tails, zero
        if rotations_of is None:
            self.rotations = rotations
        self.fixed, self.translations = fixed, translations
        self._pose, self._make_pose = (pose, None) if isinstance(pose, Pose) else (None, pose)
        self._place, self._rotations_of = place, rotations_of

    def __getattr__(self, name: str):
        # (only reached for a slot not yet set: a start made with `place` or `rotations_of`)
        if name == "rotations" and object.__getattribute__(self, "_rotations_of") is not None:
            self.rotations = self._rotations_of()
            self._rotations_of = None
            return self.rotations
        place = object.__getattribute__(self, "_place")
        if place is None or name not in ("frames", "heads", "tails", "zero"):
            raise AttributeError(name)
        self.frames, self.heads, self.tails, self.zero = place()
        self._place = None
        return object.__getattribute__(self, name)

    @classmethod
    def of_pose(cls, skeleton: Skeleton, tree: MovingTree, pose: Pose) -> "Start":
        """A tree's start as a whole pose has it."""
        moving = list(tree.bones)
        frames = [quat.from_matrix(m) for m in pose.frames[moving].tolist()]
        heads = [tuple(h) for h in pose.heads[moving].tolist()]
        tails = [tuple(t) for t in pose.tails[moving].tolist()]
        return cls(frames, heads, tails, zero_links(skeleton, tree.bones, tree.parent, pose), pose)

    def pose(self) -> Pose:
        """The whole start pose (made once, when first asked for)."""
        if self._pose is None:
            self._pose = self._make_pose()
        return self._pose

    def moved(self, skeleton: Skeleton, tree: MovingTree, frames: list[Quat], heads: list[Vec]) -> "Start":
        """This start with the nodes at other frames and heads (the bones below them follow rigidly in its pose):
        where a solve goes on from what another method left."""
        tails = tails_of(frames, heads, tree.length)
        return Start(frames, heads, tails, self.zero, lambda: posed(skeleton, tree, self.pose(), frames, heads))


def tails_of(frames: Sequence[Quat], heads: Sequence[Vec], lengths: Sequence[float]) -> list[Vec]:
    """Each bone's tail: its head and its length along its frame's Y axis."""
    return [
        (h[0] + 2.0 * (x * y - w * z) * n, h[1] + (1.0 - 2.0 * (x * x + z * z)) * n, h[2] + 2.0 * (y * z + w * x) * n)
        for h, (w, x, y, z), n in zip(heads, frames, lengths)
    ]


def posed(skeleton: Skeleton, tree: MovingTree, start: Pose, frames: list[Quat], heads: list[Vec]) -> Pose:
    """The pose with the tree's nodes at these frames (unit quaternions) and heads; the bones below them follow
    rigidly, the others stay as they were."""
    matrices = matrix_rows.orthonormalized(matrix_rows.quaternion_to_matrix(np.array(frames).reshape(-1, 4)))
    return pose_with(skeleton, start, list(tree.bones), np.array(heads).reshape(-1, 3), matrices)


class Joints:
    """FABRIK's working state: head, tail and (when limits, offsets or the goals need it) frame of every node."""

    __slots__ = ("heads", "tails", "base", "offset", "frames", "zero", "carried", "holds")

    def __init__(self, tree: MovingTree, start: Start, framed: bool = False) -> None:
        """The joints as `start` places them; `framed`: goals that read frames (poles, rotation goals)."""
        self.heads: list[Vec] = list(start.heads)
        self.tails: list[Vec] = list(start.tails)
        #: The fixed head of each base node (None for the others).
        self.base: list[Vec | None] = [None] * len(self.heads)
        for k in tree.base_nodes:
            self.base[k] = self.heads[k]
        #: Each node's head offset from its parent's tail in the parent's frame (None when connected).
        self.offset: list[Vec | None] = [None] * len(tree.bones)
        #: Armature-space frame of each node, or None for a free connected tree that needs none.
        self.frames: list[Quat] | None = None
        #: Per node, Q such that the frame the bone has with no rotation of its own is parent frame * Q
        #: (or Q itself for a base node, whose parent does not move).
        self.zero: list[Quat] = []
        #: Per node, whether the passes turn its frame as it moves (None: every node's; `carried_frames`).
        self.carried: tuple[bool, ...] | None = None
        #: What keeps the chains turned the way their poles say through a solve (`pole.holds`), where one made it.
        self.holds: list = []
        if not (framed or tree.needs_frames):
            return  # a free connected tree: positions are all the passes need
        self.carried = tree.carried_frames(framed)
        frames = start.frames
        for k, p in enumerate(tree.parent):
            if p >= 0 and not tree.connected[k]:
                self.offset[k] = quat.rotate(quat.conj(frames[p]), sub(self.heads[k], self.tails[p]))
        self.zero = start.zero
        self.frames = list(frames)

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
        self.frames[k] = quat.turned(self.frames[k], before, after)

    def final_frames(self, tree: MovingTree, start: Start) -> list[Quat]:
        """The nodes' frames once the passes are done: those carried as they are, every other one its start frame
        turned the shortest way onto its bone's direction (`swung_frames`)."""
        if self.frames is None:
            return swung_frames(tree, start.frames, self)
        if self.carried is None:
            return self.frames
        return swung_frames(tree, self.frames, self, self.carried)


def _swung_half_round(frame: Quat, a: Vec, b: Vec) -> Quat:
    """The frame turned from its Y axis a onto unit b nearly opposite (a.b below -1 + 1e-6), as
    `matrix_rows.swung_frames` turns it there: a half turn about its X axis made perpendicular to a, then the short
    rest. (`swung_frames` turns every other frame itself.)"""
    x = quat.x_axis(frame)
    kd = a[0] * x[0] + a[1] * x[1] + a[2] * x[2]
    k = (x[0] - kd * a[0], x[1] - kd * a[1], x[2] - kd * a[2])
    n = (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]) ** 0.5
    k = scale(k, 1.0 / n) if n > 1e-9 else perpendicular(a)
    turn = quat.mul(quat.arc((-a[0], -a[1], -a[2]), b, k), (0.0, k[0], k[1], k[2]))
    return quat.normalized(quat.mul(turn, frame))


def swung_frames(
    tree: MovingTree, frames: list[Quat], joints: Joints, carried: Sequence[bool] | None = None
) -> list[Quat]:
    """Each node's start frame turned the shortest way onto its solved direction (as `matrix_rows.swung_frames`);
    the frames of nodes the passes `carried` (`Joints.carried`) as they are (as `Joints.final_frames`)."""
    # (the common turn and its product written out, as in `local.start_of`: once per moving bone every frame)
    heads, tails = joints.heads, joints.tails
    solved: list[Quat] = []
    for k, frame in enumerate(frames):
        if carried is not None and carried[k]:
            solved.append(frame)
            continue
        fw, fx, fy, fz = frame
        head, tail = heads[k], tails[k]
        bx, by, bz = tail[0] - head[0], tail[1] - head[1], tail[2] - head[2]
        n = 1.0 / math.sqrt(bx * bx + by * by + bz * bz)
        bx, by, bz = bx * n, by * n, bz * n
        # a: the frame's Y axis (quat.y_axis), the bone's start direction
        ax, ay, az = 2.0 * (fx * fy - fw * fz), 1.0 - 2.0 * (fx * fx + fz * fz), 2.0 * (fy * fz + fw * fx)
        d = ax * bx + ay * by + az * bz
        if d >= -1.0 + 1e-6:
            # the frame turned by quat.arc(a, b) = (1 + a.b, a x b) / its length: the product with the unit frame
            # has that length too, so it is divided by it once
            tw, tx, ty, tz = 1.0 + d, ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
            n = math.sqrt(tw * tw + tx * tx + ty * ty + tz * tz)
            frame = (
                (tw * fw - tx * fx - ty * fy - tz * fz) / n,
                (tw * fx + tx * fw + ty * fz - tz * fy) / n,
                (tw * fy - tx * fz + ty * fw + tz * fx) / n,
                (tw * fz + tx * fy - ty * fx + tz * fw) / n,
            )
        else:
            frame = _swung_half_round(frame, (ax, ay, az), (bx, by, bz))
        solved.append(frame)
    return solved
