# SPDX-License-Identifier: GPL-3.0-or-later
"""The skeleton model: bones, their hierarchy and rest frames, and poses of it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..math import matrix_rows, quat
from .limits import JointLimit

#: Bones shorter than this are refused; Blender itself removes zero-length bones.
MIN_BONE_LENGTH = 1e-6
#: A head closer than this fraction of the parent's length to the parent's tail counts as connected,
CONNECTED_TOLERANCE = 1e-5
#: or closer than this fraction of its distance from the origin: Blender keeps rest matrices in single
#: precision (2^-23 relative), and builds each from its parent's, so rounding grows along a chain.
SINGLE_PRECISION = 64 * 2.0**-23



@dataclass
class ShapeKept:
    """What is worked out from a skeleton's hierarchy and rest frames alone, not from its lengths: a scaled copy
    keeps it (`Skeleton.scaled`), so a stretching rig does not work it out again every frame."""

    #: Per (bones, their moving parents): each bone's link to its moving parent where its rest gives it
    #: (`zero_links`).
    zero_links: dict = field(default_factory=dict)
    #: Per set of moved bones: the bones that follow them rigidly (`rigid_followers`).
    followers: dict = field(default_factory=dict)
    #: Per goal layout with stretch: the bones a stretch scales, and those with every bone below them (`stretch`).
    grown: dict = field(default_factory=dict)
    #: Per root bone that moves: it and every bone below it (`plan`).
    below_root: dict = field(default_factory=dict)


@dataclass
class SkeletonKept:
    """What solving works out from a skeleton once and keeps with it, each under its own name."""

    shape: ShapeKept = field(default_factory=ShapeKept)
    #: Per goal layout: the bones the goals move (`tree.moving_tree`).
    trees: dict = field(default_factory=dict)
    #: Per (solver, goal layout): the plan (`plan.plan_for`).
    plans: dict = field(default_factory=dict)


class Skeleton:
    """A bone hierarchy in armature space, held in arrays and validated once: per bone a parent (-1 for a root),
    rest head, rest frame (Y from head to tail, as in Blender), length, head offset from its parent's tail
    (`offsets`) and IK stretch factor."""

    def __init__(
        self,
        parents: Sequence[int],
        rest_heads: Sequence[Sequence[float]],
        rest_frames: Sequence[Sequence[Sequence[float]]],
        lengths: Sequence[float],
        names: Sequence[str] | None = None,
        limits: Sequence[JointLimit | None] | None = None,
        stretch: Sequence[float] | None = None,
        connected: Sequence[bool] | None = None,
    ) -> None:
        n = len(parents)
        self.parents: tuple[int, ...] = tuple(int(p) for p in parents)
        self.names: tuple[str, ...] = tuple(names) if names is not None else tuple(f"bone{i}" for i in range(n))
        #: Each bone's index by name (the first, should two share one).
        self.positions: dict[str, int] = {}
        for i, name in enumerate(self.names):
            self.positions.setdefault(name, i)
        heads = np.asarray(rest_heads, dtype=float).reshape(-1, 3) if n else np.zeros((0, 3))
        frames = np.asarray(rest_frames, dtype=float).reshape(-1, 3, 3) if n else np.zeros((0, 3, 3))
        lens = np.asarray(lengths, dtype=float).reshape(-1)
        if not (len(self.names) == len(heads) == len(frames) == len(lens) == n):
            raise ValueError(
                f"skeleton arrays disagree in size: {n} parents, {len(self.names)} names, "
                f"{len(heads)} heads, {len(frames)} frames, {len(lens)} lengths"
            )
        for label, array in (("rest head", heads), ("rest frame", frames), ("length", lens)):
            bad = np.flatnonzero(~np.isfinite(array.reshape(n, -1)).all(axis=1)) if n else []
            if len(bad):
                raise ValueError(f"bone '{self.names[bad[0]]}' has a {label} that is not a finite number")
        short = np.flatnonzero(lens < MIN_BONE_LENGTH)
        if len(short):
            raise ValueError(f"bone '{self.names[short[0]]}' has zero length ({lens[short[0]]:g})")
        self.order: tuple[int, ...] = _topological_order(self.parents, self.names)
        children: list[list[int]] = [[] for _ in range(n)]
        for c, p in enumerate(self.parents):
            if p >= 0:
                children[p].append(c)
        self.children: tuple[tuple[int, ...], ...] = tuple(map(tuple, children))
        y_lengths = np.linalg.norm(frames[:, :, 1], axis=1) if n else np.zeros(0)
        bad = np.flatnonzero(~(y_lengths >= 1e-9))
        if len(bad):
            raise ValueError(f"bone '{self.names[bad[0]]}' has a rest frame without a usable Y axis")
        self.rest_frames = matrix_rows.orthonormalized(frames) if n else frames
        heads = heads.copy()
        self.rest_heads = heads
        self.lengths = lens
        self.rest_tails = heads + lens[:, None] * self.rest_frames[:, :, 1]
        self.offsets = np.zeros((n, 3))
        #: Per bone, whether it was given as connected to its parent (Blender's `use_connect`), or None.
        self.connected: tuple[bool, ...] | None = None if connected is None else tuple(bool(c) for c in connected)
        for i in self.order:
            p = self.parents[i]
            if p >= 0:
                offset = self.rest_frames[p].T @ (heads[i] - self.rest_tails[p])
                slack = max(
                    CONNECTED_TOLERANCE * lens[p],
                    SINGLE_PRECISION * max(np.linalg.norm(heads[i]), np.linalg.norm(self.rest_tails[p])),
                )
                if not (self.connected and self.connected[i]) and np.linalg.norm(offset) > slack:
                    self.offsets[i] = offset
                else:
                    # Blender stores rest matrices in single precision, so a connected
                    # bone's head is a hair off its parent's tail: put it back on.
                    heads[i] = self.rest_tails[p]
                    self.rest_tails[i] = heads[i] + lens[i] * self.rest_frames[i][:, 1]
        self.limits: tuple[JointLimit | None, ...] = _checked_limits(limits, n, self.names)
        self.stretch: np.ndarray = _checked_stretch(stretch, n, self.names)
        #: Each bone's rest frame and rest head in its parent's rest frame (the head from the parent's head;
        #: armature space for roots): all that forward kinematics needs.
        self.rest_in_parent = np.array(
            [self.rest_frames[i] if p < 0 else self.rest_frames[p].T @ self.rest_frames[i] for i, p in enumerate(self.parents)]
        ).reshape(n, 3, 3)
        self.head_in_parent = np.array(
            [heads[i] if p < 0 else self.rest_frames[p].T @ (heads[i] - heads[p]) for i, p in enumerate(self.parents)]
        ).reshape(n, 3)
        #: `rest_in_parent` as quaternions, for the solver's inner loops.
        self.rest_relative: tuple[quat.Quat, ...] = tuple(quat.from_matrix(m) for m in self.rest_in_parent.tolist())
        self.kept = SkeletonKept()

    def with_limits(self, limits: Sequence[JointLimit | None] | dict[int, JointLimit]) -> "Skeleton":
        """The same skeleton with other joint limits (a list per bone, or a dict bone -> limit)."""
        if isinstance(limits, dict):
            limits = [limits.get(i) for i in range(len(self))]
        return Skeleton(
            self.parents, self.rest_heads, self.rest_frames, self.lengths, self.names, limits, self.stretch, self.connected
        )

    def scaled(self, scale: np.ndarray) -> "Skeleton":
        """The same skeleton with each bone `scale` times as long, each child hanging from its parent's tail at an
        offset grown with the parent: only what lengths decide is worked out again."""
        grown = copy.copy(self)
        n = len(self)
        above = np.ones(n)  # each bone's parent's scale (1 for roots)
        has_parent = np.asarray(self.parents) >= 0
        above[has_parent] = scale[np.asarray(self.parents)[has_parent]]
        grown.lengths = self.lengths * scale
        grown.offsets = self.offsets * above[:, None]
        grown.head_in_parent = self.head_in_parent * above[:, None]
        heads = self.rest_heads.copy()
        moved = (above != 1.0).tolist()
        for b in self.order:
            p = self.parents[b]
            if p >= 0 and (moved[b] or moved[p]):
                moved[b] = True
                heads[b] = heads[p] + self.rest_frames[p] @ grown.head_in_parent[b]
        grown.rest_heads = heads
        grown.rest_tails = heads + grown.lengths[:, None] * self.rest_frames[:, :, 1]
        grown.kept = SkeletonKept(shape=self.kept.shape)
        return grown

    def __len__(self) -> int:
        return len(self.parents)

    def __repr__(self) -> str:
        return f"Skeleton({len(self)} bones, roots={[self.names[i] for i in self.roots]})"

    @property
    def roots(self) -> tuple[int, ...]:
        """Indices of the bones without a parent."""
        return tuple(i for i, p in enumerate(self.parents) if p < 0)

    def index(self, name: str) -> int:
        """Index of the bone called `name` (ValueError names the missing bone)."""
        try:
            return self.positions[name]
        except KeyError:
            raise ValueError(f"no bone named '{name}' in the skeleton") from None

    def path_to_root(self, bone: int) -> list[int]:
        """The bone and its ancestors, tip first."""
        path = []
        while bone >= 0:
            path.append(bone)
            bone = self.parents[bone]
        return path

    def rest_pose(self) -> "Pose":
        """The pose in which every bone sits at rest."""
        return Pose(self.rest_heads.copy(), self.rest_frames.copy(), self.lengths)

    def pose_from_local(self, local_rotations: np.ndarray, root_heads: np.ndarray | None = None) -> "Pose":
        """Forward kinematics: the pose given each bone's rotation relative to its rest, as Blender composes it.

        `local_rotations` is (n, 3, 3), like the rotation part of a pose bone's
        `matrix_basis`; heads follow the rest offsets rigidly.
        """
        n = len(self)
        heads = np.empty((n, 3))
        frames = np.empty((n, 3, 3))
        for i in self.order:
            p = self.parents[i]
            if p < 0:
                frames[i] = self.rest_frames[i] @ local_rotations[i]
                heads[i] = self.rest_heads[i] if root_heads is None else root_heads[i]
            else:
                # Blender: pose = parent_pose @ (parent_rest^-1 @ rest) @ basis
                frames[i] = frames[p] @ self.rest_frames[p].T @ self.rest_frames[i] @ local_rotations[i]
                parent_tail = heads[p] + self.lengths[p] * frames[p][:, 1]
                heads[i] = parent_tail + frames[p] @ self.offsets[i]
        return Pose(heads, frames, self.lengths)

    def with_local_rotations(
        self, pose: "Pose", rotations: dict[int, np.ndarray], translations: dict[int, np.ndarray] | None = None
    ) -> "Pose":
        """The pose with some bones' local rotations (and translations) replaced, placed by forward kinematics as
        Blender composes them (so the result does not depend on the pose it started from); bones below follow
        rigidly."""
        heads = pose.heads.copy()
        frames = pose.frames.copy()
        translations = translations or {}
        followers = rigid_followers(self, tuple(sorted(rotations)))
        for i in followers.in_order:
            p = self.parents[i]
            if i in rotations:
                # pose_i = pose_p @ (rest_p^T rest_i) @ basis_i; the head at the rest offset plus the translation.
                relative = self.rest_in_parent[i]
                offset = self.head_in_parent[i]
                t = translations.get(i)
                if t is not None:
                    offset = offset + relative @ t
                if p < 0:
                    frames[i] = relative @ rotations[i]
                    heads[i] = offset
                else:
                    frames[i] = frames[p] @ (relative @ rotations[i])
                    heads[i] = heads[p] + frames[p] @ offset
            else:  # a bone between two replaced ones, which the lower one hangs from
                followers.follow(pose, heads, frames, [i])
        followers.follow(pose, heads, frames)
        return Pose(heads, frames, pose.lengths)

    def local_rotations(self, pose: "Pose", bones: Sequence[int] | None = None) -> np.ndarray:
        """Each bone's rotation relative to its rest and its parent's pose (the inverse of `pose_from_local`);
        only the given bones', in their order, where `bones` is given."""
        chosen = np.arange(len(self)) if bones is None else np.asarray(bones, dtype=int)
        parents = np.asarray(self.parents)[chosen]
        has_parent = parents >= 0
        # rest_i^T @ rest_p @ pose_p^T @ pose_i, with the parent terms the identity for roots
        parent_part = np.broadcast_to(np.eye(3), (len(chosen), 3, 3)).copy()
        p = parents[has_parent]
        parent_part[has_parent] = self.rest_frames[p] @ np.swapaxes(pose.frames[p], 1, 2)
        return np.swapaxes(self.rest_frames[chosen], 1, 2) @ parent_part @ pose.frames[chosen]


