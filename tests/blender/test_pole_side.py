# SPDX-License-Identifier: GPL-3.0-or-later
"""The pole decides the side a limb bends to, also where the hand is in the chain: samples/rig_classes.py's arm of
upper arm, forearm and hand, the effector at the hand's tail, an elbow pole behind, every joint limited (shoulder,
elbow hinge, wrist). Its targets come from random poses inside the limits; it is solved by the core on the skeleton
the add-on reads from the rig, from rest (This Frame's Pose) and frame after frame from the last frame's pose."""

from __future__ import annotations

import math
from dataclasses import replace

import bpy
import numpy as np
import pytest

from fabrik_addon.blender.rig import armature, props
from fabrik_addon.core import Goal, SolveSettings, solve
from samples.rig_classes import build_arm_hand_pole, random_targets

COUNT = 24
#: Frames between two targets along a smooth path.
STEPS = 8


@pytest.fixture(scope="module")
def arm(registered_addon):
    """The arm's skeleton, its first bone, and COUNT goals at reachable targets (with the pole)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    case = build_arm_hand_pole()
    skeleton = armature.skeleton_of(case.obj)
    (effector,) = case.effectors
    bpy.context.view_layer.update()  # (the pole's world matrix)
    to_armature = case.obj.matrix_world.inverted()
    pole = tuple(to_armature @ bpy.data.objects[effector.pole].matrix_world.translation)
    goals = [
        Goal(skeleton.index(effector.bone), tuple(location), chain_length=3, pole=pole, pole_angle=effector.pole_angle)
        for ((location, _),) in random_targets(case, np.random.default_rng(5), COUNT)
    ]
    settings = SolveSettings(tolerance=1e-4 * case.reach(), max_iterations=props.DEFAULT_ITERATIONS)
    return skeleton, skeleton.index(case.chain(effector)[-1]), goals, settings


def elbow_off_pole(pose, top: int, goal: Goal) -> float:
    """The angle (degrees) about the line from the shoulder to the target between the elbow and the pole."""
    base = pose.heads[top]
    axis = np.asarray(goal.target) - base
    axis /= np.linalg.norm(axis)
    elbow, pole = pose.tails[top] - base, np.asarray(goal.pole) - base
    elbow, pole = elbow - axis * axis.dot(elbow), pole - axis * axis.dot(pole)
    if np.linalg.norm(elbow) < 1e-6:
        return 0.0  # (the arm straight along the line: no side)
    return math.degrees(math.acos(np.clip(elbow.dot(pole) / np.linalg.norm(elbow) / np.linalg.norm(pole), -1.0, 1.0)))


def test_from_rest_the_elbow_faces_the_pole_where_the_shoulder_allows(arm):
    """With the shoulder free (the elbow hinge and the wrist limited), every target is reached with the elbow in the
    pole's plane, however the wrist bends."""
    skeleton, top, goals, settings = arm
    free_shoulder = skeleton.with_limits({b: limit for b, limit in enumerate(skeleton.limits) if b != top})
    for k, goal in enumerate(goals):
        pose, report = solve(free_shoulder, [goal], free_shoulder.rest_pose(), settings)
        assert report.converged, f"target {k}: {report}"
        assert elbow_off_pole(pose, top, goal) < 1.0, f"target {k}"


#: Where a solve from rest leaves the elbow further than this (degrees) from the pole, the shoulder's limits hold it
#: off the pole's plane: no side to keep.
HELD_OFF = 45.0


def test_frame_after_frame_the_elbow_stays_where_the_pole_puts_it(arm):
    """Along smooth paths from target to target, each frame going on from the last one's pose (Previous Solution),
    the elbow ends each path as near the pole as a solve of the same target from rest puts it (within 10 degrees),
    wherever that is near the pole: the pole, not the pose the frame starts from, decides the side, though the
    limits held the arm off its plane on the way. (Applied to a bent start, Blender's turn of the chain swings its
    up vector across the line to its end, and the elbow with it to the other side.)"""
    skeleton, top, goals, settings = arm
    warm = replace(settings, explore=False)
    pose = skeleton.rest_pose()
    compared = 0
    for k in range(1, len(goals)):
        begin, end = np.asarray(goals[k - 1].target), np.asarray(goals[k].target)
        for step in range(1, STEPS + 1):
            goal = replace(goals[k], target=tuple(begin + (end - begin) * step / STEPS))
            pose, report = solve(skeleton, [goal], pose, warm)
        from_rest, rest_report = solve(skeleton, [goals[k]], skeleton.rest_pose(), settings)
        if not (report.converged and rest_report.converged) or elbow_off_pole(from_rest, top, goals[k]) > HELD_OFF:
            continue
        compared += 1
        assert elbow_off_pole(pose, top, goals[k]) <= elbow_off_pole(from_rest, top, goals[k]) + 10.0, f"path {k}"
    assert compared >= len(goals) * 2 // 3  # (most targets let the elbow reach the pole's plane)
