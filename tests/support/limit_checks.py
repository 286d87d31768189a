# SPDX-License-Identifier: GPL-3.0-or-later
"""An independent reading of local rotations against joint limits (no code shared with the solver's projection)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from fabrik_addon.core.model.limits import JointLimit

ANGLE_TOLERANCE = 1e-6


def swing_and_twist(local: np.ndarray) -> tuple[float, float, float]:
    """(swing_x, swing_z, twist) of a 3x3 local rotation: the shortest turn of Y onto the bone, then the rest about Y."""
    y = local[:, 1]
    theta = math.acos(min(1.0, max(-1.0, y[1])))
    rho = math.hypot(y[0], y[2])
    if rho < 1e-12:
        if y[1] < 0.0:
            return math.pi, 0.0, math.nan  # a half-turn swing: its direction and the twist are undefined
        swing_x = swing_z = 0.0
        swing = np.eye(3)
    else:
        swing_x, swing_z = theta * y[2] / rho, -theta * y[0] / rho
        axis = np.array([y[2], 0.0, -y[0]]) / rho
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        swing = np.eye(3) + math.sin(theta) * k + (1 - math.cos(theta)) * k @ k
    twist_matrix = swing.T @ local
    return swing_x, swing_z, math.atan2(twist_matrix[0, 2], twist_matrix[0, 0])


def assert_within(limit: JointLimit, local: np.ndarray, label: str) -> None:
    """The rotation satisfies the limit: locks, ranges, the elliptical cone and twist."""
    sx, sz, twist = swing_and_twist(local)
    tol = ANGLE_TOLERANCE
    if math.isnan(twist):
        reach = max(max(abs(v) for v in limit.swing_range(axis)) for axis in "xz")
        assert reach >= math.pi - tol, f"{label}: turned right round, which its swing limit does not allow"
        return
    for axis, value in (("x", sx), ("z", sz)):
        lo, hi = limit.swing_range(axis)
        assert lo - tol <= value <= hi + tol, f"{label}: swing {axis} {value:.6f} outside [{lo:.6f}, {hi:.6f}]"
    lo, hi = limit.twist_range()
    if math.hypot(sx, sz) < math.pi - 1e-3:  # at a half-turn swing the twist is undefined
        assert lo - tol <= twist <= hi + tol, f"{label}: twist {twist:.6f} outside [{lo:.6f}, {hi:.6f}]"
    lo_x, hi_x = limit.swing_range("x")
    lo_z, hi_z = limit.swing_range("z")
    a = hi_x if sx >= 0 else -lo_x
    b = hi_z if sz >= 0 else -lo_z
    if a > tol and b > tol:
        assert (sx / a) ** 2 + (sz / b) ** 2 <= 1.0 + 2 * tol / min(a, b), f"{label}: outside the swing cone"


@st.composite
def blender_limits(draw, with_stiffness: bool = False) -> JointLimit:
    """Limits as Blender's pose-bone IK settings allow them (min in [-pi, 0], max in [0, pi])."""
    values = {}
    for axis in "xyz":
        values[f"lock_{axis}"] = draw(st.booleans()) and draw(st.booleans())
        values[f"use_limit_{axis}"] = draw(st.booleans())
        values[f"min_{axis}"] = -draw(st.floats(0.0, math.pi))
        values[f"max_{axis}"] = draw(st.floats(0.0, math.pi))
        if with_stiffness:
            values[f"stiffness_{axis}"] = draw(st.sampled_from([0.0, 0.0, 0.5]))
    return JointLimit(**values)
