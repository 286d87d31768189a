# SPDX-License-Identifier: GPL-3.0-or-later
"""A motion-capture character for the live benchmark: a BVH-like skeleton driven by procedural motion.

The skeleton has the names, rest pose and proportions of a captured clip's
(Hips, Spine, Spine1, Chest, Neck, Head; Shoulder, Arm, ForeArm, Hand and
three bones per finger on each side; UpLeg, Leg, Foot, ToeBase): 52 bones
in a T-pose, legs straight, 1.75 m tall, Z up, facing -Y. It is solved as a
retargeted clip is: the hips follow the capture (their location keyed every
frame, a walk's sway and bob), and five effectors follow its hands, feet
and head -- three-bone arm chains from the collar, two-bone legs, a head
chain through the chest that every arm hangs from -- with elbow and knee
poles that move with the hips. Every target stays within its chain's reach.
"""

from __future__ import annotations

import math

import bpy
from mathutils import Vector

from fabrik_addon.blender.effectors import pins
from samples import rigbuild

#: Seconds a walk cycle takes, and frames a second.
CYCLE, FPS = 1.0, 24.0
FINGERS = ("Thumb", "Index", "Middle", "Ring", "Pinky")


def skeleton() -> list[rigbuild.Bone]:
    """The 52 bones: (name, head, tail, parent, connected, z axis)."""
    back = (0.0, 1.0, 0.0)
    bones = [
        ("Hips", (0.0, 0.0, 0.95), (0.0, 0.0, 1.05), None, False, back),
        ("Spine", (0.0, 0.0, 1.05), (0.0, 0.0, 1.18), "Hips", True, back),
        ("Spine1", (0.0, 0.0, 1.18), (0.0, 0.0, 1.31), "Spine", True, back),
        ("Chest", (0.0, 0.0, 1.31), (0.0, 0.0, 1.44), "Spine1", True, back),
        ("Neck", (0.0, 0.0, 1.44), (0.0, 0.0, 1.55), "Chest", True, back),
        ("Head", (0.0, 0.0, 1.55), (0.0, 0.0, 1.75), "Neck", True, back),
    ]
    for side, s in (("Left", 1.0), ("Right", -1.0)):
        bones += [
            (f"{side}Shoulder", (0.03 * s, 0.0, 1.41), (0.17 * s, 0.0, 1.41), "Chest", False, back),
            (f"{side}Arm", (0.17 * s, 0.0, 1.41), (0.46 * s, 0.0, 1.41), f"{side}Shoulder", True, back),
            (f"{side}ForeArm", (0.46 * s, 0.0, 1.41), (0.71 * s, 0.0, 1.41), f"{side}Arm", True, back),
            (f"{side}Hand", (0.71 * s, 0.0, 1.41), (0.79 * s, 0.0, 1.41), f"{side}ForeArm", True, back),
        ]
        for f, finger in enumerate(FINGERS):
            y = -0.035 + 0.0175 * f
            head = Vector((0.79 * s, y, 1.41)) if f else Vector((0.74 * s, -0.04, 1.40))
            direction = Vector((s, -0.6, -0.2)).normalized() if not f else Vector((s, 0.0, 0.0))
            parent, connected = f"{side}Hand", False
            for k, length in enumerate((0.04, 0.025, 0.02)):
                tail = head + direction * length
                name = f"{side}Hand{finger}{k + 1}"
                bones.append((name, tuple(head), tuple(tail), parent, connected, back))
                head, parent, connected = tail, name, True
        bones += [
            (f"{side}UpLeg", (0.09 * s, 0.0, 0.93), (0.09 * s, 0.0, 0.51), "Hips", False, (0.0, -1.0, 0.0)),
            (f"{side}Leg", (0.09 * s, 0.0, 0.51), (0.09 * s, 0.0, 0.09), f"{side}UpLeg", True, (0.0, -1.0, 0.0)),
            (f"{side}Foot", (0.09 * s, 0.0, 0.09), (0.09 * s, -0.13, 0.02), f"{side}Leg", True, (0.0, 0.0, 1.0)),
            (f"{side}ToeBase", (0.09 * s, -0.13, 0.02), (0.09 * s, -0.19, 0.02), f"{side}Foot", True, (0.0, 0.0, 1.0)),
        ]
    return bones


def hips_offset(t: float) -> Vector:
    """The hips' move from rest at time t: a walk's sway from foot to foot and its bob, twice a cycle."""
    phase = 2.0 * math.pi * t / CYCLE
    return Vector((0.03 * math.sin(phase), 0.0, -0.05 + 0.02 * math.cos(2.0 * phase)))


