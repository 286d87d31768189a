# SPDX-License-Identifier: GPL-3.0-or-later
"""Retargeting's arithmetic, every frame at once: the clip's pose on the rig, bone by bone, through the two rests.

A clip bone's turn is its world rotation against its rest's (`turns`); the
rig's bone takes the same turn from its own rest, first aligned so that it
points the way the clip's bone points at rest (`alignment`: a T-pose clip
raises an A-pose rig's arms for the mapping only). Where one skeleton has
more bones in a span than the other (four spine bones against three), the
span's turns are sampled along it (`sampled`). `Hold.pose` turns those world
rotations into each bone's local rotation by forward kinematics over the
driven bones (as they hang on each other), and gives their posed matrices, from which the ends' goals
are scaled limb by limb. `held` keeps a planted foot where it stands, heel
and toe. All matrices are numpy rows: (frames, ..., 3, 3) or (..., 4, 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..math.matrix_rows import (
    quaternion_to_matrix,
    quaternions_from_matrices,
    rotation_vector_matrices,
    swing_matrix,
    unit_frames,
)
from .contacts import BLEND, HEIGHT, SHORTEST, SPEED, Contact, find

__all__ = [
    "Hold", "alignment", "body_frame", "grounding", "held", "hinged", "lowered", "sampled", "slerp",
    "stands", "turns", "within",
]


def turns(posed: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Each bone's world turn from its rest: posed (F, B, 3, 3) times the inverse of rest (B, 3, 3)."""
    return posed @ np.swapaxes(rest, -1, -2)


def body_frame(left: np.ndarray, up: np.ndarray) -> np.ndarray:
    """A skeleton's frame (columns: its left, its front, its up) from its left and up directions."""
    up = np.asarray(up, dtype=float) / np.linalg.norm(up)
    left = np.asarray(left, dtype=float) - up * float(np.dot(left, up))
    left /= np.linalg.norm(left)
    return np.stack((left, np.cross(up, left), up), axis=1)


def alignment(rig_direction: np.ndarray, clip_direction: np.ndarray) -> np.ndarray:
    """The shortest turn that points a rig bone's rest direction along its clip bone's (both in one space)."""
    a = np.asarray(rig_direction, dtype=float)
    b = np.asarray(clip_direction, dtype=float)
    if np.linalg.norm(a) < 1e-9 or np.linalg.norm(b) < 1e-9:
        return np.eye(3)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    helper = np.array([1.0, 0.0, 0.0]) if abs(a[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    return swing_matrix(a, b, np.cross(a, helper))


def slerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """Rotations (F, 3, 3) a fraction t of the way from a to b, the short way round."""
    if t <= 0.0:
        return a.copy()
    if t >= 1.0:
        return b.copy()
    qa = quaternions_from_matrices(a.reshape(-1, 3, 3))
    qb = quaternions_from_matrices(b.reshape(-1, 3, 3))
    dot = np.einsum("ij,ij->i", qa, qb)
    qb[dot < 0.0] *= -1.0
    dot = np.clip(np.abs(dot), -1.0, 1.0)
    angle = np.arccos(dot)
    small = angle < 1e-6
    sin = np.where(small, 1.0, np.sin(angle))
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * angle) / sin)
    wb = np.where(small, t, np.sin(t * angle) / sin)
    q = wa[:, None] * qa + wb[:, None] * qb
    return quaternion_to_matrix(q).reshape(a.shape)


def sampled(span: np.ndarray, count: int) -> np.ndarray:
    """A span's turns for `count` bones from the clip's (F, m + 1, 3, 3): the bone below the span first, then its
    m bones; bone i of count takes the turn at i / count of the clip's span (so equal counts take them one to one)."""
    m = span.shape[1] - 1
    out = np.empty((span.shape[0], count, 3, 3))
    for i in range(1, count + 1):
        u = i * m / count
        k = min(int(np.floor(u + 1e-9)), m)
        out[:, i - 1] = span[:, k] if k == m or u - k < 1e-9 else slerp(span[:, k], span[:, k + 1], u - k)
    return out


