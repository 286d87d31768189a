# SPDX-License-Identifier: GPL-3.0-or-later
"""A walk written as a BVH file (Y up, CMU's bone names), and a rig of other proportions to retarget it onto: for
the retarget tests in bpy (tests/blender/test_retarget.py) and in Blender 3.4 (tests/package/test_legacy_blender.py)."""

from __future__ import annotations

import math

import bpy

# isort: split
import addon_utils  # (importable only once bpy is)

from samples import rigbuild

#: The clip: thigh and shin lengths, hip height, the walk's step and its frames (24 a cycle: 12 standing).
THIGH, SHIN, HIP_HEIGHT, STEP, FRAMES = 0.45, 0.45, 0.82, 0.5, 72


def foot_at(frame: int, side: int) -> tuple[float, float]:
    """Where a foot's ankle is (forward, up) in the clip (BVH: Y up, +Z forward): standing for 12 frames, then
    swinging a step forward over 12, the other foot half a cycle later."""
    cycle, phase = divmod(frame + (12 if side < 0 else 0), 24)
    forward = STEP * cycle
    if phase < 12:  # (with the jitter of a captured foot: a few millimetres)
        return forward + 0.005 * math.sin(2.3 * frame), 0.08 + 0.002 * abs(math.sin(1.7 * frame))
    swing = (phase - 11) / 12.0
    return forward + STEP * swing, 0.08 + 0.12 * math.sin(math.pi * swing)


def hips_forward(frame: int) -> float:
    return STEP / 24.0 * frame + 0.25


def leg_angles(hip: tuple[float, float], ankle: tuple[float, float]) -> tuple[float, float]:
    """BVH X rotations (degrees) of thigh and shin that put the ankle there (law of cosines, knee forward)."""
    dz, dy = ankle[0] - hip[0], ankle[1] - hip[1]
    reach = min(math.hypot(dz, dy), THIGH + SHIN - 1e-6)
    phi = math.atan2(dz, -dy)  # the hip-ankle line's angle forward of straight down
    alpha = math.acos((THIGH ** 2 + reach ** 2 - SHIN ** 2) / (2 * THIGH * reach))
    gamma = math.acos((THIGH ** 2 + SHIN ** 2 - reach ** 2) / (2 * THIGH * SHIN))
    return math.degrees(-(phi + alpha)), math.degrees(math.pi - gamma)


JOINTS = [  # (name, parent, offset) in BVH axes (Y up, +Z forward, +X the character's left)
    ("Hips", None, (0.0, 0.0, 0.0)),
    ("LeftUpLeg", "Hips", (0.1, 0.0, 0.0)), ("LeftLeg", "LeftUpLeg", (0.0, -THIGH, 0.0)),
    ("LeftFoot", "LeftLeg", (0.0, -SHIN, 0.0)),
    ("RightUpLeg", "Hips", (-0.1, 0.0, 0.0)), ("RightLeg", "RightUpLeg", (0.0, -THIGH, 0.0)),
    ("RightFoot", "RightLeg", (0.0, -SHIN, 0.0)),
    ("Spine", "Hips", (0.0, 0.1, 0.0)), ("Neck", "Spine", (0.0, 0.4, 0.0)), ("Head", "Neck", (0.0, 0.1, 0.0)),
    ("LeftShoulder", "Spine", (0.04, 0.35, 0.0)), ("LeftArm", "LeftShoulder", (0.12, 0.0, 0.0)),
    ("LeftForeArm", "LeftArm", (0.0, -0.28, 0.0)), ("LeftHand", "LeftForeArm", (0.0, -0.25, 0.0)),
    ("RightShoulder", "Spine", (-0.04, 0.35, 0.0)), ("RightArm", "RightShoulder", (-0.12, 0.0, 0.0)),
    ("RightForeArm", "RightArm", (0.0, -0.28, 0.0)), ("RightHand", "RightForeArm", (0.0, -0.25, 0.0)),
]
END_SITES = {"LeftFoot": (0.0, -0.04, 0.12), "RightFoot": (0.0, -0.04, 0.12), "Head": (0.0, 0.18, 0.0),
             "LeftHand": (0.0, -0.08, 0.0), "RightHand": (0.0, -0.08, 0.0)}