def targets_at(t: float, s: float) -> dict[str, Vector]:
    """Where the captured hand, foot (ankle) and the knee and elbow poles of side s (+1 left) are at time t."""
    phase = 2.0 * math.pi * t / CYCLE + (0.0 if s > 0 else math.pi)
    hips = hips_offset(t)
    step = Vector((0.09 * s, -0.15 * math.cos(phase), 0.09 + 0.07 * max(0.0, math.sin(phase))))
    # The hand swings against the foot on its side, lower than the T-pose and within the arm's reach.
    hand = hips + Vector((0.33 * s, 0.16 * math.cos(phase), 1.02 + 0.04 * math.sin(phase)))
    return {
        "hand": hand,
        "foot": step,
        "elbow": hips + Vector((0.40 * s, 0.45, 1.25)),
        "knee": hips + Vector((0.09 * s, -0.55, 0.52)),
    }


def head_at(t: float) -> Vector:
    """Where the captured head's top is at time t: over the hips, nodding a little."""
    phase = 2.0 * math.pi * t / CYCLE
    return hips_offset(t) + Vector((0.01 * math.sin(phase), -0.03 + 0.02 * math.sin(2.0 * phase), 1.74))


def build(frames: range, name: str = "Mocap"):
    """The character in the current scene with its hips keyed every frame, its targets and poles keyed along the
    capture, and five FABRIK effectors (live off); the armature object."""
    rig = rigbuild.make_armature(name, skeleton())
    hips = rig.pose.bones["Hips"]
    to_local = rig.data.bones["Hips"].matrix_local.to_3x3().inverted()
    scene = bpy.context.scene
    keyed = {}
    for label in ("LeftHand", "RightHand", "LeftFoot", "RightFoot", "Head",
                  "LeftElbow", "RightElbow", "LeftKnee", "RightKnee"):
        keyed[label] = rigbuild.make_target(f"{name}_{label}", (0.0, 0.0, 0.0), size=0.05)
    for frame in frames:
        t = (frame - frames.start) / FPS
        hips.location = to_local @ hips_offset(t)
        hips.keyframe_insert("location", frame=frame)
        for side, s in (("Left", 1.0), ("Right", -1.0)):
            at = targets_at(t, s)
            for label, key in ((f"{side}Hand", "hand"), (f"{side}Foot", "foot"), (f"{side}Elbow", "elbow"),
                               (f"{side}Knee", "knee")):
                keyed[label].location = at[key]
                keyed[label].keyframe_insert("location", frame=frame)
        keyed["Head"].location = head_at(t)
        keyed["Head"].keyframe_insert("location", frame=frame)
    scene.frame_set(frames.start)
    for side, s in (("Left", 1.0), ("Right", -1.0)):
        rest = targets_at(0.0, s)
        arm = rigbuild.add_effector(rig, f"{side}ForeArm", keyed[f"{side}Hand"], chain_length=3)
        arm.pole_target = keyed[f"{side}Elbow"]
        arm.pole_angle = rigbuild.rest_pole_angle(rig, f"{side}Shoulder", f"{side}ForeArm", rest["elbow"])
        leg = rigbuild.add_effector(rig, f"{side}Leg", keyed[f"{side}Foot"], chain_length=2)
        leg.pole_target = keyed[f"{side}Knee"]
        leg.pole_angle = rigbuild.rest_pole_angle(rig, f"{side}UpLeg", f"{side}Leg", rest["knee"])
    rigbuild.add_effector(rig, "Head", keyed["Head"], chain_length=3)
    return rig


def pin_feet(rig, frames: range) -> None:
    """Pin each foot where its target is when it sets down, over the frames it stands (the half cycle it stays
    on the ground), as Find Contacts would plant a captured walk's feet; two frames to take hold and let go."""
    scene = bpy.context.scene
    cycle = round(CYCLE * FPS)
    for effector in rig.fabrik.effectors:
        if not effector.bone.endswith("Leg"):
            continue
        # The foot is down while sin(phase) <= 0: the cycle's second half for the left, its first for the right.
        down = cycle // 2 if effector.bone.startswith("Left") else 0
        for start in range(frames.start + down, frames.stop, cycle):
            first, last = start + 2, min(start + cycle // 2 - 3, frames.stop - 1)
            if last <= first:
                continue
            scene.frame_set(first)
            world = effector.target.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.copy()
            pins.key_span(rig, effector, pins.Span(first, last, 2, 2), world)
    scene.frame_set(frames.start)


def free_root(rig) -> None:
    """Let the hips follow the hands' and head's pull (Root: Free, half the pull, within 0.2 m and 10 degrees),
    as an animator would to let the body help its limbs."""
    rig.fabrik.root_bone = "Hips"
    rig.fabrik.root_weight = 0.5
    rig.fabrik.root_distance = 0.2
    rig.fabrik.root_angle = math.radians(10.0)
    rig.fabrik.root_mode = 'FREE'