@dataclass
class Pose:
    """Where every bone is, in armature space: heads (n, 3) and frames (n, 3, 3), columns X, Y, Z."""

    heads: np.ndarray
    frames: np.ndarray
    lengths: np.ndarray

    @property
    def tails(self) -> np.ndarray:
        """Tail positions, head + length along the bone's Y axis."""
        return self.heads + self.lengths[:, None] * self.frames[:, :, 1]

    def copy(self) -> "Pose":
        """An independent copy."""
        return Pose(self.heads.copy(), self.frames.copy(), self.lengths)


def zero_links(skeleton: "Skeleton", bones: Sequence[int], parents: Sequence[int], start: "Pose") -> list[quat.Quat]:
    """Per moving bone, Q such that its frame with no rotation of its own is its moving parent's frame times Q (Q
    alone without a moving parent); `parents` index into `bones`, and the bones in between fold into Q as they
    stand."""
    bones, parents = tuple(bones), tuple(parents)
    key = bones, parents
    rest_links = skeleton.kept.shape.zero_links.get(key)
    if rest_links is None:
        # Hanging straight from its moving parent (or from nothing), a bone's link is its rest relative to that
        # parent's: the parent's frame cancels, whatever the pose. None where bones in between count.
        rest_links = skeleton.kept.shape.zero_links[key] = tuple(
            quat.normalized(skeleton.rest_relative[b]) if skeleton.parents[b] < 0 or (p >= 0 and bones[p] == skeleton.parents[b])
            else None
            for b, p in zip(bones, parents)
        )
    links = list(rest_links)
    for k, link in enumerate(rest_links):
        if link is not None:
            continue
        # The bones between a bone and its moving parent (or its fixed parent) count as they stand in the start pose.
        b, p = bones[k], parents[k]
        link = quat.mul(quat.from_matrix(start.frames[skeleton.parents[b]].tolist()), skeleton.rest_relative[b])
        if p >= 0:
            link = quat.mul(quat.conj(quat.from_matrix(start.frames[bones[p]].tolist())), link)
        links[k] = quat.normalized(link)
    return links


