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


def test_start_twists_are_the_twists_a_whole_angle_rig_reads():
    """`start_twists` reads only the twists that move no goal (a leaf's roll), as `AngleRig` would from the
    whole start pose (the solver no longer poses the whole tree for them)."""
    from fabrik_addon.core import Goal, skeleton_from_points
    from fabrik_addon.core.fabrik import moving_tree
    from fabrik_addon.core.limits import JointLimit
    from fabrik_addon.core.refine import AngleRig, Problem, start_twists

    count = 6
    heads = [(0.0, 0.0, 0.5 * i) for i in range(count)]
    tails = [(0.0, 0.0, 0.5 * (i + 1)) for i in range(count)]
    cone = JointLimit(use_limit_x=True, min_x=-0.6, max_x=0.6, use_limit_z=True, min_z=-0.4, max_z=0.4,
                      use_limit_y=True, min_y=-0.5, max_y=0.5)
    skeleton = skeleton_from_points(list(range(-1, count - 1)), heads, tails).with_limits({i: cone for i in range(count)})
    goals = [Goal(bone=count - 1, target=(0.5, 0.2, 2.0))]
    tree = moving_tree(skeleton, goals)
    problem = Problem(tree, goals)
    assert problem.idle_twists  # the tip bone's roll moves no goal
    rng = np.random.default_rng(3)
    for _ in range(5):
        posed = AngleRig(skeleton, tree, skeleton.rest_pose())
        for k in range(len(tree.bones)):  # every joint turned inside its cone, the roll of the tip too
            posed.angles[k] = [rng.uniform(-0.4, 0.4), rng.uniform(-0.3, 0.3), rng.uniform(-0.45, 0.45)]
            posed.local[k] = quat.from_swing_twist(*posed.angles[k])
        posed.forward()
        start = posed.pose(skeleton, skeleton.rest_pose())
        whole = AngleRig(skeleton, tree, start)
        twists = start_twists(skeleton, tree, problem, start)
        assert set(twists) == {k for k in problem.idle_twists if tree.limits[k] is not None}
        for k, twist in twists.items():
            assert abs(twist) > 1e-3  # (a roll to read back, not the rest's zero)
            assert twist == pytest.approx(whole.angles[k][2], abs=1e-12)
