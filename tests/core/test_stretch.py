# SPDX-License-Identifier: GPL-3.0-or-later
"""IK stretch in the core: bones grow towards targets out of reach, in Blender's proportions, never shrink."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from limit_checks import assert_within, blender_limits
from skeletons import random_chain, straight_chain, unit_vectors

from fabrik_addon.core import SOLVERS, Goal, Skeleton, SolveSettings, skeleton_from_points, solve
from fabrik_addon.core.goals import stretch
from fabrik_addon.core.model.limits import JointLimit
from fabrik_addon.core.solving import many_frames
from fabrik_addon.core.solving.plan import plan_for


def with_stretch(skeleton: Skeleton, factors, limits=None) -> Skeleton:
    """The skeleton with these stretch factors (and limits)."""
    return Skeleton(
        skeleton.parents, skeleton.rest_heads, skeleton.rest_frames, skeleton.lengths, skeleton.names,
        limits if limits is not None else skeleton.limits, factors,
    )


def blender_lengths(lengths, factors, distance):
    """What Blender's IK gives a straight chain pulled to `distance`: each bone grows by its share f^3 (weight f^2,
    at least 1e-3) of the missing length."""
    shares = np.array([0.0 if f <= 0 else max(f * f, 1e-3) ** 1.5 for f in factors])
    return np.asarray(lengths) + (distance - sum(lengths)) * shares / shares.sum()


TIGHT = SolveSettings(max_iterations=100, tolerance=1e-6)


# --- the skeleton's stretch factors ---------------------------------------------------------------------------


def test_skeleton_keeps_stretch_factors_through_with_limits():
    skeleton = with_stretch(straight_chain(3), [0.0, 0.5, 1.0])
    limited = skeleton.with_limits({1: JointLimit(lock_x=True)})
    assert limited.stretch.tolist() == [0.0, 0.5, 1.0]
    assert straight_chain(3).stretch.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("factors", [[0.0, 1.5, 0.0], [0.0, -0.1, 0.0], [0.0, float("nan"), 0.0], [0.5, 0.5]])
def test_skeleton_refuses_stretch_factors_outside_0_to_1(factors):
    with pytest.raises(ValueError):
        with_stretch(straight_chain(3), factors)


# --- reaching -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SOLVERS))
@pytest.mark.parametrize("target", [(0.0, 0.0, 4.0), (0.0, 0.4, 3.5), (2.5, 0.0, 2.5), (0.0, 4.0, 0.0)])
def test_out_of_reach_with_stretch_reaches_the_target(name, target):
    count = 2 if name == "TWO_BONE" else 3
    skeleton = with_stretch(straight_chain(count), [0.1, 0.5, 1.0][-count:])
    pose, report = SOLVERS[name](skeleton, [Goal(count - 1, target, stretch=True)], settings=TIGHT)
    assert report.converged, report
    assert np.linalg.norm(pose.tails[count - 1] - target) <= 1e-6
    assert (pose.lengths >= skeleton.lengths - 1e-12).all()


def test_a_pole_chain_stretches_straight_at_its_target_and_keeps_its_roll():
    skeleton = with_stretch(straight_chain(2), [1.0, 1.0])
    goal = Goal(1, (0.0, 2.0, 2.0), pole=(3.0, 0.0, 1.0), stretch=True)
    pose, report = solve(skeleton, [goal], settings=TIGHT)
    assert report.converged
    plain, _ = solve(skeleton, [Goal(1, (0.0, 2.0, 2.0), pole=(3.0, 0.0, 1.0))], settings=TIGHT)
    # The stretched chain lies where the unstretched one points, turned the same way about its line.
    assert np.allclose(pose.frames, plain.frames, atol=5e-3)


def test_without_the_goals_stretch_flag_nothing_stretches():
    skeleton = with_stretch(straight_chain(3), [1.0, 1.0, 1.0])
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 5.0))], settings=TIGHT)
    assert not report.converged and report.stopped_by == "unreachable"
    assert np.array_equal(pose.lengths, skeleton.lengths)


@pytest.mark.parametrize("target", [(0.0, 1.0, 1.5), (0.0, 0.0, 3.0), (1.0, 1.0, 0.5)])
def test_within_reach_nothing_stretches(target):
    skeleton = with_stretch(straight_chain(3), [1.0, 1.0, 1.0])
    pose, report = solve(skeleton, [Goal(2, target, stretch=True)], settings=TIGHT)
    assert report.converged
    assert np.array_equal(pose.lengths, skeleton.lengths)


def test_a_factor_of_zero_never_stretches():
    skeleton = with_stretch(straight_chain(3), [0.0, 1.0, 0.0])
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 6.0), stretch=True)], settings=TIGHT)
    assert report.converged
    assert pose.lengths[0] == 1.0 and pose.lengths[2] == 1.0
    assert pose.lengths[1] == pytest.approx(4.0)
    none = with_stretch(straight_chain(3), [0.0, 0.0, 0.0])
    pose, report = solve(none, [Goal(2, (0.0, 0.0, 6.0), stretch=True)], settings=TIGHT)
    assert report.stopped_by == "unreachable" and np.array_equal(pose.lengths, none.lengths)


@pytest.mark.parametrize(
    "factors, distance, measured",
    [
        # Bone lengths Blender 5.0's IK constraint (Stretch on) gave these chains of 1-unit bones along +Z
        # with the target on their line (tests/blender/test_stretch.py checks the same live against Blender).
        ([0.5, 1.0], 2.5, [1.05556, 1.44444]),
        ([0.1, 0.5], 4.0, [1.01587, 2.9841]),
        ([0.1, 0.5, 1.0], 5.0, [1.00178, 1.22202, 2.77619]),
        ([0.01, 0.03], 3.0, [1.5, 1.5]),  # both under the weight floor: equal shares
    ],
)
def test_the_stretch_follows_the_factors_as_blender_shares_it(factors, distance, measured):
    count = len(factors)
    skeleton = with_stretch(straight_chain(count), factors)
    pose, report = solve(skeleton, [Goal(count - 1, (0.0, 0.0, distance), stretch=True)], settings=TIGHT)
    assert report.converged
    assert np.allclose(pose.lengths, blender_lengths([1.0] * count, factors, distance), atol=1e-9)
    assert np.allclose(pose.lengths, measured, atol=2e-4)


def test_bones_of_other_lengths_grow_by_the_same_shares():
    skeleton = with_stretch(straight_chain(3, length=0.5), [1.0, 0.5, 1.0])
    pose, report = solve(skeleton, [Goal(2, (0.0, 3.0, 0.0), stretch=True)], settings=TIGHT)
    assert report.converged
    assert np.allclose(pose.lengths, blender_lengths([0.5] * 3, [1.0, 0.5, 1.0], 3.0), atol=1e-9)


def test_limits_still_hold_and_the_bent_chain_grows_until_it_reaches():
    hinge = JointLimit(lock_y=True, lock_z=True, use_limit_x=True, min_x=0.3, max_x=1.2)
    skeleton = with_stretch(straight_chain(3), [0.5, 1.0, 1.0], [None, hinge, hinge])
    for target in [(0.0, 1.0, 4.0), (0.0, 3.0, 3.0), (0.0, 4.5, 0.5)]:
        pose, report = solve(skeleton, [Goal(2, target, stretch=True)], settings=SolveSettings(max_iterations=200))
        assert report.converged, (target, report)
        local = skeleton.local_rotations(pose)
        for b in (1, 2):
            assert_within(hinge, local[b], f"bone {b} for target {target}")
        grown = pose.lengths - skeleton.lengths
        assert (grown >= 0.0).all()
        # Still in Blender's proportions: the extensions go as the factors cubed.
        assert grown[0] / grown[1] == pytest.approx(0.125, rel=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 6).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.one_of(st.none(), blender_limits()), min_size=n, max_size=n),
            st.lists(st.sampled_from([0.0, 0.1, 0.5, 1.0]), min_size=n, max_size=n),
        )
    ),
    unit_vectors(),
    st.floats(1.05, 3.0),
    st.integers(0, 2**32 - 1),
)
def test_random_limited_chains_stretch_without_breaking_a_limit_or_shrinking(shape, direction, beyond, seed):
    n, limits, factors = shape
    chain = random_chain(np.random.default_rng(seed), n)
    skeleton = with_stretch(chain, factors, limits)
    target = tuple(beyond * float(skeleton.lengths.sum()) * np.asarray(direction))
    pose, report = solve(skeleton, [Goal(n - 1, target, stretch=True)], settings=SolveSettings(max_iterations=60))
    assert np.isfinite(pose.heads).all() and np.isfinite(pose.lengths).all()
    assert (pose.lengths >= skeleton.lengths - 1e-12).all()
    assert (pose.lengths[np.asarray(factors) == 0.0] == skeleton.lengths[np.asarray(factors) == 0.0]).all()
    local = skeleton.local_rotations(pose)
    for b, limit in enumerate(skeleton.limits):
        if limit is not None:
            assert_within(limit, local[b], f"bone {b}")
    if any(factors) and all(limit is None for limit in skeleton.limits):
        assert report.converged, report


def test_bones_below_a_stretched_bone_follow_it():
    # bone0 -> bone1 (the chain), then a hand off bone1's tail at an angle, and a finger off the hand at an offset.
    skeleton = skeleton_from_points(
        [-1, 0, 1, 2],
        [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0.1, 2.5)],
        [(0, 0, 1), (0, 0, 2), (0, 0.5, 2.3), (0, 0.4, 2.9)],
    )
    skeleton = with_stretch(skeleton, [0.0, 1.0, 0.0, 0.0])
    pose, report = solve(skeleton, [Goal(1, (0.0, 3.0, 0.0), chain_length=2, stretch=True)], settings=TIGHT)
    assert report.converged
    scale = pose.lengths[1] / skeleton.lengths[1]
    assert scale == pytest.approx(2.0)
    assert np.allclose(pose.heads[2], pose.tails[1])
    # As in Blender, bones outside the chain inherit the stretched bone's scale, offsets included.
    assert pose.lengths[2] == pytest.approx(skeleton.lengths[2] * scale)
    assert pose.lengths[3] == pytest.approx(skeleton.lengths[3] * scale)
    hand_offset = np.linalg.norm(pose.heads[3] - pose.tails[2])
    assert hand_offset == pytest.approx(np.linalg.norm(skeleton.rest_heads[3] - skeleton.rest_tails[2]) * scale)
    assert stretch.scalable(skeleton, [Goal(1, (0, 3, 0), chain_length=2, stretch=True)]) == [1]


def test_chain_bones_below_a_stretched_one_keep_their_own_length():
    skeleton = with_stretch(straight_chain(3), [1.0, 0.0, 0.0])
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.0, 4.0), stretch=True)], settings=TIGHT)
    assert report.converged
    assert pose.lengths.tolist() == pytest.approx([2.0, 1.0, 1.0])
    assert stretch.scalable(skeleton, [Goal(2, (0, 0, 4), stretch=True)]) == [0, 1, 2]


def test_unconnected_bones_stretch_with_their_offsets():
    skeleton = skeleton_from_points(
        [-1, 0, 1], [(0, 0, 0), (0, 0.2, 1.1), (0, 0.2, 2.2)], [(0, 0, 1), (0, 0.2, 2.1), (0, 0.2, 3.2)]
    )
    skeleton = with_stretch(skeleton, [1.0, 1.0, 1.0])
    settings = SolveSettings(max_iterations=200, tolerance=1e-5)
    pose, report = solve(skeleton, [Goal(2, (0.0, 0.5, 5.0), stretch=True)], settings=settings)
    assert report.converged, report
    assert (pose.lengths > skeleton.lengths).all()


def test_in_a_tree_only_the_stretching_goal_grows_its_chain():
    # A trunk with two branches; the left one's target is far out, the right one's in reach.
    skeleton = skeleton_from_points(
        [-1, 0, 1, 0, 3],
        [(0, 0, 0), (0, 0, 1), (-0.5, 0, 1.5), (0, 0, 1), (0.5, 0, 1.5)],
        [(0, 0, 1), (-0.5, 0, 1.5), (-1, 0, 2), (0.5, 0, 1.5), (1, 0, 2)],
    )
    skeleton = with_stretch(skeleton, [0.0, 1.0, 1.0, 1.0, 1.0])
    goals = [
        Goal(2, (-3.0, 0.0, 4.0), chain_length=2, stretch=True),
        Goal(4, (0.8, 0.3, 1.6), chain_length=2, stretch=True),
    ]
    pose, report = solve(skeleton, goals, settings=SolveSettings(max_iterations=200, tolerance=1e-5))
    assert report.converged, report
    assert pose.lengths[1] > skeleton.lengths[1] and pose.lengths[2] > skeleton.lengths[2]
    assert pose.lengths[3] == skeleton.lengths[3] and pose.lengths[4] == skeleton.lengths[4]


def _rows(skeleton, goals) -> bool:
    """Whether the plan solves many frames together on numpy rows."""
    return many_frames.on_rows(plan_for(skeleton, goals))


def test_stretching_goals_are_not_batched():
    skeleton = with_stretch(straight_chain(3), [0.0, 0.0, 1.0])
    assert _rows(skeleton, [Goal(2, (0.0, 0.0, 5.0))])
    assert not _rows(skeleton, [Goal(2, (0.0, 0.0, 5.0), stretch=True)])
    assert _rows(with_stretch(straight_chain(3), [0.0] * 3), [Goal(2, (0.0, 0.0, 5.0), stretch=True)])
