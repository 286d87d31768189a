# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a six-bone robot arm with hinge joints whose gripper follows a target on a figure eight.

Each joint turns about one axis, as in an industrial arm, set up with
Blender's own IK limits (two locked axes per bone, a range on the third):
the base turns about its own bone (twist, Y), the shoulder, elbow, wrist and
gripper pitch about X, the wrist yaws about Z. The elbow bends one way only.

The rig solves with the add-on's default settings (200 iterations), except
that each solve starts from the previous frame's solution ("Start From:
Previous Solution"), as an animator would set it for a machine: six joints
give a point goal many poses, and a solve from the rest pose on every frame
picks its own (joints jump up to 15 degrees between frames here), while
warm starts follow the target smoothly (under 6 degrees per frame). The
bake does the same (each frame from the one before).

Run with Blender's Python module: `.venv/bin/python samples/robot_arm.py` saves the
scene to out/samples/robot_arm.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/robot_arm.py` (options
after `--`).
"""

from __future__ import annotations

import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

FRAMES = range(1, 49)
#: Worst tip-to-target distance (world units) the sample should show on frames whose target is in reach.
TOLERANCE = 1e-3
#: Direction the demo's camera looks from.
VIEW = (1.0, -1.6, 0.7)

#: Whether the demo bakes with warm starts (each frame from the last one's solution), as live solving runs.
BAKE_WARM_START = True

# (name, length, locked IK axes, free axis and its range in degrees); positive X tips a bone forward (-Y).
JOINTS = (
    ("base", 0.3, "XZ", ("y", (-170, 170))),
    ("shoulder", 0.8, "YZ", ("x", (-30, 100))),
    ("elbow", 0.7, "YZ", ("x", (0, 150))),
    ("wrist_pitch", 0.2, "YZ", ("x", (-120, 120))),
    ("wrist_yaw", 0.15, "XY", ("z", (-90, 90))),
    ("gripper", 0.15, "YZ", ("x", (-90, 90))),
)


def arm_bones() -> list:
    """The arm standing straight up along +Z; every bone's X axis is world X, the axis its hinge turns about."""
    bones, z, parent = [], 0.0, None
    for name, length, _, _ in JOINTS:
        bones.append((name, (0.0, 0.0, z), (0.0, 0.0, z + length), parent, parent is not None, (0.0, -1.0, 0.0)))
        z, parent = z + length, name
    return bones


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("RobotArm", arm_bones())
    for name, _, lock, (axis, limits) in JOINTS:
        rigbuild.set_limits(rig, name, lock=lock, **{axis: limits})
    radii = {"base": 0.16, "shoulder": 0.09, "elbow": 0.075, "wrist_pitch": 0.06, "wrist_yaw": 0.05, "gripper": 0.04}
    rigbuild.add_bone_meshes(rig, radii=radii, taper=0.75, color=rigbuild.ORANGE, joint=1.15)
    rigbuild.add_ground()
    rigbuild.use_frames(frames)
    # A figure eight across the front of the arm, well inside its reach of 2.0 from the shoulder.
    target = rigbuild.make_target("GripperTarget", (0.0, -0.9, 1.1), size=0.08)
    rigbuild.key_motion(target, 'FIGURE_EIGHT', 0.45, frames, plane='XZ')
    rigbuild.add_effector(rig, "gripper", target)
    # Smooth motion over exploring: every solve starts where the last frame's left the arm.
    rig.fabrik.start = 'PREVIOUS'
    rig.fabrik.live = True
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