@dataclass
class Hold:
    """How the rig's driven bones hang on each other (`hold_of`): per bone, its frame with every driven bone at
    rest, and the driven bone whose turn it takes and whose move carries its head (a generated rig's constraints may
    hold a limb's turn to the root while its shoulder carries it)."""

    frames: np.ndarray
    turns_with: list[int]
    moves_with: list[int]

    def pose(self, turned: dict[int, np.ndarray], local: dict[int, np.ndarray] | None = None,
             heads: dict[int, np.ndarray] | None = None,
             ) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Forward kinematics of the driven bones over every frame: each bone's posed matrix (F, N, 4, 4), from
        its armature-space rotation in `turned` or its local rotation in `local` (F, 3, 3); also every bone's
        local rotation, and the location (F, 3) of each bone in `heads` that puts its head there."""
        some = next(iter({**turned, **(local or {})}.values()))
        count, frames = len(self.frames), some.shape[0]
        posed = np.empty((frames, count, 4, 4))
        locals_: dict[int, np.ndarray] = {}
        locations: dict[int, np.ndarray] = {}
        rest = unit_frames(self.frames)
        scale = np.linalg.norm(self.frames[:, :3, :3], axis=1)
        for k in range(count):
            by, carried = self.turns_with[k], self.moves_with[k]
            above = rest[k] if by < 0 else unit_frames(posed[:, by]) @ rest[by].T @ rest[k]
            above = np.broadcast_to(above, (frames, 3, 3))
            head = self.frames[k, :3, 3]
            if carried >= 0:
                at = np.linalg.inv(self.frames[carried]) @ np.append(head, 1.0)
                head = np.einsum("fij,j->fi", posed[:, carried], at)[:, :3]
            head = np.broadcast_to(head, (frames, 3)).copy()
            if local is not None and k in local:
                locals_[k] = local[k]
                rotation = above @ local[k]
            else:
                rotation = turned[k]
                locals_[k] = np.swapaxes(above, -1, -2) @ rotation
            if heads is not None and k in heads:
                locations[k] = np.einsum("fji,fj->fi", above, heads[k] - head)
                head = heads[k]
            posed[:, k] = np.eye(4)
            posed[:, k, :3, :3] = rotation * scale[k]  # (a bone's own scale carries its children further)
            posed[:, k, :3, 3] = head
        return posed, locals_, locations


def _signed(a: np.ndarray, b: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The angles (F,) turning vectors a onto b about the axes (all (F, 3))."""
    return np.arctan2(np.einsum("fi,fi->f", axis, np.cross(a, b)), np.einsum("fi,fi->f", a, b))


#: How far outside its range (radians) a hinge's bend may be before the upper bone turns about itself the other way
#: round to bend it back inside.
FAR_OUTSIDE = 0.35
#: Twists (radians) this near each other are alike: the hinge's range alone chooses between them.
ALIKE = 0.5


def hinged(upper: np.ndarray, lower: np.ndarray, relative: np.ndarray, axis: int, low: float, high: float
           ) -> tuple[np.ndarray, np.ndarray]:
    """A limb whose lower joint is a hinge about its own X (`axis` 0) or Z (2), posed as nearly as the hinge allows
    as `upper` and `lower` (F, 3, 3) pose it, the hinge across the plane they bend in (`relative`: the lower bone's
    rest in the upper's)."""
    along_upper, along_lower = upper[:, :, 1], lower[:, :, 1]
    normal = np.cross(along_upper, along_lower)
    size = np.linalg.norm(normal, axis=1)
    bent = size > 1e-6
    hinge_rest = relative[:, axis]
    hinge = upper @ hinge_rest
    if bent.any():
        good = np.flatnonzero(bent)
        nearest = good[np.clip(np.searchsorted(good, np.arange(len(size))), 0, len(good) - 1)]
        normal = normal[nearest] / size[nearest, None]
        normal -= along_upper * np.einsum("fi,fi->f", normal, along_upper)[:, None]
        normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    else:
        normal = hinge
    ways = []
    for sign in (1.0, -1.0):
        twist = _signed(hinge, sign * normal, along_upper)
        turned = rotation_vector_matrices(along_upper * twist[:, None]) @ upper
        zero = turned @ relative
        angle = _signed(zero[:, :, 1], along_lower, zero[:, :, axis])
        kept = np.clip(angle, low, high)
        local = rotation_vector_matrices(np.eye(3)[axis] * kept[:, None])
        ways.append((np.abs(twist), np.abs(angle - kept), turned, zero @ local))
    # The lesser twist of the upper bone, unless it leaves the hinge far outside its range and the other does
    # not: a knee captured a little past straight is held straight, not turned half round to bend it back. Where
    # the two twists are near alike (a quarter turn each), the lesser miss decides, so neighbouring frames agree.
    (twist_a, miss_a, *a), (twist_b, miss_b, *b) = ways
    by_twist = np.where(twist_a <= twist_b, ~((miss_a > FAR_OUTSIDE) & (miss_b < miss_a)),
                        (miss_b > FAR_OUTSIDE) & (miss_a < miss_b))
    take_a = np.where(np.abs(twist_a - twist_b) > ALIKE, by_twist, miss_a <= miss_b)
    return np.where(take_a[:, None, None], a[0], b[0]), np.where(take_a[:, None, None], a[1], b[1])


