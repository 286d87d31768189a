# SPDX-License-Identifier: GPL-3.0-or-later
"""A chain's bend spread along it: where FABRIK's passes start a chain pulled at its tip.

FABRIK moves the joints nearest the target most: a chain of three or more
bones pulled in from nearly straight ends with its bend piled onto the last
joints (a tip bone hooked back onto the target), where Blender's IK, which
turns every joint a little, bends it in a smooth C. So before the passes a
chain of three or more connected bones, pulled at its tip towards a target in
reach, is bent evenly: every joint between its bones turns by the same angle
about the axis the chain already bends about (or, straight, the axis that
turns it towards the target), until its ends are as far apart as base and
target, and then the whole chain turns about its base onto the target. The
chain keeps the shape it started with (the rest pose, or the previous
frame's solution) with the change spread evenly over it, and its tip lands on
the target, so the passes have nothing left to do. Where no such bend exists
(a target nearer the base than the chain folds, a chain curled round) the
passes start from the chain as it was.

With the joints turned by k times the angle, the chord from base to tip is
``A n + sum_k l_k z_k e^{i k delta}`` in a plane across the axis n (z_k: the
bone's direction in that plane, A: the chain's length along n), so its length
is a smooth function of one angle, found by a search outwards from zero and
a safeguarded Newton step; `spread` works on one chain's joints in plain
floats and `spread_rows` on many frames at once.

A chain in swing cones (a tentacle) may not bend so: the first joint takes
the whole turn towards the target, more than its cone allows. There that
joint stops on its cone's rim and the bones after it bend evenly from its
tail, and so on down the chain (`spread_within`, `spread_within_rows`).
"""

from __future__ import annotations

import cmath
import math
from typing import Sequence

import numpy as np

from ..math import matrix_rows, quat, quat_rows
from ..math.quat import Quat
from ..math.vec import Vec, add, cross, dist, dot, norm, perpendicular, scale, sub
from ..model import limits

__all__ = ["SHORTEST", "spread", "spread_rows", "spread_within", "spread_within_rows", "turned_frames"]

#: Chains of fewer bones are left to the passes (two bones have their own exact start, `starts.settle_two_bones`).
SHORTEST = 3
#: The search for the angle first doubles it this many times up to half the ring's turn (`_grid`).
_STEPS = 6
#: Where the chord's excess changes by less than this (of the reach squared) from one step to the next, it has
#: not turned back: a straight chain's chord hardly changes as it first bends (rounding may raise it a hair).
_FLAT = 1e-12
#: A chain whose joints bend by less than this (the sine of the angle, summed) counts as straight.
_STRAIGHT = 1e-9
#: The angle is found when the chord's squared length is within this fraction of the chain's reach squared off
#: the wanted one (the tip then lands within about 1e-13 of the reach squared over the target's distance).
_CLOSE = 1e-13
_NEWTON = 40
#: A joint the even bend takes out of its cone stops this far inside the rim (a fraction of its swing).
_RIM = 1.0 - 1e-9
#: A bend within the cones lands when its tip is this near the target (times the target's distance, at least 1).
_LANDED = 1e-9


def _axis(directions: Sequence[Vec], chord: Vec, towards: Vec) -> Vec | None:
    """The unit axis the chain bends about (its joints' turns summed), or, straight, the one that turns its chord
    towards the target; None where both are undefined."""
    x = y = z = 0.0
    for a, b in zip(directions, directions[1:]):
        x += a[1] * b[2] - a[2] * b[1]
        y += a[2] * b[0] - a[0] * b[2]
        z += a[0] * b[1] - a[1] * b[0]
    axis = (x, y, z)
    if norm(axis) <= _STRAIGHT * len(directions):
        axis = cross(chord, towards)
        if norm(axis) <= _STRAIGHT:
            return None
    return scale(axis, 1.0 / norm(axis))


def _chord(z: Sequence[complex], along: float, delta: float) -> tuple[float, float, complex]:
    """The chord's squared length with every joint turned by `delta` more, its derivative, and its part in the
    plane."""
    w = cmath.exp(1j * delta)
    # Horner's rule: s = sum z_k w^k and its derivative sum k z_k w^(k-1), from the tip down.
    s, ds = 0.0j, 0.0j
    for zk in reversed(z):
        ds = ds * w + s
        s = s * w + zk
    ds *= w  # sum k z_k w^k
    # d|s|^2 = 2 Re(conj(s) i ds) = -2 Im(conj(s) ds)
    return along * along + s.real * s.real + s.imag * s.imag, -2.0 * (s.real * ds.imag - s.imag * ds.real), s


