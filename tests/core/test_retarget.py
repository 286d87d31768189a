# SPDX-License-Identifier: GPL-3.0-or-later
"""Retargeting's arithmetic on numpy rows (`core.motion.retarget`), without Blender: spans sampled, alignments, hinged
limbs, contacts held heel and toe, the floor and the hips lowered for a leg that cannot reach."""

from __future__ import annotations

import math

import numpy as np

from fabrik_addon.core.motion import retarget


def about_x(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def angle_of(m: np.ndarray) -> float:
    return math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(m) - 1.0) / 2.0))))


def test_a_span_of_equal_counts_is_taken_one_to_one_and_a_short_one_is_shared():
    turns = np.stack([about_x(a) for a in (0.0, 0.2, 0.5, 0.9)])[None]  # (the bone below, then three)
    same = retarget.sampled(turns, 3)
    assert np.allclose(same[0], turns[0, 1:])
    one = retarget.sampled(turns, 1)  # (one rig bone takes the span's top)
    assert np.allclose(one[0, 0], turns[0, 3])
    six = retarget.sampled(turns, 6)  # (six share it: halfway between each)
    assert np.allclose(six[0, 0], about_x(0.1)) and np.allclose(six[0, 5], about_x(0.9))


def test_an_alignment_turns_the_rigs_rest_direction_onto_the_clips():
    a_pose, t_pose = np.array([1.0, 0.0, -1.0]), np.array([1.0, 0.0, 0.0])
    turn = retarget.alignment(a_pose, t_pose)
    assert np.allclose(turn @ a_pose / np.linalg.norm(a_pose), t_pose) and np.allclose(turn @ turn.T, np.eye(3))
    assert np.allclose(retarget.alignment(t_pose, t_pose), np.eye(3))


def test_a_hinge_held_a_little_past_straight_is_held_straight_not_turned_half_round():
    for bend, twist in ((0.5, 0.0), (0.03, 0.0), (-0.03, 0.0), (-0.6, 180.0)):
        upper, lower = retarget.hinged(np.eye(3)[None], about_x(bend)[None], np.eye(3), 0, 0.0, 2.6)
        assert abs(angle_of(upper[0]) - twist) < 1e-6, (bend, angle_of(upper[0]))
        kept = np.clip(bend, 0.0, 2.6) if twist == 0.0 else -bend
        assert np.allclose(lower[0][:, 1], upper[0] @ about_x(kept)[:, 1], atol=1e-9), bend


def test_a_hinged_limb_bends_in_the_clips_plane_whatever_its_upper_bones_twist():
    """The clip's elbow bent about Z (across the hinge the rig has about X): the upper bone turns about its
    length so that the hinge stands across the clip's plane; both bones point where the clip's do."""
    c, s = math.cos(0.8), math.sin(0.8)
    upper, lower = np.eye(3)[None], np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])[None]
    new_upper, new_lower = retarget.hinged(upper, lower, np.eye(3), 0, -2.6, 2.6)
    assert np.allclose(new_upper[0][:, 1], upper[0][:, 1]) and np.allclose(new_lower[0][:, 1], lower[0][:, 1])
    assert abs(abs(new_upper[0][:, 0] @ np.array([0.0, 0.0, 1.0])) - 1.0) < 1e-9  # (the hinge across the plane)


def test_a_standing_foot_is_held_heel_and_toe_and_nothing_goes_under_the_floor():
    frames = 40
    ankle = np.zeros((frames, 3))
    ankle[:, 2] = 0.08
    ankle[:, 0] = 0.004 * np.sin(np.arange(frames))  # (a captured foot's jitter)
    ankle[30:, 2] += np.linspace(0.0, 0.3, 10)  # (lifted off at the end)
    toe = ankle + np.array([0.0, -0.15, -0.07])
    runs = retarget.stands(ankle, toe, 0.9)
    assert runs[0] and runs[0][0].first == 0 and runs[0][0].last < 31
    held, whole, _ = retarget.held(ankle, toe, runs, floor=0.0)
    run = whole[0]
    assert np.ptp(held[run.first:run.last + 1], axis=0).max() < 1e-12 and np.ptp(ankle[:20, 0]) > 0.006
    assert abs(retarget.grounding(ankle, toe, runs, 0.08)) < 1e-9
    sunk, _, _ = retarget.held(ankle - [0.0, 0.0, 0.1], toe - [0.0, 0.0, 0.1], ([], []), floor=0.0)
    assert (sunk[:, 2] >= -1e-12).all() and ((sunk + (toe - ankle))[:, 2] >= -1e-12).all()