def bvh_hierarchy(joints: list[tuple[str, str | None]], offsets: dict, ends: dict) -> tuple[list[str], list[str]]:
    """A BVH file's HIERARCHY lines for joints (name, parent; the root first) with their offsets and end sites
    (BVH axes; every joint's channels Zrotation Xrotation Yrotation, the root's positions first), and the joints
    in the order a MOTION row gives their channels."""
    lines, order = ["HIERARCHY"], []

    def joint(name: str, parent: str | None, depth: int) -> None:
        pad = "  " * depth
        offset = offsets[name]
        order.append(name)
        lines.append(f"{pad}{'ROOT' if parent is None else 'JOINT'} {name}")
        lines.append(f"{pad}{{")
        lines.append(f"{pad}  OFFSET {offset[0]:.6f} {offset[1]:.6f} {offset[2]:.6f}")
        channels = "6 Xposition Yposition Zposition" if parent is None else "3"
        lines.append(f"{pad}  CHANNELS {channels} Zrotation Xrotation Yrotation")
        children = [n for n, p in joints if p == name]
        for child in children:
            joint(child, name, depth + 1)
        if not children:
            end = ends[name]
            lines.extend([f"{pad}  End Site", f"{pad}  {{", f"{pad}    OFFSET {end[0]:.6f} {end[1]:.6f} {end[2]:.6f}",
                          f"{pad}  }}"])
        lines.append(f"{pad}}}")

    joint(joints[0][0], None, 0)
    return lines, order


def write_walk(path) -> None:
    """The clip as a BVH file: hips moving forward at a steady height, legs stepping, arms swinging a little."""
    lines, order = bvh_hierarchy([(n, p) for n, p, _ in JOINTS], {n: o for n, _, o in JOINTS}, END_SITES)
    lines += ["MOTION", f"Frames: {FRAMES}", "Frame Time: 0.0416667"]
    for frame in range(FRAMES):
        hip = (hips_forward(frame), HIP_HEIGHT)
        values = {"Hips": [0.0, HIP_HEIGHT, hip[0], 0.0, 0.0, 0.0]}
        for side, prefix in ((1, "Left"), (-1, "Right")):
            thigh, shin = leg_angles(hip, foot_at(frame, side))
            values[f"{prefix}UpLeg"] = [0.0, thigh, 0.0]
            values[f"{prefix}Leg"] = [0.0, shin, 0.0]
            values[f"{prefix}Foot"] = [0.0, -(thigh + shin), 0.0]
            swing = 20.0 * math.sin(2 * math.pi * frame / 24 + (0 if side > 0 else math.pi))
            values[f"{prefix}Arm"] = [0.0, swing, 0.0]
            values[f"{prefix}ForeArm"] = [0.0, -25.0, 0.0]
        row = []
        for name in order:
            row += values.get(name, [0.0, 0.0, 0.0])
        lines.append(" ".join(f"{v:.6f}" for v in row))
    path.write_text("\n".join(lines) + "\n")


def import_walk(folder):
    """The clip imported with Blender's own BVH importer (its add-on enabled), from a file in `folder`."""
    addon_utils.enable("io_anim_bvh", default_set=True)
    path = folder / "walk.bvh"
    write_walk(path)
    result = bpy.ops.import_anim.bvh(filepath=str(path), update_scene_fps=False, update_scene_duration=True)
    if result != {'FINISHED'}:
        raise RuntimeError(f"the BVH importer returned {result}")
    return bpy.context.object


