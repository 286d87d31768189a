# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint limits in 3D, in Blender's convention for its per-bone IK settings.

A bone's local rotation (relative to its rest, in its parent's frame) is split
into a twist about the bone's own Y axis followed by a swing that tips the Y
axis over, about an axis in the XZ plane. The swing is written as a rotation
vector (swing_x, swing_z): for a pure turn about X by a, swing_x = a.

- Swing: an elliptical cone. Each quadrant has its own semi-axes, from the X
  range on the X side and the Z range on the Z side, so asymmetric ranges such
  as an elbow's 0..145 degrees work. A locked axis allows no swing about it:
  one locked axis makes a hinge, two make the bone point along its rest.
- Twist: a range about Y, or locked.
- Stiffness 0..1 per axis: how much the bone resists turning in each solver
  pass (the rest of the chain takes up the motion); 1 holds it still.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..math import quat
from ..math.quat import Quat

PI = math.pi


@dataclass(frozen=True)
class JointLimit:
    """Limits of one bone, in radians, mirroring Blender's pose-bone IK settings."""

    lock_x: bool = False
    lock_y: bool = False
    lock_z: bool = False
    use_limit_x: bool = False
    use_limit_y: bool = False
    use_limit_z: bool = False
    min_x: float = -PI
    max_x: float = PI
    min_y: float = -PI
    max_y: float = PI
    min_z: float = -PI
    max_z: float = PI
    stiffness_x: float = 0.0
    stiffness_y: float = 0.0
    stiffness_z: float = 0.0

    def __post_init__(self) -> None:
        for axis in "xyz":
            lo, hi = getattr(self, f"min_{axis}"), getattr(self, f"max_{axis}")
            stiffness = getattr(self, f"stiffness_{axis}")
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError(f"the {axis.upper()} limit is not a finite number")
            if lo > hi:
                raise ValueError(f"the {axis.upper()} limit has min {math.degrees(lo):.1f} > max {math.degrees(hi):.1f} degrees")
            if not (math.isfinite(stiffness) and 0.0 <= stiffness <= 1.0):
                raise ValueError(f"the {axis.upper()} stiffness {stiffness} is outside 0..1")
        # The ranges, worked out once: the solver asks for them at every joint of every pass.
        ranges = {}
        for axis in "xz":
            if getattr(self, f"lock_{axis}"):
                ranges[axis] = (0.0, 0.0)
            elif getattr(self, f"use_limit_{axis}"):
                ranges[axis] = (max(-PI, getattr(self, f"min_{axis}")), min(PI, getattr(self, f"max_{axis}")))
            else:
                ranges[axis] = (-PI, PI)
        if self.lock_y:
            ranges["y"] = (0.0, 0.0)
        elif self.use_limit_y:
            ranges["y"] = (max(-PI, self.min_y), min(PI, self.max_y))
        else:
            ranges["y"] = (-PI, PI)
        # (attributes, not a dict: `clamp_swing` and `clamp_twist` run a few hundred times a frame)
        object.__setattr__(self, "x_range", ranges["x"])
        object.__setattr__(self, "z_range", ranges["z"])
        object.__setattr__(self, "y_range", ranges["y"])

    @property
    def is_free(self) -> bool:
        """True when nothing restricts or slows the bone."""
        return not (
            self.lock_x or self.lock_y or self.lock_z
            or self.use_limit_x or self.use_limit_y or self.use_limit_z
            or self.stiffness_x or self.stiffness_y or self.stiffness_z
        )

    @property
    def is_stiff(self) -> bool:
        """True when some axis has stiffness."""
        return bool(self.stiffness_x or self.stiffness_y or self.stiffness_z)

    @property
    def limits_swing(self) -> bool:
        """True when the bone's direction is restricted."""
        return self.lock_x or self.lock_z or self.use_limit_x or self.use_limit_z

    def swing_range(self, axis: str) -> tuple[float, float]:
        """The allowed swing about X or Z as (min, max); (0, 0) when locked, at most a half turn either way."""
        return self.x_range if axis == "x" else self.z_range

    def twist_range(self) -> tuple[float, float]:
        """The allowed twist about Y as (min, max)."""
        return self.y_range


