# SPDX-License-Identifier: GPL-3.0-or-later
"""Rig classes for measuring reach under joint limits: rigs as animators and robotics users build them.

Every builder adds one armature (with Blender's own pose-bone IK settings as
its joint limits) and any pole empties to the current scene and returns a
`RigCase`: the armature object and its effectors (tip bone, chain length,
rotation goal or not, pole). Nothing here adds IK constraints or FABRIK
effectors; the benchmark (`benchmarks/limits.py`) puts on whichever solver
it measures.

`random_targets` makes targets that are reachable by construction: forward
kinematics in Blender from random poses inside the limits. `limit_violation`
says how far a bone's local rotation lies outside its IK settings, written
from Blender's convention alone (no code shared with the add-on's limits):
the local rotation is a swing (rotation vector (sx, 0, sz)) after a twist
about the bone's Y axis; the X range bounds sx, the Z range sz (an ellipse
per quadrant when both are limited), the Y range the twist; a locked axis
allows 0 only.

Lengths are in metres, angles in degrees. Bones' Z axes are set (by roll) to
the side a hinge bends to, so positive X flexes a finger or bends an elbow.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, NamedTuple, Sequence

import bpy
import numpy as np
from mathutils import Matrix, Quaternion, Vector

from samples import rigbuild, ur5

Range = tuple[float, float]
#: A sample: per effector, (tail location, 3x3 rotation as nested tuples or None), armature space.
Sample = list[tuple[tuple[float, float, float], tuple[tuple[float, ...], ...] | None]]


@dataclass(frozen=True)
class EffectorSpec:
    """An effector: the tail of `bone` reaches for a target, moving `chain_length` bones; a rotation goal, a pole."""

    bone: str
    chain_length: int
    rotation: bool = False
    #: Name of the pole empty (an object in the scene), or None.
    pole: str | None = None
    pole_angle: float = 0.0


@dataclass
class RigCase:
    """A rig built in the scene and the effectors it is solved with."""

    name: str
    obj: bpy.types.Object
    effectors: list[EffectorSpec]

    def chain(self, effector: EffectorSpec) -> list[str]:
        """The bones an effector moves, tip first."""
        names, bone = [], self.obj.data.bones[effector.bone]
        while bone is not None and len(names) < effector.chain_length:
            names.append(bone.name)
            bone = bone.parent
        return names

    def moving_bones(self) -> list[str]:
        """Every bone some effector moves, in the armature's bone order (parents first)."""
        moving = {name for effector in self.effectors for name in self.chain(effector)}
        return [bone.name for bone in self.obj.data.bones if bone.name in moving]

    def reach(self) -> float:
        """The summed bone lengths of the longest effector chain (the rig's size, for tolerances)."""
        bones = self.obj.data.bones
        return max(sum(bones[name].length for name in self.chain(effector)) for effector in self.effectors)


# Joint limits as ranges, and how far a rotation lies outside them.

class IKLimits(NamedTuple):
    """A bone's IK settings per axis: (min, max) in radians, (0, 0) when locked, None when free."""

    x: Range | None
    y: Range | None
    z: Range | None


def ik_limits(pose_bone) -> IKLimits:
    """The IK settings of a pose bone (lock_ik_*, use_ik_limit_*, ik_min_*, ik_max_*) as ranges."""
    ranges = []
    for axis in "xyz":
        if getattr(pose_bone, f"lock_ik_{axis}"):
            ranges.append((0.0, 0.0))
        elif getattr(pose_bone, f"use_ik_limit_{axis}"):
            ranges.append((getattr(pose_bone, f"ik_min_{axis}"), getattr(pose_bone, f"ik_max_{axis}")))
        else:
            ranges.append(None)
    return IKLimits(*ranges)