def stocky_rig():
    """A rig of other proportions (shorter legs, longer arms, its own bone names): knees and elbows bent a little
    at rest and limited to hinges."""
    bones = [
        ("pelvis", (0.0, 0.0, 0.62), (0.0, 0.0, 0.75), None, False),
        ("spine_01", (0.0, 0.0, 0.75), (0.0, 0.0, 1.05), "pelvis", True),
        ("neck_01", (0.0, 0.0, 1.05), (0.0, 0.0, 1.15), "spine_01", True),
        ("head", (0.0, 0.0, 1.15), (0.0, 0.0, 1.35), "neck_01", True),
    ]
    for side, s in (("l", 1.0), ("r", -1.0)):
        bones += [
            (f"thigh_{side}", (0.12 * s, 0.0, 0.62), (0.12 * s, -0.02, 0.33), "pelvis", False, (0.0, -1.0, 0.0)),
            (f"calf_{side}", (0.12 * s, -0.02, 0.33), (0.12 * s, 0.0, 0.05), f"thigh_{side}", True, (0.0, -1.0, 0.0)),
            (f"foot_{side}", (0.12 * s, 0.0, 0.05), (0.12 * s, -0.1, 0.0), f"calf_{side}", True),
            (f"clavicle_{side}", (0.03 * s, 0.0, 1.0), (0.14 * s, 0.0, 1.0), "spine_01", False),
            (f"upperarm_{side}", (0.14 * s, 0.0, 1.0), (0.16 * s, 0.0, 0.68), f"clavicle_{side}", True, (0.0, 1.0, 0.0)),
            (f"lowerarm_{side}", (0.16 * s, 0.0, 0.68), (0.16 * s, -0.02, 0.36), f"upperarm_{side}", True, (0.0, 1.0, 0.0)),
            (f"hand_{side}", (0.16 * s, -0.02, 0.36), (0.16 * s, -0.02, 0.28), f"lowerarm_{side}", True),
        ]
    rig = rigbuild.make_armature("Stocky", bones, location=(2.0, 0.0, 0.0))
    for name in HINGES:
        pb = rig.pose.bones[name]
        pb.lock_ik_y = pb.lock_ik_z = True
        pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, *HINGES[name]
    return rig


#: The rig's knees and elbows: hinges about their X axes that bend one way only (radians; the knee's shin goes
#: back, the elbow's forearm forward: both are negative turns with the rolls the rig's bones have).
HINGES = {"calf_l": (-2.6, 0.0), "calf_r": (-2.6, 0.0), "lowerarm_l": (-2.6, 0.0), "lowerarm_r": (-2.6, 0.0)}


def keyed_clip(frames: int = 24):
    """The walk's skeleton built as an armature (Z up, CMU's names) with its hips keyed moving forward and its
    knees keyed bending: a clip for a Blender whose BVH importer cannot run (Debian's 3.4 opens files with mode
    'rU', which its Python 3.11 refuses)."""
    up = {name: None for name, _, _ in JOINTS}
    heads = {}
    for name, parent, (x, y, z) in JOINTS:  # BVH (x, y, z) is Blender (x, -z, y)
        base = heads[parent] if parent else (0.0, 0.0, HIP_HEIGHT)
        heads[name] = (base[0] + x, base[1] - z, base[2] + y)
    bones = []
    for name, parent, _ in JOINTS:
        children = [n for n, p, _ in JOINTS if p == name]
        if children:
            tail = heads[children[0]]
        else:
            x, y, z = END_SITES[name]
            tail = (heads[name][0] + x, heads[name][1] - z, heads[name][2] + y)
        if name == "Hips":
            tail = (0.0, 0.0, HIP_HEIGHT + 0.1)
        bones.append((name, heads[name], tail, parent, parent is not None and name not in up))
    clip = rigbuild.make_armature("Clip", [(n, h, t, p, False) for n, h, t, p, _ in bones])
    hips = clip.pose.bones["Hips"]
    for frame in range(1, frames + 1):
        hips.location = (0.0, 0.0, 0.02 * frame)  # (the hips bone's Y is the world's Z, up; its Z points forward)
        hips.keyframe_insert("location", frame=frame)
        for side in ("Left", "Right"):
            knee = clip.pose.bones[f"{side}Leg"]
            bend = 0.25 + 0.1 * math.sin(frame * 0.3)  # (half the knee's turn: bent, so the feet stay in reach)
            knee.rotation_quaternion = (math.cos(bend), math.sin(bend), 0.0, 0.0)
            knee.keyframe_insert("rotation_quaternion", frame=frame)
    return clip
