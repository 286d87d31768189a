# SPDX-License-Identifier: GPL-3.0-or-later
"""Skeletons for the core tests: fixed shapes, limited rigs (a finger, a 6-axis arm, a tentacle), hypothesis
strategies for random chains and trees, and what several tests measure on them."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from fabrik_addon.core import Pose, Skeleton, SolveSettings, skeleton_from_points
from fabrik_addon.core.math.matrix_rows import quaternion_to_matrix
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.model.skeleton import pose_with
from fabrik_addon.core.model.tree import Start, moving_tree
from fabrik_addon.core.solving import many_frames
from fabrik_addon.core.solving.plan import plan_for

R = math.radians


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
    moved = set(moving_tree(skeleton, goals).bones)
    for bone in range(len(skeleton)):
        if not any(a in moved for a in skeleton.path_to_root(bone)):
            np.testing.assert_array_equal(pose.heads[bone], start.heads[bone])
            np.testing.assert_array_equal(pose.frames[bone], start.frames[bone])


def hinge(lo: float, hi: float) -> JointLimit:
    """A joint that bends about X only (Y and Z locked), between lo and hi degrees."""
    return JointLimit(lock_y=True, lock_z=True, use_limit_x=True, min_x=R(lo), max_x=R(hi))


def roll(lo: float, hi: float) -> JointLimit:
    """A joint that turns about its own bone only (X and Z locked)."""
    return JointLimit(lock_x=True, lock_z=True, use_limit_y=True, min_y=R(lo), max_y=R(hi))


def chain(points, limits):
    """A connected chain through the points, with one limit per bone."""
    count = len(points) - 1
    return skeleton_from_points([-1] + list(range(count - 1)), points[:-1], points[1:]).with_limits(limits)


def finger():
    """A finger from the knuckle: a 2-DOF knuckle (flex and spread, no twist) and two hinges."""
    knuckle = JointLimit(lock_y=True, use_limit_x=True, min_x=R(-10), max_x=R(90), use_limit_z=True, min_z=R(-20), max_z=R(20))
    return chain([(0, 0, 0), (0, 0.045, 0), (0, 0.07, 0), (0, 0.09, 0)], [knuckle, hinge(0, 100), hinge(0, 80)])


def arm6():
    """A 6-axis industrial arm standing along +Z: base roll, shoulder and elbow pitch, wrist roll, pitch, flange roll."""
    points = [(0, 0, 0), (0, 0, 0.3), (0, 0, 0.9), (0, 0, 1.4), (0, 0, 1.55), (0, 0, 1.65), (0, 0, 1.75)]
    return chain(points, [roll(-170, 170), hinge(-90, 90), hinge(-150, 150), roll(-180, 180), hinge(-120, 120), roll(-180, 180)])


def tentacle(count: int = 30, cone: float = 15.0):
    """A long chain of short bones, each swinging at most `cone` degrees from its parent."""
    limit = JointLimit(use_limit_x=True, min_x=R(-cone), max_x=R(cone), use_limit_z=True, min_z=R(-cone), max_z=R(cone))
    return chain([(0, 0, 0.1 * i) for i in range(count + 1)], [limit] * count)


def inside_limits(skeleton, rng) -> np.ndarray:
    """Random local rotations inside every bone's limit, drawn axis by axis (no solver code involved)."""
    local = np.empty((len(skeleton), 3, 3))
    for b, limit in enumerate(skeleton.limits):
        sx = rng.uniform(*limit.swing_range("x"))
        sz = rng.uniform(*limit.swing_range("z"))
        lo_x, hi_x = limit.swing_range("x")
        lo_z, hi_z = limit.swing_range("z")
        a, c = (hi_x if sx >= 0 else -lo_x), (hi_z if sz >= 0 else -lo_z)
        if a > 0 and c > 0 and (sx / a) ** 2 + (sz / c) ** 2 > 1:
            sx, sz = sx / math.hypot(sx / a, sz / c), sz / math.hypot(sx / a, sz / c)
        twist = rng.uniform(*limit.twist_range())
        local[b] = about((sx, 0.0, sz)) @ about((0.0, twist, 0.0))
    return local


def about(v) -> np.ndarray:
    """The rotation matrix of a rotation vector (Rodrigues)."""
    angle = float(np.linalg.norm(v))
    if angle < 1e-15:
        return np.eye(3)
    k = np.asarray(v) / angle
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def solve_frames(skeleton, goals, targets, starts, settings=SolveSettings()):
    """Many frames through the plan on numpy rows, from whole start poses: each frame's pose (the moving bones as
    solved, the others following), the iterations and the errors."""
    plan = plan_for(skeleton, goals)
    bones = plan.bones
    heads = np.stack([p.heads[bones] for p in starts])
    frames = np.stack([p.frames[bones] for p in starts])
    hung = {skeleton.parents[b] for k, b in zip(plan.tree.parent, bones) if k < 0 and skeleton.parents[b] >= 0}
    fixed = {b: np.stack([p.frames[b] for p in starts]) for b in hung}
    solved = many_frames.solve_rows(
        plan, goals, targets, heads, frames, fixed, settings, lambda f: Start.of_pose(skeleton, plan.tree, starts[f])
    )
    poses = [pose_with(skeleton, start, bones, h, m) for start, h, m in zip(starts, solved.heads, solved.frames)]
    if plan.local.placed:
        for pose, rotations in zip(poses, solved.rotations):
            np.testing.assert_allclose(rotations, skeleton.local_rotations(pose)[bones], atol=1e-9)
    else:  # (a fixed bone between two moving ones: the nodes' frames alone do not give their local rotations)
        assert solved.rotations is None
    return poses, solved.iterations, solved.errors


def facing_error_degrees(pose, target, vector, pole) -> float:
    """Angle between a vector and the pole's direction, both seen along the line from the chain's base to target."""
    base = pose.heads[0]
    axis = np.asarray(target) - base
    axis /= np.linalg.norm(axis)
    vector = np.asarray(vector) - axis * (axis @ vector)
    towards = np.asarray(pole) - base
    towards -= axis * (axis @ towards)
    cosine = vector @ towards / np.linalg.norm(vector) / np.linalg.norm(towards)
    return math.degrees(math.acos(max(-1.0, min(1.0, cosine))))