def clamp_swing(limit: JointLimit, swing_x: float, swing_z: float) -> tuple[float, float]:
    """The allowed swing: inside the quadrant's ellipse, moved in along the ray to the rest direction."""
    lo_x, hi_x = limit.x_range
    lo_z, hi_z = limit.z_range
    if not (lo_x <= 0.0 <= hi_x and lo_z <= 0.0 <= hi_z):
        # A range that leaves out the rest direction has no cone around it: clamp each axis on its own.
        return min(max(swing_x, lo_x), hi_x), min(max(swing_z, lo_z), hi_z)
    a = hi_x if swing_x >= 0.0 else -lo_x  # the ellipse's semi-axes in this quadrant
    b = hi_z if swing_z >= 0.0 else -lo_z
    if a <= 1e-12 or b <= 1e-12:
        # A hinge (or a locked bone): no swing about the closed axis, a plain range about the other.
        x = 0.0 if a <= 1e-12 else min(max(swing_x, lo_x), hi_x)
        z = 0.0 if b <= 1e-12 else min(max(swing_z, lo_z), hi_z)
        return x, z
    r = (swing_x / a) ** 2 + (swing_z / b) ** 2
    if r <= 1.0:
        return swing_x, swing_z
    s = 1.0 / math.sqrt(r)
    return swing_x * s, swing_z * s


def clamp_twist(limit: JointLimit, twist: float) -> float:
    """The twist moved into its range."""
    lo, hi = limit.y_range
    return lo if twist < lo else (hi if twist > hi else twist)


def constrain(limit: JointLimit, local: Quat, previous: Quat | None = None) -> Quat:
    """The allowed local rotation nearest to `local` (`local` itself, the same object, where it is allowed and
    nothing holds it back); with `previous`, stiffness holds part of the change back."""
    swing_x, swing_z, twist = quat.swing_twist(local)
    held = previous is not None and (limit.stiffness_x or limit.stiffness_y or limit.stiffness_z)
    if held:
        px, pz, pt = quat.swing_twist(previous)
        swing_x = px + (1.0 - limit.stiffness_x) * (swing_x - px)
        swing_z = pz + (1.0 - limit.stiffness_z) * (swing_z - pz)
        twist = pt + (1.0 - limit.stiffness_y) * _wrap(twist - pt)
    allowed_x, allowed_z = clamp_swing(limit, swing_x, swing_z)
    allowed_twist = clamp_twist(limit, _wrap(twist))
    if not held and allowed_x == swing_x and allowed_z == swing_z and allowed_twist == twist:
        return local  # (most joints of a pass are inside their limits: the caller need not rebuild their frames)
    return quat.from_swing_twist(allowed_x, allowed_z, allowed_twist)


def allows(limit: JointLimit, local: Quat) -> bool:
    """Whether a local rotation is inside the limit (`constrain` leaves it as it is)."""
    swing_x, swing_z, twist = quat.swing_twist(local)
    if clamp_swing(limit, swing_x, swing_z) != (swing_x, swing_z):
        return False
    return clamp_twist(limit, _wrap(twist)) == twist


def allows_rows(limit: JointLimit, local: np.ndarray) -> np.ndarray:
    """`allows` for many local rotations at once ((N, 4) unit quaternions), for a limit whose ranges all contain
    the rest (an open cone, as `parts.open_cones_as_free` asks; no stiffness): the same swing and twist
    arithmetic row by row, and `allows` itself for the rows within a hair of the limit."""
    lo_x, hi_x = limit.x_range
    lo_z, hi_z = limit.z_range
    lo_y, hi_y = limit.y_range
    if not (lo_x < 0.0 < hi_x and lo_z < 0.0 < hi_z and lo_y <= 0.0 <= hi_y) or limit.is_stiff:
        raise ValueError("allows_rows takes open cones only")
    swing_x, swing_z, twist = swing_twist_rows(local)
    r = _ellipse_rows(limit, swing_x, swing_z)
    inside = (r <= 1.0) & (lo_y <= twist) & (twist <= hi_y) & (-math.pi < twist)
    near = (np.abs(r - 1.0) < 1e-9) | (np.abs(twist - lo_y) < 1e-9) | (np.abs(twist - hi_y) < 1e-9) | (
        np.abs(np.abs(twist) - math.pi) < 1e-9
    )
    for i in np.flatnonzero(near).tolist():
        inside[i] = allows(limit, tuple(local[i].tolist()))
    return inside