def swing_twist(local) -> tuple[float, float, float | None]:
    """(sx, sz, twist) of a 3x3 local rotation = swing (rotation vector (sx, 0, sz)) @ twist about Y.

    The twist is None for a half-turn swing (the bone pointing back along
    its rest direction), where it is undefined.
    """
    matrix = Matrix([tuple(row) for row in local]).to_3x3()
    swing, twist = matrix.to_quaternion().to_swing_twist('Y')
    axis, angle = swing.to_axis_angle()
    if angle > math.pi:  # the same rotation the short way round
        axis, angle = -axis, 2.0 * math.pi - angle
    twist = math.remainder(twist, 2.0 * math.pi)
    return axis.x * angle, axis.z * angle, None if angle > math.pi - 1e-6 else twist


def _both_limited(limits: IKLimits) -> bool:
    """Whether the swing is held in an ellipse: X and Z both limited and neither locked."""
    return all(r is not None and r != (0.0, 0.0) for r in (limits.x, limits.z))


def _ellipse_radius(limits: IKLimits, sx: float, sz: float) -> float:
    """The swing's largest allowed angle in the direction of (sx, sz): the quadrant's ellipse, per Blender's ranges."""
    a = limits.x[1] if sx >= 0.0 else -limits.x[0]
    b = limits.z[1] if sz >= 0.0 else -limits.z[0]
    r = math.hypot(sx, sz)
    if r == 0.0:
        return 0.0 if min(a, b) <= 0.0 else math.inf
    if a <= 0.0 or b <= 0.0:  # a quadrant closed by a zero bound: the box checks cover it
        return math.inf
    return 1.0 / math.hypot(sx / r / a, sz / r / b)


def limit_violation(limits: IKLimits, local) -> float:
    """The worst violation in radians (0 inside) of a bone's 3x3 local rotation against its IK settings."""
    sx, sz, twist = swing_twist(local)
    worst = 0.0
    for value, bounds in ((sx, limits.x), (sz, limits.z), (twist, limits.y)):
        if bounds is not None and value is not None:
            worst = max(worst, bounds[0] - value, value - bounds[1])
    if _both_limited(limits):
        worst = max(worst, math.hypot(sx, sz) - _ellipse_radius(limits, sx, sz))
    return worst


def sample_local(limits: IKLimits, rng: np.random.Generator) -> Quaternion:
    """A random local rotation inside the limits: swing uniform in its range or ellipse, twist uniform in its range."""
    full = (-math.pi, math.pi)
    x_range, z_range, y_range = limits.x or full, limits.z or full, limits.y or full
    while True:
        sx, sz = rng.uniform(*x_range), rng.uniform(*z_range)
        angle = math.hypot(sx, sz)
        # A swing turns at most half way round; with both axes limited, the ellipse bounds it too.
        if angle <= math.pi and not (_both_limited(limits) and angle > _ellipse_radius(limits, sx, sz)):
            break
    swing = Quaternion((sx / angle, 0.0, sz / angle), angle) if angle > 0.0 else Quaternion()
    return swing @ Quaternion((0.0, 1.0, 0.0), rng.uniform(*y_range))


# Random reachable targets.

def sample_pose(case: RigCase, rng: np.random.Generator) -> dict[str, Quaternion]:
    """A random local rotation inside its limits for every bone an effector moves."""
    pose_bones = case.obj.pose.bones
    return {name: sample_local(ik_limits(pose_bones[name]), rng) for name in case.moving_bones()}


def pose_and_read(case: RigCase, pose: dict[str, Quaternion]) -> Sample:
    """Set the rotation channels, evaluate, read each effector's tail (and tip rotation for rotation goals)."""
    pose_bones = case.obj.pose.bones
    for name, rotation in pose.items():
        pose_bones[name].rotation_mode = 'QUATERNION'
        pose_bones[name].rotation_quaternion = rotation
    bpy.context.view_layer.update()
    evaluated = case.obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones
    row = []
    for effector in case.effectors:
        bone = evaluated[effector.bone]
        rotation = tuple(map(tuple, bone.matrix.to_3x3().normalized())) if effector.rotation else None
        row.append((tuple(bone.tail), rotation))
    return row