def lowered(reach: np.ndarray, length: float) -> np.ndarray:
    """How far (F,) a limb's top must come down (world Z) for it to reach `reach` (F, 3: from its top to its goal)
    within `length`: 0 where it does, else the least drop that does, or the whole height where none does."""
    reach = np.asarray(reach, dtype=float)
    z = reach[:, 2]
    room = z * z - np.einsum("ij,ij->i", reach, reach) + length * length
    drop = np.where(room >= 0.0, -z - np.sqrt(np.maximum(room, 0.0)), -z)
    return np.where(np.linalg.norm(reach, axis=1) <= length, 0.0, np.maximum(drop, 0.0))


def within(top: np.ndarray, goal: np.ndarray, length: float) -> np.ndarray:
    """Goals (F, 3) taken in along the line from a limb's top (F, 3) to at most `length` from it."""
    reach = goal - top
    far = np.linalg.norm(reach, axis=1)
    scale = np.where(far > length, length / np.maximum(far, 1e-12), 1.0)
    return top + reach * scale[:, None]


def stands(ankle: np.ndarray, toe: np.ndarray, leg: float) -> tuple[list, list]:
    """Where a foot stands, as Find Contacts finds it (`contacts.find` with its defaults, shares of the leg): the
    runs of frames its ankle stands, and its toe."""
    speed, height = SPEED * leg, HEIGHT * leg
    return (find(ankle, speed, height, SHORTEST),
            find(toe, speed, height, SHORTEST))


def grounding(ankle: np.ndarray, toe: np.ndarray, runs: tuple[list, list], ankle_height: float) -> float | None:
    """How high above the floor a foot's clip stands (its ankle goals (F, 3) and toe points as they are): its
    lowest standing ankle less the rig's ankle height; standing only on its toe, its lowest standing toe; never
    standing, None."""
    ankle_runs, toe_runs = runs
    if ankle_runs:
        return min(float(ankle[r.first:r.last + 1, 2].min()) for r in ankle_runs) - ankle_height
    if toe_runs:
        return min(float(toe[r.first:r.last + 1, 2].min()) for r in toe_runs)
    return None


def held(ankle: np.ndarray, toe: np.ndarray, runs: tuple[list, list], floor: float
         ) -> tuple[np.ndarray, list[Contact], list[Contact]]:
    """A foot's ankle goals (F, 3) with its contacts (`stands`) held: where the ankle stands it stays where it
    stood; where only the toe stands (the foot rolling onto it), the toe does and the ankle turns about it;
    neither goes below the floor. Also the frames each is held whole."""
    ankle = np.array(ankle, dtype=float)
    toe = np.asarray(toe, dtype=float)
    count = len(ankle)
    ankle_runs, toe_runs = runs
    out = ankle.copy()
    blend = BLEND
    toe_weight, toe_where = _holds(toe, toe_runs, blend, count)
    ankle_weight, ankle_where = _holds(ankle, ankle_runs, blend, count)

    def whole(found: list) -> list:
        return [Contact(r.first + min(blend, (r.last - r.first) // 2),
                                     r.last - min(blend, (r.last - r.first) // 2)) for r in found]

    out += toe_weight[:, None] * (toe_where - toe)
    out += ankle_weight[:, None] * (ankle_where - out)
    foot = out + (toe - ankle)
    out[:, 2] += np.maximum(0.0, floor - np.minimum(foot[:, 2], out[:, 2]))
    return out, whole(ankle_runs), whole(toe_runs)


def _holds(points: np.ndarray, runs: list, blend: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, how much a point is held (0 to 1) and where: where it stood over each run, taking hold over the
    run's first `blend` frames and letting go over its last, inside the run, so a foot that begins to lift is not
    pulled back."""
    weight = np.zeros(count)
    where = points.copy()
    for run in runs:
        stand = points[run.first:run.last + 1].mean(axis=0)
        stand[2] = points[run.first:run.last + 1, 2].min()
        where[run.first:run.last + 1] = stand
        length = run.last - run.first + 1
        ramp = min(blend, (length - 1) // 2)
        for k in range(length):
            edge = min(k, length - 1 - k)
            weight[run.first + k] = 1.0 if edge >= ramp else (edge + 1) / (ramp + 1)
    return weight, where
