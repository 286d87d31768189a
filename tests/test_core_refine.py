# SPDX-License-Identifier: GPL-3.0-or-later
"""The refinement's swing derivatives against finite differences of the swing itself."""

from __future__ import annotations

import numpy as np
import pytest

from fabrik_addon.core import quat
from fabrik_addon.core.refine import _swing_derivatives


def finite_difference(sx: float, sz: float, about_x: bool, step: float = 1e-6) -> np.ndarray:
    """The angular velocity of the swing exp(sx X + sz Z) when sx (or sz) grows, by central differences."""
    lower = quat.from_swing_twist(sx - step if about_x else sx, sz if about_x else sz - step, 0.0)
    upper = quat.from_swing_twist(sx + step if about_x else sx, sz if about_x else sz + step, 0.0)
    return np.array(quat.log(quat.mul(upper, quat.conj(lower)))) / (2.0 * step)


@pytest.mark.parametrize("about_x", [True, False])
def test_swing_derivatives_match_finite_differences(about_x):
    rng = np.random.default_rng(7)
    sx, sz = rng.uniform(-2.5, 2.5, 60), rng.uniform(-2.5, 2.5, 60)
    sx[:3], sz[:3] = 0.0, 0.0  # no swing at all: the axis itself
    sx[3], sz[3] = 1e-7, 0.0
    got = _swing_derivatives(sx, sz, np.full(60, about_x))
    want = np.array([finite_difference(a, b, about_x) for a, b in zip(sx, sz)])
    assert np.abs(got - want).max() < 1e-6
