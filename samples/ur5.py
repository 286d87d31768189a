# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a UR5 industrial arm built from its Denavit-Hartenberg table, its tool circling a work piece, pointing at it.

`dh_frames` runs the arm's forward kinematics from the standard DH
parameters (Universal Robots' published values for the UR5) at the zero
configuration; `dh_bones` turns the joint frames into bones, one per link
from each joint's origin to the next, merging links of zero length (Blender
refuses zero-length bones) and turning every joint axis into the bone's
twist (Y, when the axis runs along the bone) or its hinge (the bone's X axis
set on the joint axis by the roll). The IK limits then lock every other axis.

The effector sits on the tool flange (the tail of `link6`), its chain is
all six joints, and it has a rotation goal: the flange takes its target's
orientation as well as its place. The target circles above a work piece
with its Y axis (the flange's axis, along which the tool points) aimed at
the work piece's centre, so the tool tilts round it as a deburring or
inspection pass would. As an animator would for a machine following a
path, each solve starts from the previous frame's solution ("Start From:
Previous Solution"), so the joints move smoothly (a few degrees per frame
here); solved from the rest pose on every frame, the goal is reached too,
but the wrist may pick the other of its poses and flip half a turn between
two frames. The bake does the same as live solving. The iterations and the
tolerance are the add-on's defaults.

