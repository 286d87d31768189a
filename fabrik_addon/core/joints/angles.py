# SPDX-License-Identifier: GPL-3.0-or-later
"""A moving tree in the coordinates its joint limits are written in, and the coordinates a solve may move.

Each limited joint is described by its swing (a rotation vector (sx, 0, sz)
in the bone's XZ plane) after a twist t about its Y axis (see `limits`). A
free joint turns about three axes of its zero frame. Axes that a limit locks
are not degrees of freedom at all, so a hinge has one, a knuckle two.
`AngleRig` poses the tree from those coordinates by forward kinematics;
`Freedom` lists the coordinates a solve may move (the goals laid on the
tree's nodes: `tree_goals`). The refinement (`refine`) and settling
(`settle`) move these coordinates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from ..math import quat, quat_rows
from ..math.quat import Quat
from ..math.vec import Vec
from ..model import limits
from ..model.limits import JointLimit
from ..model.skeleton import Skeleton
from ..model.tree import MovingTree, Start

if TYPE_CHECKING:  # (the goals' view is built on this module: named here for the type hints alone)
    from .tree_goals import TreeGoals

__all__ = [
    "FRAME_AXES", "AngleRig", "Coordinate", "Freedom", "freedom", "swing_derivative", "values_after_turn",
]

#: Even a joint of stiffness 1 takes this share of a step, so that a target only it can reach is still reached.
MIN_PLIANCY = 0.01


@dataclass(frozen=True)
class Coordinate:
    """One degree of freedom: a node, which coordinate ("x", "z" swing, "y" twist; "free0..2" for free joints)."""

    node: int
    kind: str


class AngleRig:
    """The moving tree posed by per-joint coordinates, with heads, frames and tips by forward kinematics."""

    def __init__(self, tree: MovingTree, start: Start, moved: tuple[list[Vec], list[Quat]] | None = None) -> None:
        """The tree as `start` places it, or with its nodes' heads and frames (unit quaternions) `moved` (FABRIK's
        joints: the bones between a node and its moving parent stand as in `start`)."""
        self.tree = tree
        m = len(tree.bones)
        heads, frames = (start.heads, start.frames) if moved is None else moved
        #: Per node, the turn from its moving parent's frame to its zero frame (`Start.zero`).
        self.zero: list[Quat] = start.zero
        #: Per node, its head in its moving parent's frame from the parent's head (armature space for a base).
        self.link: list[Vec] = [
            quat.rotate(quat.conj(frames[p]), _sub(heads[k], heads[p])) if p >= 0 else heads[k]
            for k, p in enumerate(tree.parent)
        ]
        self.limits: tuple[JointLimit | None, ...] = tree.limits
        # Per node: (sx, sz, twist) for limited joints, the local quaternion for free ones.
        self.angles: list[list[float] | None] = [None] * m
        self.local: list[Quat] = [quat.IDENTITY] * m
        for k in range(m):
            zero_frame = self.zero[k] if tree.parent[k] < 0 else quat.mul(frames[tree.parent[k]], self.zero[k])
            limit = self.limits[k]
            if limit is None:
                self.local[k] = quat.normalized(quat.mul(quat.conj(zero_frame), frames[k]))
            else:
                self.angles[k] = limits.limited_angles(limit, zero_frame, frames[k])
                self.local[k] = quat.from_swing_twist(*self.angles[k])
        self.heads: list[Vec] = [(0.0, 0.0, 0.0)] * m
        self.frames: list[Quat] = [quat.IDENTITY] * m
        self.zero_frames: list[Quat] = [quat.IDENTITY] * m
        self.forward()

    def forward(self, first: int = 0) -> None:
        """Heads and frames of every node from the coordinates; from node `first` on where only nodes from there on
        changed (nodes come parents first, so the ones before it are as they were)."""
        parent, heads, frames, zero_frames = self.tree.parent, self.heads, self.frames, self.zero_frames
        zero, link, local = self.zero, self.link, self.local
        # (quat.mul and quat.rotate written out: this runs for every node at every step of a limited solve)
        for k in range(first, len(parent)):
            p = parent[k]
            if p < 0:
                zw, zx, zy, zz = zero_frames[k] = zero[k]
                heads[k] = link[k]
            else:
                aw, ax, ay, az = frames[p]
                bw, bx, by, bz = zero[k]
                zw = aw * bw - ax * bx - ay * by - az * bz
                zx = aw * bx + ax * bw + ay * bz - az * by
                zy = aw * by - ax * bz + ay * bw + az * bx
                zz = aw * bz + ax * by - ay * bx + az * bw
                zero_frames[k] = (zw, zx, zy, zz)
                # the link turned by the parent's frame: v + w t + q x t, t = 2 q x v
                vx, vy, vz = link[k]
                tx = 2.0 * (ay * vz - az * vy)
                ty = 2.0 * (az * vx - ax * vz)
                tz = 2.0 * (ax * vy - ay * vx)
                hx, hy, hz = heads[p]
                heads[k] = (
                    hx + vx + aw * tx + ay * tz - az * ty,
                    hy + vy + aw * ty + az * tx - ax * tz,
                    hz + vz + aw * tz + ax * ty - ay * tx,
                )
            bw, bx, by, bz = local[k]
            frames[k] = (
                zw * bw - zx * bx - zy * by - zz * bz,
                zw * bx + zx * bw + zy * bz - zz * by,
                zw * by - zx * bz + zy * bw + zz * bx,
                zw * bz + zx * by - zy * bx + zz * bw,
            )

    def tip(self, k: int) -> Vec:
        """Node k's tail."""
        y = quat.y_axis(self.frames[k])
        h, length = self.heads[k], self.tree.length[k]
        return (h[0] + length * y[0], h[1] + length * y[1], h[2] + length * y[2])

    def coordinates(self, problem: TreeGoals) -> list[Coordinate]:
        """Every degree of freedom the limits leave that can move a goal, parents first.

        A limited bone at the end of a chain that turns about its own axis
        (a tool's roll) moves no tip; without a rotation goal on it that
        twist is left alone.
        """
        out = []
        for k, limit in enumerate(self.limits):
            if limit is None:
                out += [Coordinate(k, "free0"), Coordinate(k, "free1"), Coordinate(k, "free2")]
                continue
            for axis, kind in (("x", "x"), ("z", "z")):
                lo, hi = limit.swing_range(axis)
                if hi - lo > 1e-12:
                    out.append(Coordinate(k, kind))
            lo, hi = limit.twist_range()
            if hi - lo > 1e-12 and k not in problem.idle_twists:
                out.append(Coordinate(k, "y"))
        return out

    def placed(self, skeleton: Skeleton, start: Start) -> Start:
        """The start with the nodes where the rig has them."""
        return start.moved(skeleton, self.tree, list(self.frames), list(self.heads))

    def table(self, free: Freedom) -> np.ndarray:
        """The angles (sx, sz, twist) of the limited nodes that have coordinates, a row each (`get` and `axes`
        read them)."""
        return np.array([self.angles[k] for k in free.limited_nodes]).reshape(-1, 3)

    def axes(self, free: Freedom, table: np.ndarray) -> np.ndarray:
        """The world axis each coordinate turns its node about, per unit of the coordinate (c, 3)."""
        # Each axis is fixed in a frame (a twist turns about the bone's own Y, the others about axes of the zero
        # frame): all turned into the world at once.
        turns = np.array(self.zero_frames + self.frames).reshape(-1, 4)[free.turn_rows]
        local = free.local_axes
        if free.swings:
            angles = table[free.swing_rows]
            local = local.copy()
            local[free.swings] = _swing_derivatives(angles[:, 0], angles[:, 1], free.about_x)
        return quat_rows.rotate(turns.T, local.T).T

    def get(self, free: Freedom, table: np.ndarray) -> np.ndarray:
        """The coordinates' current values (free joints count from where they are: 0)."""
        values = np.zeros(len(free.nodes))
        values[free.bounded] = table[free.rows, free.columns]
        return values

    def values(self, free: Freedom) -> list[float]:
        """`get` in plain floats."""
        angles = self.angles
        return [0.0 if loose else angles[k][slot] for k, slot, loose in zip(free.nodes, free.slots, free.loose)]

    def step(self, free: Freedom, delta: np.ndarray | list[float]) -> None:
        """Move the coordinates by delta, clamped into their limits, and update the pose."""
        angles = self.angles
        free_turn: dict[int, list[float]] = {}
        steps = delta.tolist() if isinstance(delta, np.ndarray) else delta
        for k, slot, loose, d in zip(free.nodes, free.slots, free.loose, steps):
            if loose:
                free_turn.setdefault(k, [0.0, 0.0, 0.0])[slot] = d
            else:
                angles[k][slot] += d
        for k, w in free_turn.items():
            # A turn about the zero frame's axes: left-multiply in the zero frame.
            self.local[k] = quat.normalized(quat.mul(quat.exp(w), self.local[k]))
        for k in free.limited_nodes:
            limit = self.limits[k]
            sx, sz, tw = angles[k]
            sx, sz = limits.clamp_swing(limit, sx, sz)
            tw = limits.clamp_twist(limit, tw)
            angles[k] = [sx, sz, tw]
            self.local[k] = quat.from_swing_twist(sx, sz, tw)
        self.forward()

    def snapshot(self) -> tuple:
        """The coordinates (everything else follows from them)."""
        return [None if a is None else list(a) for a in self.angles], list(self.local)

    def restore(self, snapshot: tuple) -> None:
        """Go back to a snapshot."""
        self.angles = [None if a is None else list(a) for a in snapshot[0]]
        self.local = list(snapshot[1])
        self.forward()

    def rims(self, free: Freedom) -> list[tuple[int, int, tuple[float, float]]]:
        """Swings on the rim of their elliptical cone: (index of sx, index of sz, outward unit normal)."""
        out = []
        for k, ix, iz, (lo_x, hi_x), (lo_z, hi_z) in free.cones:
            sx, sz, _ = self.angles[k]
            a = hi_x if sx >= 0.0 else -lo_x
            b = hi_z if sz >= 0.0 else -lo_z
            if a <= 1e-12 or b <= 1e-12 or (sx / a) ** 2 + (sz / b) ** 2 < 1.0 - 1e-9:
                continue
            nx, nz = sx / (a * a), sz / (b * b)
            size = math.hypot(nx, nz)
            out.append((ix, iz, (nx / size, nz / size)))
        return out

    def pliancy(self, coordinates: Sequence[Coordinate]) -> np.ndarray:
        """Per coordinate, 1 - its axis' IK stiffness: how much of a step it takes (a stiff joint turns less)."""
        out = np.ones(len(coordinates))
        for i, c in enumerate(coordinates):
            limit = self.limits[c.node]
            if limit is not None and c.kind in "xyz":
                out[i] = max(MIN_PLIANCY, 1.0 - getattr(limit, f"stiffness_{c.kind}"))
        return out

    def bounds(self, coordinates: Sequence[Coordinate]) -> tuple[np.ndarray, np.ndarray]:
        """Each coordinate's range (free joints: unbounded)."""
        lo = np.full(len(coordinates), -np.inf)
        hi = np.full(len(coordinates), np.inf)
        for i, c in enumerate(coordinates):
            limit = self.limits[c.node]
            if limit is None:
                continue
            lo[i], hi[i] = limit.twist_range() if c.kind == "y" else limit.swing_range(c.kind)
        return lo, hi


