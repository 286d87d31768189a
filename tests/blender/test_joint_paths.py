# SPDX-License-Identifier: GPL-3.0-or-later
"""The nearest pose that reaches: along smooth target paths through each rig class's limits, no joint jumps.

The paths are built from joint angles (a smooth closed sweep between two
random poses inside the limits, every frame's targets by forward kinematics),
so a path of poses exists that reaches every target without a jump. Solved
frame after frame from the last frame's pose (Start From: Previous Solution),
beginning on the path, and from an animator's pose near the path (This Frame's
Pose), no joint may turn more than 30 degrees between neighbouring frames.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion

from fabrik_addon.blender.rig import armature
from fabrik_addon.core import Goal, SolveSettings, solve
from fabrik_addon.core.solving.loop import JUMP
from samples.rig_classes import RIG_CLASSES, ik_limits, sample_local, swing_twist

FRAMES = 121
#: How far the animator's pose lies from the path, on every coordinate its limits leave free (radians).
ASIDE = math.radians(12.0)


def _coordinates(limits, rng) -> np.ndarray:
    """A random pose of one bone inside its limits, as (swing X, swing Z, twist)."""
    sx, sz, twist = swing_twist(np.array(sample_local(limits, rng).to_matrix()))
    return np.array([sx, sz, twist or 0.0])


def _local(coordinates) -> np.ndarray:
    """The local rotation of (swing X, swing Z, twist)."""
    sx, sz, twist = coordinates
    angle = math.hypot(sx, sz)
    swing = Quaternion((sx / angle, 0.0, sz / angle), angle) if angle > 0.0 else Quaternion()
    return np.array((swing @ Quaternion((0.0, 1.0, 0.0), twist)).to_matrix())


def _clamped(coordinates, limits) -> np.ndarray:
    """Coordinates held inside the limits' ranges (axis by axis)."""
    out = np.array(coordinates, dtype=float)
    for i, bounds in enumerate((limits.x, limits.z, limits.y)):
        if bounds is not None:
            out[i] = min(max(out[i], bounds[0]), bounds[1])
    return out


def _largest_turns(rig_name: str, mode: str, seed: int = 0) -> tuple[list[float], int]:
    """Per frame after the first, the largest turn (radians) of any moving joint since the frame before, and how
    many frames reached, along one smooth closed path of `rig_name` solved in `mode` ("previous": from the last
    frame's solution, starting on the path; "near": each frame from a pose near the path's)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    case = RIG_CLASSES[rig_name]()
    skeleton = armature.skeleton_of(case.obj)
    moving = case.moving_bones()
    index = [skeleton.index(name) for name in moving]
    limits = {name: ik_limits(case.obj.pose.bones[name]) for name in moving}
    tips = [skeleton.index(e.bone) for e in case.effectors]
    rng = np.random.default_rng(seed)
    a = {name: _coordinates(limits[name], rng) for name in moving}
    b = {name: _coordinates(limits[name], rng) for name in moving}
    settings = SolveSettings(tolerance=0.5e-3 * case.reach(), explore=(mode == "near"))

    def pose_at(t: float, aside: float = 0.0):
        local = np.broadcast_to(np.eye(3), (len(skeleton), 3, 3)).copy()
        for name, bone in zip(moving, index):
            local[bone] = _local(_clamped(a[name] + (b[name] - a[name]) * t + aside, limits[name]))
        return skeleton.pose_from_local(local)

    pose, before, turns, reached = None, None, [], 0
    for f in range(FRAMES):
        t = (1.0 - math.cos(2.0 * math.pi * f / (FRAMES - 1))) / 2.0
        on_path = pose_at(t)
        goals = [
            Goal(
                bone=tip, target=tuple(on_path.tails[tip]), chain_length=e.chain_length,
                rotation=tuple(Matrix(on_path.frames[tip]).to_quaternion().normalized()) if e.rotation else None,
            )
            for tip, e in zip(tips, case.effectors)
        ]
        start = pose_at(t, ASIDE) if mode == "near" else (on_path if pose is None else pose)
        pose, report = solve(skeleton, goals, start, settings)
        reached += report.converged
        local = skeleton.local_rotations(pose)[index]
        if before is not None:
            turn = np.einsum("nji,njk->nik", before, local)
            turns.append(max(math.acos(np.clip((np.trace(m) - 1.0) / 2.0, -1.0, 1.0)) for m in turn))
        before = local
    return turns, reached


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rig", ["finger", "hand", "arm6", "ur5", "ur5_rot", "tentacle"])
def test_from_the_last_frame_no_joint_jumps_along_a_smooth_path(rig, seed):
    """Solved from the last frame's pose, every frame reaches and no joint turns more than 30 degrees from one
    frame to the next: settling towards rest moves the joints the goals leave free a little a frame
    (`settle.DRIFT`), and no attempt leaves the pose nearest where the frame started for another."""
    turns, reached = _largest_turns(rig, "previous", seed)
    assert reached == FRAMES
    assert max(turns) < JUMP, f"{sum(t >= JUMP for t in turns)} jumps, largest {math.degrees(max(turns)):.0f} degrees"


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("rig", ["finger", "hand", "arm6", "ur5"])
def test_from_an_animators_pose_near_the_path_no_joint_jumps(rig, seed):
    """Solved from an animator's pose 12 degrees off the path on every joint, every frame reaches and no joint
    jumps: the start's own attempts (the refinement of the pose as it is, FABRIK's passes) find the pose near it."""
    turns, reached = _largest_turns(rig, "near", seed)
    assert reached == FRAMES
    assert max(turns) < JUMP, f"{sum(t >= JUMP for t in turns)} jumps, largest {math.degrees(max(turns)):.0f} degrees"