Run with Blender's Python module: `.venv/bin/python samples/ur5.py` saves the
scene to out/samples/ur5.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/ur5.py` (options
after `--`).
"""

from __future__ import annotations

import math
import os
import sys
from typing import NamedTuple, Sequence

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

import bpy  # noqa: E402,F401  (the bpy module makes mathutils importable)
from mathutils import Matrix, Vector  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (-0.6, -1.5, 0.8)
#: Whether the demo bakes with warm starts (each frame from the last one's solution), as live solving runs.
BAKE_WARM_START = True


class DH(NamedTuple):
    """One row of a standard Denavit-Hartenberg table: link offset d, link length a, twist alpha (radians)."""

    d: float
    a: float
    alpha: float


#: Universal Robots UR5, standard DH parameters (metres, radians).
UR5 = (
    DH(0.089159, 0.0, math.pi / 2),
    DH(0.0, -0.425, 0.0),
    DH(0.0, -0.39225, 0.0),
    DH(0.10915, 0.0, math.pi / 2),
    DH(0.09465, 0.0, -math.pi / 2),
    DH(0.0823, 0.0, 0.0),
)
#: Joint ranges in degrees for the IK limits (a UR5 turns +-360; Blender's IK limits stop at +-180).
RANGES = ((-180, 180), (-180, 0), (-160, 160), (-180, 180), (-180, 180), (-180, 180))

#: The work piece: a block on the ground in front of the arm (centre of its footprint, size, height), metres.
WORK_PIECE = (Vector((-0.45, -0.25, 0.0)), 0.22, 0.08)
#: The flange's circle above the work piece: radius and height of the flange's tip above the ground.
CIRCLE_RADIUS = 0.1
CIRCLE_HEIGHT = 0.17
#: The tool on the flange (drawn only: the effector is the flange's tip, where the tool is mounted).
TOOL_LENGTH = 0.07
#: The point (inside the work piece) the tool points at from anywhere on its circle.
AIM = WORK_PIECE[0] + Vector((0.0, 0.0, 0.04))


def dh_frames(table: Sequence[DH], angles: Sequence[float] | None = None) -> list[Matrix]:
    """Frames 0..n of a serial arm by forward kinematics: frame i = frame i-1 @ Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i).

    Standard (distal) DH convention: joint i turns about the Z axis of
    frame i-1, through its origin. `angles` are the joint angles theta
    (default: all zero, the arm's zero configuration). Pure: builds new
    matrices and changes nothing.
    """
    angles = angles if angles is not None else [0.0] * len(table)
    frame = Matrix.Identity(4)
    frames = [frame]
    for row, theta in zip(table, angles):
        frame = (
            frame
            @ Matrix.Rotation(theta, 4, 'Z')
            @ Matrix.Translation((0.0, 0.0, row.d))
            @ Matrix.Translation((row.a, 0.0, 0.0))
            @ Matrix.Rotation(row.alpha, 4, 'X')
        )
        frames.append(frame)
    return frames


class ArmBone(NamedTuple):
    """A bone made from one or more links: its ends, the joints it carries (index, axis letter) and its roll."""

    name: str
    head: Vector
    tail: Vector
    joints: tuple[tuple[int, str], ...]
    z_axis: Vector


def dh_bones(frames: Sequence[Matrix], min_length: float = 1e-4) -> list[ArmBone]:
    """Bones from joint frames: link i runs from origin i-1 to origin i and turns about frame i-1's Z axis.

    A link shorter than min_length cannot be a bone, so its joint moves on
    to the next link that has length (both joints then sit at that bone's
    head, which is where they are). Each joint axis must run along the bone
    (a twist about Y) or across it (a hinge); the first hinge sets the roll
    so the bone's X axis is the joint axis, a second must then be its Z axis.
    Raises ValueError for axes at any other angle or links left over at the end.
    """
    bones: list[ArmBone] = []
    pending: list[int] = []
    for i in range(1, len(frames)):
        pending.append(i - 1)
        head, tail = frames[i - 1].translation, frames[i].translation
        if (tail - head).length < min_length:
            continue
        along = (tail - head).normalized()
        joints, x_axis, z_axis = [], None, None
        for j in pending:
            axis = frames[j].to_3x3().col[2].normalized()
            if abs(abs(axis.dot(along)) - 1.0) < 1e-6:
                joints.append((j, "Y"))
            elif abs(axis.dot(along)) < 1e-6 and x_axis is None:
                x_axis = axis
                joints.append((j, "X"))
            elif abs(axis.dot(along)) < 1e-6 and abs(axis.dot(x_axis)) < 1e-6:
                z_axis = axis
                joints.append((j, "Z"))
            else:
                raise ValueError(f"joint {j + 1}'s axis is neither along nor across link {i}")
        if x_axis is None:
            # Only twists: any roll does; take a perpendicular for a well-defined bone frame.
            x_axis = along.orthogonal().normalized()
        roll = x_axis.cross(along)
        if z_axis is not None and roll.dot(z_axis) < 0.0:
            z_axis = -z_axis  # same axis, the sign only flips the angle
        bones.append(ArmBone(f"link{i}", head.copy(), tail.copy(), tuple(joints), roll))
        pending = []
    if pending:
        raise ValueError(f"joints {[j + 1 for j in pending]} sit at the end of the arm with no link left to carry them")
    return bones


def tool_pose(frame: int, frames: range) -> Matrix:
    """The flange's goal at a frame: on the circle above the work piece, its Y axis (the tool) aimed at AIM.

    The X axis stays as close to world X as the aim allows, so the flange's
    roll changes only as much as the tilt round the circle needs.
    """
    angle = 2.0 * math.pi * (frame - frames.start) / max(1, len(frames))
    center, _, _ = WORK_PIECE
    location = Vector((center.x + CIRCLE_RADIUS * math.cos(angle), center.y + CIRCLE_RADIUS * math.sin(angle),
                       CIRCLE_HEIGHT))
    y_axis = (AIM - location).normalized()
    x_axis = Vector((1.0, 0.0, 0.0))
    x_axis = (x_axis - y_axis * y_axis.dot(x_axis)).normalized()
    z_axis = x_axis.cross(y_axis)
    pose = Matrix((x_axis, y_axis, z_axis)).transposed().to_4x4()
    pose.translation = location
    return pose


def key_tool_path(target, frames: range) -> None:
    """Key the target's location and rotation on every frame.

    Quaternion keys with the sign kept from key to key, so Blender's
    interpolation between them turns the short way.
    """
    target.rotation_mode = 'QUATERNION'
    previous = None
    for frame in frames:
        pose = tool_pose(frame, frames)
        rotation = pose.to_quaternion()
        if previous is not None and rotation.dot(previous) < 0.0:
            rotation.negate()
        target.location = pose.translation
        target.rotation_quaternion = previous = rotation
        target.keyframe_insert("location", frame=frame)
        target.keyframe_insert("rotation_quaternion", frame=frame)


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    arm = dh_bones(dh_frames(UR5))
    spec, parent = [], None
    for bone in arm:
        spec.append((bone.name, tuple(bone.head), tuple(bone.tail), parent, parent is not None, tuple(bone.z_axis)))
        parent = bone.name
    rig = rigbuild.make_armature("UR5", spec)
    for bone in arm:
        free = {axis: RANGES[j] for j, axis in bone.joints}
        lock = "".join(axis for axis in "XYZ" if axis not in free)
        rigbuild.set_limits(rig, bone.name, lock=lock, **{axis.lower(): free[axis] for axis in free})
    rigbuild.add_bone_meshes(rig, radius=0.045, taper=0.85, color=(0.6, 0.75, 0.85, 1.0), joint=1.3,
                             radii={"link1": 0.06})
    rigbuild.add_tool(rig, arm[-1].name, TOOL_LENGTH, 0.025)
    rigbuild.add_ground()
    center, size, height = WORK_PIECE
    rigbuild.add_box("WorkPiece", center + Vector((0.0, 0.0, height / 2.0)), (size, size, height), color=rigbuild.SAND)
    rigbuild.use_frames(frames)
    target = rigbuild.make_target("ToolTarget", tool_pose(frames.start, frames).translation, size=0.03)
    target.empty_display_type = 'ARROWS'  # shows the orientation the flange takes
    key_tool_path(target, frames)
    effector = rigbuild.add_effector(rig, arm[-1].name, target)
    effector.use_rotation = True
    rig.fabrik.start = 'PREVIOUS'
    rig.fabrik.live = True
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