def swing_twist_rows(local: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`quat.swing_twist` for many local rotations ((N, 4) unit quaternions): swing x, swing z and twist (N,)."""
    q = np.where(local[:, :1] < 0.0, -local, local)  # (as quat.swing_twist: w made non-negative)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    tn = np.sqrt(w * w + y * y)
    degenerate = tn < 1e-12
    safe = np.where(degenerate, 1.0, tn)
    tw, ty = np.where(degenerate, 1.0, w / safe), np.where(degenerate, 0.0, y / safe)
    twist = 2.0 * np.arctan2(ty, tw)
    sw, sx, sz = w * tw + y * ty, x * tw + z * ty, z * tw - x * ty
    s = np.sqrt(sx * sx + sz * sz)
    angle = 2.0 * np.arctan2(s, sw)
    with np.errstate(invalid="ignore", divide="ignore"):
        swing_x = np.where(s < 1e-15, 0.0, angle * sx / s)
        swing_z = np.where(s < 1e-15, 0.0, angle * sz / s)
    return swing_x, swing_z, twist


def _ellipse_rows(limit: JointLimit, swing_x: np.ndarray, swing_z: np.ndarray) -> np.ndarray:
    """Per row, the swing's place in its quadrant's ellipse (1: on the rim) of an open cone."""
    (lo_x, hi_x), (lo_z, hi_z) = limit.x_range, limit.z_range
    a = np.where(swing_x >= 0.0, hi_x, -lo_x)  # the ellipse's semi-axes in each row's quadrant
    b = np.where(swing_z >= 0.0, hi_z, -lo_z)
    return (swing_x / a) ** 2 + (swing_z / b) ** 2


def clamp_rows(limit: JointLimit, local: np.ndarray, shrink: float = 1.0) -> np.ndarray:
    """`constrain` for many local rotations of an open cone ((N, 4)), each swing moved in to the rim where it
    leaves the cone (as `clamp_swing`) and then scaled by `shrink`, each twist into its range: (N, 4)."""
    swing_x, swing_z, twist = swing_twist_rows(local)
    r = _ellipse_rows(limit, swing_x, swing_z)
    s = shrink / np.sqrt(np.maximum(r, 1.0))
    swing_x, swing_z = swing_x * s, swing_z * s
    twist = np.clip(twist, *limit.y_range)
    angle = np.sqrt(swing_x * swing_x + swing_z * swing_z)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(angle < 1e-15, 0.5, np.sin(angle / 2.0) / angle)
    sw, sx, sz = np.cos(angle / 2.0), swing_x * f, swing_z * f
    tw, ty = np.cos(twist / 2.0), np.sin(twist / 2.0)
    return np.stack((sw * tw, sx * tw - sz * ty, sw * ty, sx * ty + sz * tw), axis=1)


def _wrap(angle: float) -> float:
    """The same angle in (-pi, pi]; an angle that is not a number stays so (the caller finds the pose not finite)."""
    if -PI < angle <= PI or not math.isfinite(angle):
        return angle
    return angle - 2.0 * PI * math.floor((angle + PI) / (2.0 * PI))


def sample(limit: JointLimit, rng) -> Quat:
    """A random local rotation inside the limit (rng: a numpy Generator)."""
    lo_x, hi_x = limit.swing_range("x")
    lo_z, hi_z = limit.swing_range("z")
    swing_x, swing_z = clamp_swing(limit, rng.uniform(lo_x, hi_x), rng.uniform(lo_z, hi_z))
    lo, hi = limit.twist_range()
    return quat.from_swing_twist(swing_x, swing_z, rng.uniform(lo, hi))


def limited_angles(limit: JointLimit, zero_frame: Quat, frame: Quat) -> list[float]:
    """A limited node's coordinates (swing about X, swing about Z, twist) as its limit keeps them: its frame
    read against its zero frame, then clamped into the limit."""
    sx, sz, tw = quat.swing_twist(quat.normalized(quat.mul(quat.conj(zero_frame), frame)))
    sx, sz = clamp_swing(limit, sx, sz)
    return [sx, sz, clamp_twist(limit, tw)]