def random_targets(case: RigCase, rng: np.random.Generator, count: int) -> list[Sample]:
    """`count` reachable targets per effector (armature space), from random poses inside the limits; rest pose after."""
    samples = [pose_and_read(case, sample_pose(case, rng)) for _ in range(count)]
    pose_and_read(case, {name: Quaternion() for name in case.moving_bones()})
    return samples


# Building blocks.

def planar_chain(
    names: Sequence[str], base, direction, flex, lengths: Sequence[float], bends: Sequence[float] = (),
    parent: str | None = None, z_faces_flex: bool = True,
) -> list[rigbuild.Bone]:
    """Bones in one plane from `base` along `direction`, each bent by bends[i] degrees (at rest) towards `flex`.

    The first bone is not connected to `parent` (hands and limbs start off
    their parent's tail); the others are. Each bone's Z axis faces the side it
    bends to (or away from it, z_faces_flex=False), so its X axis is the hinge.
    """
    d0 = Vector(direction).normalized()
    f0 = Vector(flex) - d0 * d0.dot(Vector(flex))
    f0.normalize()
    head, angle, bones, previous = Vector(base), 0.0, [], parent
    for i, (name, length) in enumerate(zip(names, lengths)):
        angle += math.radians(bends[i] if i < len(bends) else 0.0)
        along = d0 * math.cos(angle) + f0 * math.sin(angle)
        towards = -d0 * math.sin(angle) + f0 * math.cos(angle)
        tail = head + along * length
        z_axis = towards if z_faces_flex else -towards
        bones.append((name, tuple(head), tuple(tail), previous, i > 0, tuple(z_axis)))
        head, previous = tail, name
    return bones


def _armature(name: str, bones: Sequence[rigbuild.Bone]):
    """A new armature in the scene, every pose bone in quaternion rotation mode."""
    obj = rigbuild.make_armature(name, bones)
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_mode = 'QUATERNION'
    return obj


def _pole(rig, name: str, location, top: str, tip: str) -> tuple[str, float]:
    """A pole empty at `location` (its name: `name`, or Blender's next free one) and the pole angle that keeps the
    chain top..tip bent as at rest."""
    pole = rigbuild.make_target(name, location, size=0.05)
    return pole.name, rigbuild.rest_pole_angle(rig, top, tip, location)


# Fingers and hands: palm down (-Z), fingers along +Y, a right hand (thumb on -X).

#: Knuckle (2-DOF), middle and distal hinges of a finger: IK settings as rigbuild.set_limits takes them.
FINGER_LIMITS = (
    {"lock": "Y", "x": (-10, 90), "z": (-20, 20)},
    {"lock": "YZ", "x": (0, 100)},
    {"lock": "YZ", "x": (0, 80)},
)
#: The thumb: a wide 2-DOF base (carpometacarpal), then two hinges.
THUMB_LIMITS = (
    {"lock": "Y", "x": (-20, 60), "z": (-45, 45)},
    {"lock": "YZ", "x": (0, 60)},
    {"lock": "YZ", "x": (-10, 80)},
)
#: The palm (the wrist's three axes), shared by every finger's chain.
PALM_LIMITS = {"x": (-60, 60), "y": (-40, 40), "z": (-30, 30)}
PALM_LENGTH = 0.08
#: name, knuckle position, (proximal, middle, distal) lengths, fan angle about Z (degrees, towards the little finger).
FINGERS = (
    ("index", (-0.024, 0.086, 0.0), (0.040, 0.024, 0.018), -4.0),
    ("middle", (-0.004, 0.090, 0.0), (0.044, 0.028, 0.019), 0.0),
    ("ring", (0.015, 0.086, 0.0), (0.041, 0.027, 0.019), 4.0),
    ("pinky", (0.032, 0.078, 0.0), (0.032, 0.019, 0.017), 9.0),
)
#: The thumb from its base by the wrist, pointing forward, out and down, flexing across the palm.
THUMB = ("thumb", (-0.022, 0.015, -0.012), (0.046, 0.032, 0.025), (-0.55, 0.8, -0.25), (0.6, 0.25, -0.75))
#: Rest bends of the curled hand per joint (degrees): fingers, thumb.
CURL = (15.0, 20.0, 12.0)
THUMB_CURL = (10.0, 15.0, 12.0)


