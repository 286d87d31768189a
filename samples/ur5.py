# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a UR5 industrial arm built from its Denavit-Hartenberg table, its flange following a target on a circle.

`dh_frames` runs the arm's forward kinematics from the standard DH
parameters (Universal Robots' published values for the UR5) at the zero
configuration; `dh_bones` turns the joint frames into bones, one per link
from each joint's origin to the next, merging links of zero length (Blender
refuses zero-length bones) and turning every joint axis into the bone's
twist (Y, when the axis runs along the bone) or its hinge (the bone's X axis
set on the joint axis by the roll). The IK limits then lock every other axis.

The effector sits on the wrist: the tail of `link3`, joint 4's origin, with
chain length 3 (the base's twist, shoulder and elbow), and the wrist links
follow rigidly. With the effector on the tool flange (`link6`) FABRIK stalls
short of most targets, even targets made by forward kinematics inside the
limits: the UR5's wrist turns about three axes that run along its own
offset links (twists), which FABRIK's position passes cannot find; see
`FLANGE_EFFECTOR` to try it.
"""

from __future__ import annotations

import math
import os
import sys
from typing import NamedTuple, Sequence

from mathutils import Matrix, Vector

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rigbuild  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (-0.6, -1.5, 0.8)
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
#: Put the effector on the tool flange (all six joints) instead of the wrist (the first three).
FLANGE_EFFECTOR = False
#: Joint ranges in degrees for the IK limits (a UR5 turns +-360; Blender's IK limits stop at +-180).
RANGES = ((-180, 180), (-180, 0), (-160, 160), (-180, 180), (-180, 180), (-180, 180))


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
    rigbuild.add_ground()
    rigbuild.use_frames(frames)
    # A horizontal circle in front of the arm and above its base, well inside the wrist's reach of 0.82 m.
    target = rigbuild.make_target("WristTarget", (-0.45, -0.2, 0.35), size=0.03)
    rigbuild.key_motion(target, 'CIRCLE', 0.15, frames, plane='XY')
    if FLANGE_EFFECTOR:
        rigbuild.add_effector(rig, arm[-1].name, target)
    else:
        rigbuild.add_effector(rig, "link3", target, chain_length=3)
    rig.fabrik.iterations = 500
    rig.fabrik.live = True
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