def pose_with(skeleton: Skeleton, start: Pose, bones: Sequence[int], heads: np.ndarray, frames: np.ndarray) -> Pose:
    """The start pose with some bones moved: bones below them follow rigidly, the others stay where they were."""
    pose = start.copy()
    pose.heads[list(bones)] = heads
    pose.frames[list(bones)] = frames
    rigid_followers(skeleton, tuple(sorted(bones))).follow(start, pose.heads, pose.frames)
    return pose


class RigidFollowers:
    """The bones that follow some moved bones rigidly, each with the moved bone it follows (its nearest moved
    ancestor): a follower turns about that bone's head as that bone turned."""

    def __init__(self, skeleton: Skeleton, moved: tuple[int, ...]) -> None:
        moving = set(moved)
        nearest = [-1] * len(skeleton)
        for b in skeleton.order:
            p = skeleton.parents[b]
            if p >= 0:
                nearest[b] = p if p in moving else nearest[p]
        self.bones = np.array([b for b in skeleton.order if b not in moving and nearest[b] >= 0], dtype=int)
        self.anchors = np.array([nearest[b] for b in self.bones], dtype=int)
        self._anchor_of = dict(zip(self.bones.tolist(), self.anchors.tolist()))
        # Followers a moved bone hangs from must be placed before it: with the moved bones, in hierarchy order.
        between: set[int] = set()
        for b in moved:
            p = skeleton.parents[b]
            while p >= 0 and p not in moving and nearest[p] >= 0 and p not in between:
                between.add(p)
                p = skeleton.parents[p]
        #: The moved bones and the followers between them, parents first.
        self.in_order = tuple(b for b in skeleton.order if b in moving or b in between)

    def follow(self, start: Pose, heads: np.ndarray, frames: np.ndarray, bones: list[int] | None = None) -> None:
        """Place followers (all, or the given ones) from their anchors' new heads and frames, in place."""
        if bones is None:
            if not len(self.bones):
                return
            bones, anchors = self.bones, self.anchors
        else:
            anchors = np.array([self._anchor_of[b] for b in bones], dtype=int)
        turns = frames[anchors] @ np.swapaxes(start.frames[anchors], 1, 2)
        offsets = (start.heads[bones] - start.heads[anchors])[:, :, None]
        heads[bones] = heads[anchors] + (turns @ offsets)[:, :, 0]
        frames[bones] = turns @ start.frames[bones]