def _finger(name: str, base, direction, flex, lengths, bends, parent: str | None) -> list[rigbuild.Bone]:
    """A three-bone finger (name1, name2, name3) from its knuckle."""
    return planar_chain([f"{name}{i}" for i in (1, 2, 3)], base, direction, flex, lengths, bends, parent)


def _set_finger_limits(rig, name: str, limits: Sequence[dict]) -> None:
    """The IK settings of a finger's three bones."""
    for i, settings in enumerate(limits, 1):
        rigbuild.set_limits(rig, f"{name}{i}", **settings)


def build_finger() -> RigCase:
    """One index finger from the knuckle: a 2-DOF knuckle and two hinges, effector on the fingertip."""
    _, _, lengths, _ = FINGERS[0]
    rig = _armature("finger", _finger("index", (0, 0, 0), (0, 1, 0), (0, 0, -1), lengths, (), None))
    _set_finger_limits(rig, "index", FINGER_LIMITS)
    return RigCase("finger", rig, [EffectorSpec("index3", 3)])


def _hand(name: str, curl: Sequence[float], thumb_curl: Sequence[float]) -> RigCase:
    """A palm and five fingers whose chains all run through the palm; fingers bent at rest by `curl`."""
    bones = [("palm", (0, 0, 0), (0, PALM_LENGTH, 0), None, False, (0, 0, -1))]
    for finger, knuckle, lengths, fan in FINGERS:
        direction = (math.sin(math.radians(fan)), math.cos(math.radians(fan)), 0.0)
        bones += _finger(finger, knuckle, direction, (0, 0, -1), lengths, curl, "palm")
    thumb, base, lengths, direction, flex = THUMB
    bones += _finger(thumb, base, direction, flex, lengths, thumb_curl, "palm")
    rig = _armature(name, bones)
    rigbuild.set_limits(rig, "palm", **PALM_LIMITS)
    for finger, *_ in FINGERS:
        _set_finger_limits(rig, finger, FINGER_LIMITS)
    _set_finger_limits(rig, thumb, THUMB_LIMITS)
    names = [thumb] + [finger for finger, *_ in FINGERS]
    return RigCase(name, rig, [EffectorSpec(f"{finger}3", 4) for finger in names])


def build_hand() -> RigCase:
    """A straight hand: palm plus thumb and four fingers, effectors on the five fingertips, chains through the palm."""
    return _hand("hand", (), ())


def build_hand_curled() -> RigCase:
    """The same hand relaxed: every finger joint bent 10-20 degrees at rest."""
    return _hand("hand_curled", CURL, THUMB_CURL)


def build_hand_free() -> RigCase:
    """The straight hand as many rigs have it: no IK limits at all (the fingers still hang off the palm)."""
    case = _hand("hand_free", (), ())
    for pose_bone in case.obj.pose.bones:
        for axis in "xyz":
            setattr(pose_bone, f"lock_ik_{axis}", False)
            setattr(pose_bone, f"use_ik_limit_{axis}", False)
    return case


# Robot arms.

#: A six-axis industrial arm standing up along +Z: (bone, length, free axis, range in degrees).
#: The wrist roll bone continues the forearm (it turns about the forearm's axis); the flange carries the tool.
ARM6 = (
    ("base", 0.40, "y", (-170, 170)),
    ("upper_arm", 0.56, "x", (-90, 90)),
    ("forearm", 0.15, "x", (-135, 135)),
    ("wrist_roll", 0.30, "y", (-180, 180)),
    ("wrist_pitch", 0.08, "x", (-120, 120)),
    ("flange", 0.10, "y", (-180, 180)),
)


