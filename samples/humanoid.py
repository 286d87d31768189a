# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: Rigify's human metarig crouching and reaching, with FABRIK effectors on arms, legs and head.

The metarig comes from Blender's bundled Rigify add-on (enabled here). Its
hips (the `spine` bone) are keyed down and back, an ordinary FK animation;
FABRIK then keeps the ankles on their targets on the floor (legs: thigh and
shin, chain length 2, knees bending towards pole targets in front), moves
the wrists along a figure eight and a circle (arms: upper arm and forearm,
elbows towards poles behind), and lets the head look around (neck and head,
chain length 3). No chain reaches into the spine, so the torso moves only
as the animation says. The hand, head and elbow targets hang from the chest
bone, so they crouch with the body.

Run with Blender's Python module: `.venv/bin/python samples/humanoid.py` saves the
scene to out/samples/humanoid.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/humanoid.py` (options
after `--`).
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

import bpy  # noqa: E402
from mathutils import Matrix, Vector  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (0.55, -1.5, 0.45)
BAKE_WARM_START = True

#: The hips' crouch: least and most depth (world units down), and how far back they sit at the deepest.
CROUCH = (0.04, 0.32)
SIT_BACK = 0.1
SKIN = (0.85, 0.68, 0.55, 1.0)
#: Bones that get a mesh, with their radius; the face and fingers are too small to show.
BODY = {
    "spine": 0.11, "spine.001": 0.12, "spine.002": 0.13, "spine.003": 0.13, "spine.004": 0.05, "spine.005": 0.05,
    "spine.006": 0.09, "pelvis.L": 0.05, "pelvis.R": 0.05,
    **{f"{bone}.{side}": radius for side in "LR" for bone, radius in (
        ("shoulder", 0.045), ("upper_arm", 0.045), ("forearm", 0.04), ("hand", 0.035),
        ("thigh", 0.07), ("shin", 0.055), ("foot", 0.04), ("toe", 0.03),
    )},
}


def metarig():
    """Rigify's human metarig, added to the scene (Rigify is enabled first)."""
    import addon_utils

    addon_utils.enable("rigify", default_set=True)
    before = set(bpy.data.objects)
    bpy.ops.object.armature_human_metarig_add()
    rig = next(obj for obj in bpy.data.objects if obj not in before and obj.type == 'ARMATURE')
    if bpy.context.object is not None and bpy.context.object.mode != 'OBJECT':
        bpy.ops.object.mode_set(mode='OBJECT')
    return rig


def hang_from_bone(obj, rig, bone: str) -> None:
    """Parent obj to a bone without moving it: its location then reads as world space of the rig's rest pose."""
    data = rig.data.bones[bone]
    tail = rig.matrix_world @ data.matrix_local @ Matrix.Translation((0.0, data.length, 0.0))
    obj.parent, obj.parent_type, obj.parent_bone = rig, 'BONE', bone
    obj.matrix_parent_inverse = tail.inverted()


def crouch(frame: int, frames: range) -> float:
    """0 standing tall to 1 at the deepest, once down and up over the frames."""
    t = (frame - frames.start) / max(1, len(frames))
    return 0.5 - 0.5 * math.cos(2.0 * math.pi * t)


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = metarig()
    rig.name = "Human"
    rigbuild.add_bone_meshes(rig, list(BODY), radii=BODY, taper=0.8, color=SKIN, joint=1.05)
    rigbuild.add_ground()
    rigbuild.use_frames(frames)
    bones = rig.data.bones

    # FK: the hips go down and back; keys in the hips bone's own space.
    hips = rig.pose.bones["spine"]
    to_local = bones["spine"].matrix_local.to_3x3().inverted()
    for frame in frames:
        depth = CROUCH[0] + (CROUCH[1] - CROUCH[0]) * crouch(frame, frames)
        hips.location = to_local @ Vector((0.0, SIT_BACK * crouch(frame, frames), -depth))
        hips.keyframe_insert("location", frame=frame)

    for side, sign in (("L", 1.0), ("R", -1.0)):
        # Legs: the ankles (shin tails) stay where they are at rest; the knees bend forward (-Y).
        foot = rigbuild.make_target(f"foot_target.{side}", bones[f"shin.{side}"].tail_local, size=0.06)
        knee_front = bones[f"shin.{side}"].head_local + Vector((0.0, -0.6, 0.0))
        knee = rigbuild.make_target(f"knee_pole.{side}", knee_front, size=0.04)
        leg = rigbuild.add_effector(rig, f"shin.{side}", foot, chain_length=2)
        leg.pole_target = knee
        leg.pole_angle = rigbuild.rest_pole_angle(rig, f"thigh.{side}", f"shin.{side}", knee.location)

        # Arms: the wrists (forearm tails) move in front of the body; the elbows point back (+Y).
        elbow_rest = bones[f"forearm.{side}"].head_local
        elbow = rigbuild.make_target(f"elbow_pole.{side}", elbow_rest + Vector((0.0, 0.5, -0.1)), size=0.04)
        pole_angle = rigbuild.rest_pole_angle(rig, f"upper_arm.{side}", f"forearm.{side}", elbow.location)
        shoulder = bones[f"upper_arm.{side}"].head_local
        hand = rigbuild.make_target(f"hand_target.{side}", shoulder + Vector((sign * 0.12, -0.36, -0.12)), size=0.05)
        for obj in (hand, elbow):
            hang_from_bone(obj, rig, "spine.003")
        if side == "L":
            rigbuild.key_motion(hand, 'CIRCLE', 0.1, frames, plane='XZ')
        else:
            rigbuild.key_motion(hand, 'FIGURE_EIGHT', 0.12, frames, plane='XZ', phase=0.25)
        arm = rigbuild.add_effector(rig, f"forearm.{side}", hand, chain_length=2)
        arm.pole_target, arm.pole_angle = elbow, pole_angle

    # Head: neck and head (chain length 3) look round a small circle a little below and in front of the head's tip.
    head_tip = bones["spine.006"].tail_local
    look = rigbuild.make_target("head_target", head_tip + Vector((0.0, -0.03, -0.035)), size=0.04)
    hang_from_bone(look, rig, "spine.003")
    rigbuild.key_motion(look, 'CIRCLE', 0.04, frames, plane='XY', turns=2.0)
    rigbuild.add_effector(rig, "spine.006", look, chain_length=3)
    rig.fabrik.live = True
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