def rigid_followers(skeleton: Skeleton, moved: tuple[int, ...]) -> RigidFollowers:
    """`RigidFollowers` for these moved bones (sorted), cached on the skeleton."""
    cached = skeleton.kept.shape.followers.get(moved)
    if cached is None:
        cached = skeleton.kept.shape.followers[moved] = RigidFollowers(skeleton, moved)
    return cached


def skeleton_from_points(
    parents: Sequence[int],
    heads: Sequence[Sequence[float]],
    tails: Sequence[Sequence[float]],
    names: Sequence[str] | None = None,
) -> Skeleton:
    """A skeleton from head and tail points, with a deterministic roll (handy for tests and samples)."""
    heads = np.asarray(heads, dtype=float).reshape(-1, 3)
    tails = np.asarray(tails, dtype=float).reshape(-1, 3)
    axes = tails - heads
    lengths = np.linalg.norm(axes, axis=1)
    names = tuple(names) if names is not None else tuple(f"bone{i}" for i in range(len(heads)))
    for i, length in enumerate(lengths):
        if not np.isfinite(length) or length < MIN_BONE_LENGTH:
            raise ValueError(f"bone '{names[i]}' has zero length or a point that is not a finite number")
    frames = matrix_rows.frames_from_y(axes / lengths[:, None])
    return Skeleton(parents, heads, frames, lengths, names)