def build_arm6() -> RigCase:
    """A six-axis industrial arm (twist, pitch, pitch, roll, pitch, roll), effector on the tool tip."""
    bones, z, parent = [], 0.0, None
    for name, length, _, _ in ARM6:
        # Z axis towards -Y: every pitch hinge turns about world X.
        bones.append((name, (0.0, 0.0, z), (0.0, 0.0, z + length), parent, parent is not None, (0.0, -1.0, 0.0)))
        z, parent = z + length, name
    rig = _armature("arm6", bones)
    for name, _, axis, limits in ARM6:
        rigbuild.set_limits(rig, name, lock="XYZ".replace(axis.upper(), ""), **{axis: limits})
    return RigCase("arm6", rig, [EffectorSpec(ARM6[-1][0], len(ARM6))])


def _ur5(name: str, rotation: bool) -> RigCase:
    """The UR5 from its DH table (samples/ur5.py), effector on the flange moving every joint."""
    arm = ur5.dh_bones(ur5.dh_frames(ur5.UR5))
    bones, parent = [], None
    for bone in arm:
        bones.append((bone.name, tuple(bone.head), tuple(bone.tail), parent, parent is not None, tuple(bone.z_axis)))
        parent = bone.name
    rig = _armature(name, bones)
    for bone in arm:
        free = {axis: ur5.RANGES[j] for j, axis in bone.joints}
        lock = "".join(axis for axis in "XYZ" if axis not in free)
        rigbuild.set_limits(rig, bone.name, lock=lock, **{axis.lower(): limits for axis, limits in free.items()})
    return RigCase(name, rig, [EffectorSpec(arm[-1].name, len(arm), rotation=rotation)])


def build_ur5() -> RigCase:
    """UR5, position goal on the flange."""
    return _ur5("ur5", rotation=False)


def build_ur5_rot() -> RigCase:
    """UR5, position and rotation goal on the flange."""
    return _ur5("ur5_rot", rotation=True)


# A tentacle.

TENTACLE_BONES = 30
TENTACLE_LENGTH = 1.5
#: Swing cone per joint about X and Z (degrees); the twist is free, as in samples/tentacle.py.
TENTACLE_CONE = 15.0


def build_tentacle() -> RigCase:
    """30 connected bones up +Z, each in a +-15 degree swing cone, effector on the tip."""
    bones = rigbuild.chain_bones(TENTACLE_BONES, TENTACLE_LENGTH / TENTACLE_BONES, prefix="seg")
    rig = _armature("tentacle", bones)
    for pose_bone in rig.pose.bones:
        rigbuild.set_limits(rig, pose_bone.name, x=(-TENTACLE_CONE, TENTACLE_CONE), z=(-TENTACLE_CONE, TENTACLE_CONE))
    return RigCase("tentacle", rig, [EffectorSpec(f"seg{TENTACLE_BONES - 1}", TENTACLE_BONES)])


# Limbs with poles: a left arm in T-pose (front is -Y) and a left leg, each hanging from a torso bone.

#: Shoulder (X: forward/back in the horizontal plane, Z: up/down, Y: twist) and elbow (flexion only).
SHOULDER_LIMITS = {"x": (-45, 130), "y": (-90, 90), "z": (-90, 90)}
ELBOW_LIMITS = {"lock": "YZ", "x": (0, 150)}
#: Wrist: flexion and deviation, a little twist.
WRIST_LIMITS = {"x": (-70, 80), "y": (-20, 20), "z": (-30, 30)}
#: Hip (X: flexion forward, Z: abduction outward, Y: twist) and knee; the leg's Z axes face forward as in Rigify,
#: so the knee, bending back, turns by negative X.
HIP_LIMITS = {"x": (-30, 120), "y": (-45, 45), "z": (-30, 45)}
KNEE_LIMITS = {"lock": "YZ", "x": (-150, 0)}
#: Rest bend of the pre-bent variants (degrees).
LIMB_BEND = 15.0


