# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation goals and pole targets in the core solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core import quat
from skeletons import straight_chain


def pole_error_degrees(pose, target, pole, angle=0.0) -> float:
    """Angle between the first bone's X axis and the pole direction (turned by angle), seen along base->target."""
    base = pose.heads[0]
    axis = np.asarray(target) - base
    axis /= np.linalg.norm(axis)
    x = pose.frames[0][:, 0] - axis * (axis @ pose.frames[0][:, 0])
    towards = np.asarray(pole) - base
    towards -= axis * (axis @ towards)
    towards = np.array(quat.rotate(quat.about_axis(tuple(axis), angle), tuple(towards)))
    cosine = x @ towards / np.linalg.norm(x) / np.linalg.norm(towards)
    return math.degrees(math.acos(max(-1.0, min(1.0, cosine))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda q: sum(c * c for c in q) > 0.1))
def test_a_rotation_goal_turns_the_tip_bone_to_the_targets_frame(raw):
    """With full weight the tip bone's whole frame (direction and roll) matches the goal's.

    The target is close enough to the base that the other three bones can put
    the tip bone's head wherever the goal's direction needs it.
    """
    rotation = quat.normalized(raw)
    skeleton = straight_chain(4)
    pose, report = solve(skeleton, [Goal(3, (0.5, 0.3, 1.5), rotation=rotation)], settings=SolveSettings(max_iterations=200))
    assert report.converged, report
    np.testing.assert_allclose(pose.frames[3], quat.to_matrix(rotation), atol=1e-2)


def test_rotation_weight_blends_between_free_and_aligned():
    """Weight 0 leaves the tip free; weight 0.5 ends between the free direction and the goal's."""
    skeleton = straight_chain(4)
    goal_rotation = quat.about_axis((0.0, 0.0, 1.0), -math.pi / 2)  # the tip bone pointing along +X
    target = (1.0, 1.0, 2.0)
    free, _ = solve(skeleton, [Goal(3, target)])
    none, _ = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=0.0)])
    half, report = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=0.5)])
    full, _ = solve(skeleton, [Goal(3, target, rotation=goal_rotation, rotation_weight=1.0)])
    assert report.converged
    y_goal = np.array(quat.y_axis(goal_rotation))

    def off(pose):
        return math.acos(np.clip(pose.frames[3][:, 1] @ y_goal, -1, 1))

    np.testing.assert_allclose(none.frames[3][:, 1], free.frames[3][:, 1], atol=1e-3)
    assert off(full) < 1e-2 < off(half) < off(free)


@pytest.mark.parametrize("pole", [(3.0, 0.0, 1.0), (0.0, -3.0, 1.0), (-2.0, 2.0, 0.5)])
@pytest.mark.parametrize("angle", [0.0, math.pi / 2, -math.pi / 3])
def test_the_pole_decides_which_way_the_chain_turns(pole, angle):
    """The first bone's X axis faces the pole (turned by the pole angle) about the base-target line, as in Blender."""
    skeleton = straight_chain(3)
    target = (0.4, 0.3, 2.2)
    pose, report = solve(skeleton, [Goal(2, target, pole=pole, pole_angle=angle)])
    assert report.converged, report
    assert pole_error_degrees(pose, target, pole, angle) < 0.5


def test_a_straight_chain_with_its_target_on_its_own_line_still_bends():
    """The paper's degenerate case: every joint and the target on one line. The chain bends (towards the pole)."""
    skeleton = straight_chain(3)
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 2.0))])
    assert report.converged, report
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 2.0), pole=(0.0, -3.0, 1.0))])
    assert report.converged and pole_error_degrees(pose, (0.0, 0.0, 2.0), (0.0, -3.0, 1.0)) < 0.5


@pytest.mark.parametrize(
    "goal, message",
    [
        (Goal(0, (0.0, 0.0, 1.0), rotation=(2.0, 0.0, 0.0, 0.0)), "unit quaternion"),
        (Goal(0, (0.0, 0.0, 1.0), rotation=(1.0, 0.0, 0.0, 0.0), rotation_weight=1.5), "rotation weight"),
        (Goal(0, (0.0, 0.0, 1.0), pole=(0.0, float("nan"), 0.0)), "pole that is not a finite"),
        (Goal(0, (0.0, 0.0, 1.0), pole=(0.0, 1.0, 0.0), pole_angle=float("inf")), "pole angle"),
    ],
)
def test_bad_rotation_and_pole_goals_are_refused(goal, message):
    """Nonsense rotations, weights and poles raise ValueError naming the problem."""
    with pytest.raises(ValueError, match=message):
        solve(straight_chain(2), [goal])