#: The unit axes X, Y, Z.
_AXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))
_Y = _AXES[1]
#: Each of a frame's own axes (X, Y, Z) from its quaternion.
FRAME_AXES = (quat.x_axis, quat.y_axis, quat.z_axis)


def _swing_derivatives(sx: np.ndarray, sz: np.ndarray, about_x: np.ndarray) -> np.ndarray:
    """The angular velocities (in the zero frame) of exp(sx X + sz Z) per unit change of sx (where `about_x`) or sz,
    one row per swing, by the left Jacobian J(v) = I + (1 - cos a) / a^2 [v]x + (a - sin a) / a^3 [v]x^2."""
    a2 = sx * sx + sz * sz
    turned = a2 >= 1e-12  # (no swing: the derivative is the axis itself)
    safe = np.where(turned, a2, 1.0)
    a = np.sqrt(safe)
    b = np.where(turned, (1.0 - np.cos(a)) / safe, 0.0)
    c = np.where(turned, (a - np.sin(a)) / (safe * a), 0.0)
    # With v = (sx, 0, sz) and e = X or Z: v x e = (0, t, 0), t = sz or -sx; v x (v x e) = (-sz t, 0, sx t).
    t = np.where(about_x, sz, -sx)
    out = np.empty((len(sx), 3))
    out[:, 0] = np.where(about_x, 1.0, 0.0) - c * sz * t
    out[:, 1] = b * t
    out[:, 2] = np.where(about_x, 0.0, 1.0) + c * sx * t
    return out


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