def _arm(name: str, bend: float, hand: bool = False) -> RigCase:
    """Chest, upper arm and forearm (elbow bent by `bend` at rest), and with `hand` the hand in the chain too (the
    effector at its tail); pole behind the elbow."""
    shoulder = Vector((0.18, 0.0, 1.45))
    names, lengths = ["upper_arm", "forearm", "hand"][: 3 if hand else 2], (0.28, 0.26, 0.09)
    bones = [("chest", (0.0, 0.0, 1.2), (0.0, 0.0, 1.45), None, False, (0.0, -1.0, 0.0))]
    bones += planar_chain(names, shoulder, (1, 0, 0), (0, -1, 0), lengths[: len(names)], (0.0, bend, 0.0), "chest")
    rig = _armature(name, bones)
    rigbuild.set_limits(rig, "upper_arm", **SHOULDER_LIMITS)
    rigbuild.set_limits(rig, "forearm", **ELBOW_LIMITS)
    if hand:
        rigbuild.set_limits(rig, "hand", **WRIST_LIMITS)
    elbow = rig.data.bones["forearm"].head_local
    pole, angle = _pole(rig, f"{name}_pole", elbow + Vector((0.0, 0.45, 0.0)), "upper_arm", names[-1])
    return RigCase(name, rig, [EffectorSpec(names[-1], len(names), pole=pole, pole_angle=angle)])


def build_arm_hand_pole() -> RigCase:
    """The bent arm with its hand in the chain: the effector at the hand's tail, the elbow pole behind."""
    return _arm("arm_hand_pole", LIMB_BEND, hand=True)


def _leg(name: str, bend: float) -> RigCase:
    """Pelvis, thigh and shin (knee bent by `bend` at rest); pole in front of the knee."""
    hip = Vector((0.1, 0.0, 0.95))
    bones = [("pelvis", (0.0, 0.0, 0.95), (0.0, 0.0, 1.1), None, False, (0.0, -1.0, 0.0))]
    bones += planar_chain(
        ["thigh", "shin"], hip, (0, 0, -1), (0, 1, 0), (0.43, 0.42), (0.0, bend), "pelvis", z_faces_flex=False
    )
    rig = _armature(name, bones)
    rigbuild.set_limits(rig, "thigh", **HIP_LIMITS)
    rigbuild.set_limits(rig, "shin", **KNEE_LIMITS)
    knee = rig.data.bones["shin"].head_local
    pole, angle = _pole(rig, f"{name}_pole", knee + Vector((0.0, -0.5, 0.0)), "thigh", "shin")
    return RigCase(name, rig, [EffectorSpec("shin", 2, pole=pole, pole_angle=angle)])


def build_arm_pole_straight() -> RigCase:
    """A straight arm (T-pose) with an elbow pole behind."""
    return _arm("arm_pole_straight", 0.0)


def build_arm_pole_bent() -> RigCase:
    """The arm with the elbow bent 15 degrees at rest."""
    return _arm("arm_pole_bent", LIMB_BEND)


def build_leg_pole_straight() -> RigCase:
    """A straight leg with a knee pole in front."""
    return _leg("leg_pole_straight", 0.0)


def build_leg_pole_bent() -> RigCase:
    """The leg with the knee bent 15 degrees at rest."""
    return _leg("leg_pole_bent", LIMB_BEND)


#: Rig class name -> builder (adds the rig to the current scene).
RIG_CLASSES: OrderedDict[str, Callable[[], RigCase]] = OrderedDict((
    ("finger", build_finger),
    ("hand", build_hand),
    ("hand_curled", build_hand_curled),
    ("hand_free", build_hand_free),
    ("arm6", build_arm6),
    ("ur5", build_ur5),
    ("ur5_rot", build_ur5_rot),
    ("tentacle", build_tentacle),
    ("arm_pole_straight", build_arm_pole_straight),
    ("arm_pole_bent", build_arm_pole_bent),
    ("arm_hand_pole", build_arm_hand_pole),
    ("leg_pole_straight", build_leg_pole_straight),
    ("leg_pole_bent", build_leg_pole_bent),
))