def _bracket(f0: float, value, bones: int) -> tuple[float, float, float, float] | None:
    """The first step of the search outwards from zero where the chord's excess changes sign: (a, f(a), b, f(b)),
    or None where it turns back first (`value`: the excess at an angle)."""
    sign = 1.0 if f0 > 0.0 else -1.0  # too long: bend further; too short: straighten
    a, fa = 0.0, f0
    for b in _grid(bones):
        b *= sign
        fb = value(b)
        if (fb <= 0.0) if sign > 0.0 else (fb >= 0.0):
            return a, fa, b, fb
        if (fb > fa + _FLAT) if sign > 0.0 else (fb < fa - _FLAT):
            return None  # past the chord's shortest (curled round) or longest (no pose of this family reaches)
        a, fa = b, fb
    return None


def _grid(bones: int) -> list[float]:
    """The angles the search tries, outwards: each twice the last up to half the turn that closes an even chain
    into a ring, then in sixteenths of it to a quarter past it (further, a long chain would coil, and its chord
    pass through the wanted length again and again)."""
    ring = 2.0 * math.pi / bones
    return [ring * 2.0 ** -k for k in range(_STEPS, 0, -1)] + [ring * (0.5 + k / 16.0) for k in range(1, 13)]


def spread(
    points: list[Vec], length: Sequence[float], target: Vec
) -> tuple[list[Vec], Vec, float, Quat] | None:
    """One chain's joints p_0..p_n with its bend spread until its tip is on the target (see the module): the new
    joints, the axis, each joint's turn and the turn about the base after; None where no such bend exists."""
    n = len(length)
    if min(length) <= 0.0:
        return None  # (a bone of no length has no direction to turn)
    base = points[0]
    span2 = dot(sub(target, base), sub(target, base))
    directions = []
    for k in range(n):  # (written out: this runs for every bone of every chain of every frame)
        (ax, ay, az), (bx, by, bz), inverse = points[k], points[k + 1], 1.0 / length[k]
        directions.append(((bx - ax) * inverse, (by - ay) * inverse, (bz - az) * inverse))
    chord = sub(points[-1], base)
    size = norm(chord)
    if size == 0.0 or span2 == 0.0:
        return None
    towards = scale(sub(target, base), 1.0 / math.sqrt(span2))
    axis = _axis(directions, scale(chord, 1.0 / size), towards)
    if axis is None:
        return None
    e1 = perpendicular(axis)
    e2 = cross(axis, e1)
    (nx, ny, nz), (ux, uy, uz), (vx, vy, vz) = axis, e1, e2
    # Each bone's length along the axis, and its part across it as a complex number in the plane (e1, e2).
    heights = [l * (d[0] * nx + d[1] * ny + d[2] * nz) for l, d in zip(length, directions)]
    along = sum(heights)
    z = [
        complex(l * (d[0] * ux + d[1] * uy + d[2] * uz), l * (d[0] * vx + d[1] * vy + d[2] * vz))
        for l, d in zip(length, directions)
    ]
    # Scaled by the chain's reach squared, so the tests below mean the same on a rig of any size.
    unit = 1.0 / sum(length) ** 2

    def excess(delta: float) -> tuple[float, float]:
        c2, dc2, _ = _chord(z, along, delta)
        return (c2 - span2) * unit, dc2 * unit

    f0 = excess(0.0)[0]
    if abs(f0) <= _CLOSE:
        delta = 0.0
    else:
        found = _bracket(f0, lambda x: excess(x)[0], n)
        if found is None:
            return None
        delta = _root(excess, *found)
    _, _, s = _chord(z, along, delta)
    w = cmath.exp(1j * delta)
    p = 1.0 + 0.0j
    hx, hy, hz = 0.0, 0.0, 0.0  # the tail of each bone from the base
    moved = []
    for h, zk in zip(heights, z):
        c = zk * p
        p *= w
        a, b = c.real, c.imag
        hx, hy, hz = hx + h * nx + a * ux + b * vx, hy + h * ny + a * uy + b * vy, hz + h * nz + a * uz + b * vz
        moved.append((hx, hy, hz))
    size = math.sqrt(hx * hx + hy * hy + hz * hz)
    now = (hx / size, hy / size, hz / size)
    if dot(now, towards) < -1.0 + 1e-9:
        return None  # (the chord points away from the target: no one shortest turn)
    turn = quat.arc(now, towards, axis)
    # Each point turned about the base (q v q*, written out): v + w t + q x t with t = 2 q x v.
    tw, tx, ty, tz = turn
    bx, by, bz = base
    out = [base]
    for x, y, z_ in moved:
        cx, cy, cz = 2.0 * (ty * z_ - tz * y), 2.0 * (tz * x - tx * z_), 2.0 * (tx * y - ty * x)
        out.append((
            bx + x + tw * cx + ty * cz - tz * cy,
            by + y + tw * cy + tz * cx - tx * cz,
            bz + z_ + tw * cz + tx * cy - ty * cx,
        ))
    return out, axis, delta, turn