class Freedom(NamedTuple):
    """The coordinates a refinement moves (`AngleRig.coordinates`), with what each step needs of them that
    depends on the tree and the goals' layout alone."""

    coordinates: list[Coordinate]
    #: Per coordinate: its range, pliancy and node, and the row of the frame its axis is fixed in among the zero
    #: frames and then the frames (a twist turns about the bone's own Y, the others about its zero frame's axes).
    lo: np.ndarray
    hi: np.ndarray
    pliancy: np.ndarray
    nodes: list[int]
    turn_rows: np.ndarray
    #: Per coordinate, the axis it turns about in its frame (the swings' rows depend on the swing: `AngleRig.axes`).
    local_axes: np.ndarray
    #: The swing coordinates: their indices, their nodes' rows in `AngleRig.table`, and whether each is the
    #: swing about X.
    swings: list[int]
    swing_rows: np.ndarray
    about_x: np.ndarray
    #: Per goal, 1 for each coordinate that moves its tip, else 0 (`moving`: the indices of those coordinates).
    moves: list[np.ndarray]
    moving: list[list[int]]
    #: Per coordinate, whether it belongs to a free joint (`loose`), and its place: in its node's angles (sx, sz,
    #: twist) for a limited joint, the axis of its turn for a free one.
    loose: list[bool]
    slots: list[int]
    #: The limited nodes that have coordinates (a step clamps them), and the swings whose limit is a cone around
    #: rest: (node, index of sx, index of sz, X range, Z range).
    limited_nodes: list[int]
    cones: list[tuple]
    #: The coordinates of limited joints, and each one's row and column in `AngleRig.table`.
    bounded: np.ndarray
    rows: np.ndarray
    columns: np.ndarray
    #: Per coordinate, its rest (0) for a limited joint, NaN for a free one (`rest_aim`).
    rest: np.ndarray
    #: Per coordinate, its squared pliancy relative to the most pliant one's, as settling weighs it; None where
    #: every coordinate is as pliant as the others (no stiffness, or the same everywhere: weighing changes nothing).
    settling_weight: np.ndarray | None