def test_a_foot_rolling_onto_its_toes_keeps_them_where_they_stand():
    frames = 30
    turn = np.minimum(0.1 * np.arange(frames), 1.0)  # (the heel lifting about the toe, then up on the toes)
    toe_at = np.array([0.0, -0.15, 0.0])
    ankle = toe_at + np.stack([np.zeros(frames), 0.15 * np.cos(turn), 0.07 + 0.15 * np.sin(turn)], axis=1)
    ankle[:, 1] += 0.004 * np.sin(np.arange(frames))  # (the toe slides a little in the capture)
    toe = np.tile(toe_at, (frames, 1)) + np.stack([np.zeros(frames), 0.004 * np.sin(np.arange(frames)),
                                                   np.zeros(frames)], axis=1)
    runs = retarget.stands(ankle, toe, 0.9)
    assert not runs[0] and runs[1]  # (the ankle rises: only the toe stands)
    held, _, toes = retarget.held(ankle, toe, runs, floor=-1.0)
    run = toes[0]
    kept = held + (toe - ankle)
    assert np.ptp(kept[run.first:run.last + 1], axis=0).max() < 1e-12


def test_the_hips_come_down_by_the_least_that_lets_a_leg_reach_and_a_goal_is_taken_in_to_the_limb():
    reach = np.array([[0.0, 0.0, -1.0], [0.5, 0.0, -0.8], [0.0, 0.0, -0.85]])
    drop = retarget.lowered(reach, 0.9)
    assert np.allclose(drop[:2], [0.1, 0.8 - math.sqrt(0.81 - 0.25)]) and drop[2] == 0.0
    assert np.allclose(np.linalg.norm(reach + np.outer(drop, [0.0, 0.0, 1.0]), axis=1)[:2], 0.9)
    taken = retarget.within(np.zeros((3, 3)), reach, 0.9)
    assert np.allclose(np.linalg.norm(taken, axis=1), [0.9, 0.9, 0.85])


def test_a_limb_bent_a_quarter_turn_across_its_hinge_chooses_the_same_way_frame_after_frame():
    """Where the upper bone would twist a quarter turn either way, the hinge's range chooses, so neighbouring
    frames agree (no half turn between them)."""
    frames = 9
    lower = []
    for k in range(frames):  # (bent about the upper bone's Z, a hair either side of a quarter turn from its X)
        angle = 0.6
        c, s = math.cos(angle), math.sin(angle)
        tilt = about_x(0.0)
        lower.append(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ tilt)
    lean = np.linspace(-0.05, 0.05, frames)
    upper = np.stack([np.array([[math.cos(a), 0.0, math.sin(a)], [0.0, 1.0, 0.0], [-math.sin(a), 0.0, math.cos(a)]])
                      for a in lean])
    new_upper, _ = retarget.hinged(upper, np.stack(lower), np.eye(3), 0, 0.0, 2.6)
    steps = [angle_of(new_upper[k + 1] @ new_upper[k].T) for k in range(frames - 1)]
    assert max(steps) < 10.0, steps


def test_a_foot_that_never_stands_gives_no_ground_and_a_scaled_bone_carries_its_child_further():
    ankle = np.stack([np.zeros(20), np.linspace(0.0, 3.0, 20), np.full(20, 0.3)], axis=1)  # (always moving)
    runs = retarget.stands(ankle, ankle, 0.9)
    assert runs == ([], []) and retarget.grounding(ankle, ankle, runs, 0.08) is None
    parent, child = np.eye(4), np.eye(4)
    parent[:3, :3] *= 2.0  # (the parent's own pose scale, as the rig was found)
    child[:3, 3] = (0.0, 2.0, 0.0)  # (its head one unit along the parent, scaled)
    hold = retarget.Hold(np.stack([parent, child]), [-1, 0], [-1, 0])
    posed, _, _ = hold.pose({0: about_x(math.pi / 2)[None], 1: np.eye(3)[None]})
    assert np.allclose(posed[0, 1, :3, 3], [0.0, 0.0, 2.0])
