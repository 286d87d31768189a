# SPDX-License-Identifier: GPL-3.0-or-later
"""Skeletons for the core tests: fixed shapes and hypothesis strategies for random chains and trees."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fabrik_addon.core import Pose, Skeleton, skeleton_from_points
from fabrik_addon.core.math.matrix_rows import quaternion_to_matrix


def straight_chain(n: int, length: float = 1.0) -> Skeleton:
    """n connected bones of equal length along +Z from the origin."""
    heads = [(0.0, 0.0, i * length) for i in range(n)]
    tails = [(0.0, 0.0, (i + 1) * length) for i in range(n)]
    return skeleton_from_points([-1] + list(range(n - 1)), heads, tails)


def hand(finger_bones: int = 3, spread: float = 0.3) -> tuple[Skeleton, list[int]]:
    """A palm (bone 0, along +Y) with five connected fingers whose bases are offset sideways; returns tips too."""
    heads, tails, parents = [(0.0, 0.0, 0.0)], [(0.0, 1.0, 0.0)], [-1]
    tips = []
    for f in range(5):
        x = (f - 2) * spread
        prev = 0
        for j in range(finger_bones):
            parents.append(prev)
            heads.append((x, 1.0 + 0.1 + 0.3 * j, 0.0))
            tails.append((x, 1.0 + 0.1 + 0.3 * (j + 1), 0.0))
            prev = len(heads) - 1
        tips.append(prev)
    return skeleton_from_points(parents, heads, tails), tips


def random_rotations(rng: np.random.Generator, n: int, max_angle: float = np.pi) -> np.ndarray:
    """n random rotations of at most max_angle radians."""
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1)[:, None]
    angles = rng.uniform(0.0, max_angle, size=n)
    q = np.column_stack((np.cos(angles / 2), axes * np.sin(angles / 2)[:, None]))
    return quaternion_to_matrix(q)


def unit_vectors(size: int | None = None):
    """A strategy for unit 3-vectors (or a list of `size` of them)."""
    vector = st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda v: sum(c * c for c in v) > 1e-2)
    normalized = vector.map(lambda v: tuple(np.asarray(v) / np.linalg.norm(v)))
    return normalized if size is None else st.lists(normalized, min_size=size, max_size=size)


@st.composite
def skeletons(draw, max_bones: int = 10, trees: bool = True, offsets: bool = True, roots: int = 1) -> Skeleton:
    """Random skeletons: a chain, or a tree when `trees`; unconnected heads when `offsets`."""
    n = draw(st.integers(1, max_bones))
    parents = []
    for i in range(n):
        if i < roots:
            parents.append(-1)
        elif trees:
            parents.append(draw(st.integers(0, i - 1)))
        else:
            parents.append(i - 1)
    lengths = draw(st.lists(st.floats(0.1, 2.0), min_size=n, max_size=n))
    directions = draw(unit_vectors(n))
    heads, tails = [], []
    for i in range(n):
        if parents[i] < 0:
            head = np.array(draw(st.tuples(*[st.floats(-2, 2)] * 3)))
        else:
            head = np.array(tails[parents[i]])
            if offsets and draw(st.booleans()):
                head = head + np.array(draw(st.tuples(*[st.floats(-0.5, 0.5)] * 3)))
        heads.append(tuple(head))
        tails.append(tuple(head + lengths[i] * np.array(directions[i])))
    return skeleton_from_points(parents, heads, tails)


def leaves(skeleton: Skeleton) -> list[int]:
    """Bones without children."""
    return [i for i in range(len(skeleton)) if not skeleton.children[i]]


def assert_rigid_pose(skeleton: Skeleton, start: Pose, pose: Pose) -> None:
    """Finite, proper frames; every bone keeps its length and head offset (checked by FK); roots stay put."""
    assert np.isfinite(pose.heads).all() and np.isfinite(pose.frames).all()
    gram = np.einsum("nji,njk->nik", pose.frames, pose.frames)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(3), gram.shape), atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(pose.frames), 1.0, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(pose.tails - pose.heads, axis=1), skeleton.lengths, rtol=1e-9)
    rebuilt = skeleton.pose_from_local(skeleton.local_rotations(pose), root_heads=pose.heads)
    np.testing.assert_allclose(rebuilt.heads, pose.heads, atol=1e-9 * (1 + np.abs(pose.heads).max()))
    for root in skeleton.roots:
        np.testing.assert_array_equal(pose.heads[root], start.heads[root])


def random_chain(rng: np.random.Generator, n: int):
    """A connected chain of n bones with random directions and lengths."""
    heads, tails = [], []
    for i in range(n):
        head = np.zeros(3) if i == 0 else tails[-1]
        d = rng.normal(size=3)
        heads.append(head)
        tails.append(head + rng.uniform(0.3, 1.5) * d / np.linalg.norm(d))
    return skeleton_from_points([-1] + list(range(n - 1)), heads, tails)


def assert_unmoved_outside_chains(skeleton: Skeleton, goals, start: Pose, pose: Pose) -> None:
    """Bones neither in a goal's chain nor below one are exactly where they were."""
    from fabrik_addon.core.model.tree import moving_tree

    moved = set(moving_tree(skeleton, goals).bones)
    for bone in range(len(skeleton)):
        if not any(a in moved for a in skeleton.path_to_root(bone)):
            np.testing.assert_array_equal(pose.heads[bone], start.heads[bone])
            np.testing.assert_array_equal(pose.frames[bone], start.frames[bone])