def freedom(rig: AngleRig, problem: TreeGoals) -> Freedom:
    """The rig's `Freedom` for these goals, kept with the tree for its next solve (the tree is the same for the
    same layout of goals)."""
    key = frozenset(problem.idle_twists), tuple(problem.nodes)
    found = rig.tree.kept.freedoms.get(key)
    if found is not None:
        return found
    coordinates = rig.coordinates(problem)
    lo, hi = rig.bounds(coordinates)
    nodes = [c.node for c in coordinates]
    local_axes = np.array([_AXES[int(c.kind[4])] if c.kind.startswith("free") else _Y for c in coordinates])
    swings = [i for i, c in enumerate(coordinates) if c.kind in ("x", "z")]
    loose = [c.kind.startswith("free") for c in coordinates]
    where = {(c.node, c.kind): i for i, c in enumerate(coordinates)}
    cones = []
    for k, limit in enumerate(rig.limits):
        if limit is None or (k, "x") not in where or (k, "z") not in where:
            continue
        lo_x, hi_x = limit.swing_range("x")
        lo_z, hi_z = limit.swing_range("z")
        if lo_x <= 0.0 <= hi_x and lo_z <= 0.0 <= hi_z:  # (otherwise each axis has a range of its own)
            cones.append((k, where[(k, "x")], where[(k, "z")], (lo_x, hi_x), (lo_z, hi_z)))
    slots = [int(c.kind[4]) if free else "xzy".index(c.kind) for c, free in zip(coordinates, loose)]
    limited_nodes = list(dict.fromkeys(c.node for c, free in zip(coordinates, loose) if not free))
    row_of = {k: r for r, k in enumerate(limited_nodes)}
    bounded = [i for i, free in enumerate(loose) if not free]
    pliancy = rig.pliancy(coordinates)
    found = Freedom(
        coordinates, lo, hi, pliancy, nodes,
        np.array([c.node + (len(rig.limits) if c.kind == "y" else 0) for c in coordinates], dtype=int),
        local_axes.reshape(-1, 3),
        swings, np.array([row_of[nodes[i]] for i in swings], dtype=int),
        np.array([coordinates[i].kind == "x" for i in swings], dtype=bool),
        [np.array([n in moved for n in nodes], dtype=float) for moved in problem.moved_by],
        [[i for i, n in enumerate(nodes) if n in moved] for moved in problem.moved_by],
        loose, slots, limited_nodes, cones,
        np.array(bounded, dtype=int), np.array([row_of[nodes[i]] for i in bounded], dtype=int),
        np.array([slots[i] for i in bounded], dtype=int),
        np.where(loose, np.nan, 0.0).reshape(-1),
        None if not len(pliancy) or pliancy.min() == pliancy.max() else (pliancy / pliancy.max()) ** 2,
    )
    for array in found:
        if isinstance(array, np.ndarray):
            array.flags.writeable = False  # (shared by every solve of the tree)
    rig.tree.kept.freedoms[key] = found
    return found