def _root(excess, a: float, fa: float, b: float, fb: float) -> float:
    """The angle in [a, b] (the excess changes sign there) where the excess vanishes: Newton's steps, bisection
    where one would leave the bracket."""
    x = a - fa * (b - a) / (fb - fa)
    for _ in range(_NEWTON):
        fx, dfx = excess(x)
        if abs(fx) <= _CLOSE:
            break
        if (fx > 0.0) == (fa > 0.0):
            a, fa = x, fx
        else:
            b, fb = x, fx
        x = x - fx / dfx if dfx != 0.0 else 0.5 * (a + b)
        if not (min(a, b) < x < max(a, b)):
            x = 0.5 * (a + b)
    return x


def turned_frames(frames: list[Quat], axis: Vec, delta: float, turn: Quat) -> list[Quat]:
    """Each bone's frame (base first) as `spread` turned its bone."""
    return [
        quat.normalized(quat.mul(turn, quat.mul(quat.about_axis(axis, k * delta), f))) for k, f in enumerate(frames)
    ]


def spread_rows(
    heads: np.ndarray, tails: np.ndarray, length: np.ndarray, target: np.ndarray, chosen: np.ndarray
) -> np.ndarray:
    """`spread` for the chosen frames of many: a chain's heads and tails (n, 3, F), base first, moved in place where
    a bend is found; the target (3, F). Which frames it moved (F,)."""
    n = len(length)
    columns = np.flatnonzero(chosen)
    moved = np.zeros(len(chosen), dtype=bool)
    if n < SHORTEST or not len(columns) or length.min() <= 0.0:
        return moved
    h, t, aim = heads[:, :, columns], tails[:, :, columns], target[:, columns]
    base = h[0]
    away = aim - base
    span2 = (away * away).sum(axis=0)
    directions = (t - h) / length[:, None, None]  # (n, 3, F)
    chord = t[-1] - base
    size = np.sqrt((chord * chord).sum(axis=0))
    ok = (size > 0.0) & (span2 > 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        towards = away / np.sqrt(span2)
        bent = np.cross(directions[:-1], directions[1:], axis=1).sum(axis=0)  # (3, F)
        straight = np.sqrt((bent * bent).sum(axis=0)) <= _STRAIGHT * n
        across = np.cross(chord / size, towards, axis=0)
        axis = np.where(straight, across, bent)
        axis_size = np.sqrt((axis * axis).sum(axis=0))
        ok &= np.where(straight, axis_size > _STRAIGHT, True)
        axis = axis / axis_size
        helper = np.where(np.abs(axis[2]) < 0.9, np.array([[0.0], [0.0], [1.0]]), np.array([[1.0], [0.0], [0.0]]))
        e1 = np.cross(axis, helper, axis=0)
        e1 = e1 / np.sqrt((e1 * e1).sum(axis=0))
    e2 = np.cross(axis, e1, axis=0)
    along = (length[:, None] * (directions * axis).sum(axis=1)).sum(axis=0)  # (F,)
    z = length[:, None] * ((directions * e1).sum(axis=1) + 1j * (directions * e2).sum(axis=1))  # (n, F)
    k = np.arange(n)[:, None]
    unit = 1.0 / float(length.sum()) ** 2

    def excess(delta: np.ndarray, rows=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        terms = z[:, rows] * np.exp(1j * k * delta)
        s, ds = terms.sum(axis=0), (k * terms).sum(axis=0)
        c2 = along[rows] ** 2 + s.real ** 2 + s.imag ** 2
        return (c2 - span2[rows]) * unit, -2.0 * (s.real * ds.imag - s.imag * ds.real) * unit

    f0 = excess(np.zeros(len(columns)))[0]
    ok &= np.isfinite(f0)
    delta = np.zeros(len(columns))
    searching = ok & (np.abs(f0) > _CLOSE)
    sign = np.where(f0 > 0.0, 1.0, -1.0)
    a, fa = np.zeros(len(columns)), f0.copy()
    b, fb = np.zeros(len(columns)), f0.copy()
    open_ = searching.copy()
    for step in _grid(n):
        if not open_.any():
            break
        x = step * sign
        fx = excess(x)[0]
        crossed = open_ & np.where(sign > 0.0, fx <= 0.0, fx >= 0.0)
        turned_back = open_ & ~crossed & np.where(sign > 0.0, fx > fa + _FLAT, fx < fa - _FLAT)
        b, fb = np.where(crossed, x, b), np.where(crossed, fx, fb)
        ok &= ~turned_back
        open_ &= ~crossed & ~turned_back
        a, fa = np.where(open_, x, a), np.where(open_, fx, fa)
    ok &= ~open_
    searching &= ok
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(searching, a - fa * (b - a) / (fb - fa), 0.0)
        for _ in range(_NEWTON):
            if not searching.any():
                break
            fx, dfx = excess(x)
            searching &= np.abs(fx) > _CLOSE
            same = (fx > 0.0) == (fa > 0.0)
            a, fa = np.where(searching & same, x, a), np.where(searching & same, fx, fa)
            b, fb = np.where(searching & ~same, x, b), np.where(searching & ~same, fx, fb)
            nxt = np.where(dfx != 0.0, x - fx / dfx, 0.5 * (a + b))
            inside = (np.minimum(a, b) < nxt) & (nxt < np.maximum(a, b))
            x = np.where(searching, np.where(inside, nxt, 0.5 * (a + b)), x)
    delta = np.where(ok, x, 0.0)
    c = z * np.exp(1j * k * delta)  # (n, F)
    steps = axis[None] * (length[:, None] * (directions * axis).sum(axis=1))[:, None] + e1[None] * c.real[:, None] + (
        e2[None] * c.imag[:, None]
    )
    joints = base[None] + np.concatenate((np.zeros((1, 3, len(columns))), np.cumsum(steps, axis=0)))  # (n + 1, 3, F)
    now = joints[-1] - base
    with np.errstate(invalid="ignore", divide="ignore"):
        now = now / np.sqrt((now * now).sum(axis=0))
    ok &= (now * towards).sum(axis=0) >= -1.0 + 1e-9  # (never turned half round: no axis to choose)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = quat_rows.arc(now, towards, towards)  # the shortest turn taking `now` onto `towards`, as `quat.arc`
    placed = base[None] + _rotated(q, joints[1:] - base[None])
    take = columns[ok]
    heads[1:, :, take] = placed[:-1, :, ok]
    tails[:, :, take] = placed[:, :, ok]
    moved[take] = True
    return moved


def _rotated(q: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Vectors (k, 3, F) each turned by its frame's rotation (q: (4, F))."""
    return np.swapaxes(quat_rows.rotate(q, np.swapaxes(vectors, 0, 1)), 0, 1)


def spread_within(
    points: list[Vec], length: Sequence[float], target: Vec, frames: list[Quat], zero: list[Quat], cones: Sequence,
) -> list[Vec] | None:
    """`spread` for a chain whose joints swing in cones: a joint the even bend takes out of its cone stops on the
    rim and the bones after it bend evenly onto the target. The joints, or None where no such bend lands the tip on
    the target."""
    n = len(length)
    placed = [tuple(p) for p in points]
    parent_frame = None
    for k in range(n):
        if n - k < SHORTEST:
            return None
        found = spread(placed[k:], length[k:], target)
        if found is None:
            return None
        placed = placed[:k] + found[0]
        direction = scale(sub(placed[k + 1], placed[k]), 1.0 / length[k])
        frame = _swung(frames[k], direction)
        zero_frame = zero[k] if parent_frame is None else quat.mul(parent_frame, zero[k])
        local = quat.normalized(quat.mul(quat.conj(zero_frame), frame))
        limit = cones[k]
        if limit is None or limits.allows(limit, local):
            # (the joints after it are the even bend's: the caller checks them)
            return placed if dist(placed[-1], target) <= _LANDED * max(1.0, dist(placed[0], target)) else None
        # On the rim (a hair inside: read again from the bone's direction, it must still pass): the bones after it
        # keep their shape, turned with it, and bend on from its new tail.
        sx, sz, twist = quat.swing_twist(limits.constrain(limit, local))
        inside = quat.from_swing_twist(sx * _RIM, sz * _RIM, twist)
        rim = quat.y_axis(quat.mul(zero_frame, inside))
        turn = quat.arc(direction, rim, quat.x_axis(frame))
        head = placed[k]
        placed = placed[:k + 1] + [add(head, quat.rotate(turn, sub(p, head))) for p in placed[k + 1:]]
        parent_frame = _swung(frames[k], rim)
    return None


def _swung(frame: Quat, direction: Vec) -> Quat:
    """A frame turned the shortest way so that its Y axis points along the unit direction."""
    return quat.turned(frame, quat.y_axis(frame), direction)


def spread_within_rows(
    points: np.ndarray, length: np.ndarray, target: np.ndarray, frames: np.ndarray, zero: np.ndarray,
    rest: np.ndarray, cones: Sequence, chosen: np.ndarray,
) -> np.ndarray:
    """`spread_within` for the chosen frames of many: the joints (n + 1, 3, F) moved in place where a bend is found,
    with the targets (3, F), start frames, first bone's zero frame and rests; which frames it moved (those whose tip
    landed)."""
    n = len(length)
    moved = np.zeros(len(chosen), dtype=bool)
    active = np.flatnonzero(chosen)
    joints = np.ascontiguousarray(points[:, :, active])  # (n + 1, 3, N): the active frames' joints
    parent = None  # the frames of the bone before, in the active frames (N, 3, 3)
    for k in range(n - SHORTEST + 1):
        if not len(active):
            break
        heads, tails = joints[k:-1].copy(), joints[k + 1:].copy()
        found = spread_rows(heads, tails, length[k:], target[:, active], np.ones(len(active), dtype=bool))
        keep = np.flatnonzero(found)
        active, joints = active[keep], joints[:, :, keep]
        parent = None if parent is None else parent[keep]
        joints[k + 1:] = tails[:, :, keep]
        direction = ((joints[k + 1] - joints[k]) / length[k]).T  # (N, 3)
        frame = matrix_rows.swung_frames(frames[active, k], direction)
        zero_frame = zero[active] if parent is None else parent @ rest[k]
        quaternions = matrix_rows.quaternions_from_matrices(np.swapaxes(zero_frame, 1, 2) @ frame)
        limit = cones[k]
        inside = np.ones(len(active), dtype=bool) if limit is None else limits.allows_rows(limit, quaternions)
        away = np.maximum(1.0, np.sqrt(((target[:, active] - joints[0]) ** 2).sum(axis=0)))
        landed = inside & (np.sqrt(((joints[-1] - target[:, active]) ** 2).sum(axis=0)) <= _LANDED * away)
        points[:, :, active[landed]] = joints[:, :, landed]
        moved[active[landed]] = True
        out = np.flatnonzero(~inside)
        if not len(out) or k + 1 > n - SHORTEST:
            break
        active, joints, direction, zero_frame = active[out], joints[:, :, out], direction[out], zero_frame[out]
        rimmed = matrix_rows.quaternion_to_matrix(limits.clamp_rows(limit, quaternions[out], _RIM))
        rim = (zero_frame @ rimmed)[:, :, 1]
        # The bones after it keep their shape, turned with it about its head the shortest way onto the rim.
        turn = quat_rows.arc(direction.T, rim.T, frame[out][:, :, 0].T)
        head = joints[k][None]  # (1, 3, N)
        joints[k + 1:] = head + _rotated(turn, joints[k + 1:] - head)
        parent = matrix_rows.swung_frames(frames[active, k], rim)
    return moved