def _topological_order(parents: tuple[int, ...], names: tuple[str, ...]) -> tuple[int, ...]:
    """Bones ordered so that every parent comes before its children; refuses bad parents and cycles."""
    n = len(parents)
    for i, p in enumerate(parents):
        if p < -1 or p >= n:
            raise ValueError(f"bone '{names[i]}' has parent index {p}, outside 0..{n - 1}")
        if p == i:
            raise ValueError(f"bone '{names[i]}' is its own parent")
    depth = [-1] * n
    for i in range(n):
        path = []
        j = i
        while j >= 0 and depth[j] < 0:
            if j in path:
                cycle = " -> ".join(names[k] for k in path[path.index(j):] + [j])
                raise ValueError(f"the bone hierarchy has a cycle: {cycle}")
            path.append(j)
            j = parents[j]
        base = -1 if j < 0 else depth[j]
        for k in reversed(path):
            base += 1
            depth[k] = base
    return tuple(sorted(range(n), key=lambda k: (depth[k], k)))


def _checked_limits(limits, n: int, names: tuple[str, ...]) -> tuple[JointLimit | None, ...]:
    """One limit (or None) per bone; free limits become None so the solver can skip them."""
    if limits is None:
        return (None,) * n
    limits = tuple(limits)
    if len(limits) != n:
        raise ValueError(f"{len(limits)} joint limits for {n} bones")
    for i, limit in enumerate(limits):
        if limit is not None and not isinstance(limit, JointLimit):
            raise ValueError(f"bone '{names[i]}' has a limit that is not a JointLimit")
    return tuple(None if limit is None or limit.is_free else limit for limit in limits)


def _checked_stretch(stretch, n: int, names: tuple[str, ...]) -> np.ndarray:
    """One IK stretch factor per bone, each in 0..1 (all 0 when none are given)."""
    if stretch is None:
        return np.zeros(n)
    factors = np.asarray(stretch, dtype=float).reshape(-1)
    if len(factors) != n:
        raise ValueError(f"{len(factors)} stretch factors for {n} bones")
    bad = np.flatnonzero(~((factors >= 0.0) & (factors <= 1.0)))  # NaN fails both comparisons
    if len(bad):
        raise ValueError(f"bone '{names[bad[0]]}' has stretch factor {factors[bad[0]]}; use 0 to 1")
    return factors