def values_after_turn(rig: AngleRig, coordinates: Sequence[Coordinate], node: int, turn: Quat) -> dict[int, float]:
    """The values node's coordinates would take if its frame (and everything below) turned by `turn`."""
    local = quat.normalized(quat.mul(quat.conj(rig.zero_frames[node]), quat.mul(turn, rig.frames[node])))
    out = {}
    if rig.angles[node] is None:
        # Free joints count from where they are: the turn's rotation vector in the zero frame.
        w = quat.log(quat.mul(local, quat.conj(rig.local[node])))
        for i, c in enumerate(coordinates):
            if c.node == node:
                out[i] = w[int(c.kind[4])]
        return out
    sx, sz, tw = quat.swing_twist(local)
    # Keep the twist on the same turn as now (swing_twist gives (-pi, pi]).
    tw = rig.angles[node][2] + math.remainder(tw - rig.angles[node][2], 2.0 * math.pi)
    for i, c in enumerate(coordinates):
        if c.node == node:
            out[i] = {"x": sx, "z": sz, "y": tw}[c.kind]
    return out


def swing_derivative(sx: float, sz: float, about_x: bool) -> Vec:
    """`_swing_derivatives` of one swing, in plain floats (the same arithmetic)."""
    a2 = sx * sx + sz * sz
    if a2 < 1e-12:
        return (1.0, 0.0, 0.0) if about_x else (0.0, 0.0, 1.0)
    a = math.sqrt(a2)
    b = (1.0 - math.cos(a)) / a2
    c = (a - math.sin(a)) / (a2 * a)
    t = sz if about_x else -sx
    return ((1.0 if about_x else 0.0) - c * sz * t, b * t, (0.0 if about_x else 1.0) + c * sx * t)
