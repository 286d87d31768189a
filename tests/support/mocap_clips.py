# SPDX-License-Identifier: GPL-3.0-or-later
"""Captured clips made here, written as BVH and imported with Blender's bundled importer, and rigs to put them on.

A skeleton in the shape of a CMU capture (Hips, Spine, Spine1, Neck, Head, collars, arms, legs and toes, Y up,
+Z forward, +X the character's left) in a T pose or an A pose, and motions on it: a walk, a run, a crouch, a
reach beyond the arm, a turn in place and a jump, each made by placing the feet and hands and bending the
limbs towards them with the knees forward and the elbows back. `rig_from` builds an armature of the same
shape (Blender's axes, Z up), with other proportions or other bone names; `along_x` a clip whose every bone
lies along +X at rest, posed as the clip is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import bpy

# isort: split
import addon_utils  # (importable only once bpy is)
import numpy as np
from walk_clip import bvh_hierarchy

from samples import rigbuild

#: Bones: (name, parent, offset from the parent's joint in BVH axes, in a T pose).
SKELETON = [
    ("Hips", None, (0.0, 0.0, 0.0)),
    ("Spine", "Hips", (0.0, 0.10, 0.0)), ("Spine1", "Spine", (0.0, 0.16, 0.0)),
    ("Neck", "Spine1", (0.0, 0.22, 0.0)), ("Head", "Neck", (0.0, 0.10, 0.0)),
]
for _side, _s in (("Left", 1.0), ("Right", -1.0)):
    SKELETON += [
        (f"{_side}Shoulder", "Spine1", (0.03 * _s, 0.18, 0.0)),
        (f"{_side}Arm", f"{_side}Shoulder", (0.14 * _s, 0.0, 0.0)),
        (f"{_side}ForeArm", f"{_side}Arm", (0.28 * _s, 0.0, 0.0)),
        (f"{_side}Hand", f"{_side}ForeArm", (0.25 * _s, 0.0, 0.0)),
        (f"{_side}UpLeg", "Hips", (0.10 * _s, 0.0, 0.0)), (f"{_side}Leg", f"{_side}UpLeg", (0.0, -0.45, 0.0)),
        (f"{_side}Foot", f"{_side}Leg", (0.0, -0.45, 0.0)), (f"{_side}ToeBase", f"{_side}Foot", (0.0, -0.06, 0.12)),
    ]
END_SITES = {"Head": (0.0, 0.18, 0.0), "LeftHand": (0.08, 0.0, 0.0), "RightHand": (-0.08, 0.0, 0.0),
             "LeftToeBase": (0.0, 0.0, 0.06), "RightToeBase": (0.0, 0.0, 0.06)}
ARM_BONES = ("Arm", "ForeArm", "Hand")
LEG_BONES = ("UpLeg", "Leg", "Foot", "ToeBase")
#: The hips' height standing, and the ankle's above the floor.
HIP_HEIGHT, ANKLE_HEIGHT = 0.96, 0.06


def rot(axis: str, degrees: float) -> np.ndarray:
    """A rotation matrix about x, y or z."""
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]), "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis].astype(float)


def zxy(m: np.ndarray) -> tuple[float, float, float]:
    """BVH's Zrotation, Xrotation, Yrotation (degrees) of a rotation matrix (Rz Rx Ry)."""
    b = math.asin(max(-1.0, min(1.0, m[2, 1])))
    return math.degrees(math.atan2(-m[0, 1], m[1, 1])), math.degrees(b), math.degrees(math.atan2(-m[2, 0], m[2, 2]))


def swing(a, b) -> np.ndarray:
    """The shortest rotation taking direction a to direction b."""
    a, b = np.asarray(a, float) / np.linalg.norm(a), np.asarray(b, float) / np.linalg.norm(b)
    c, d = np.cross(a, b), float(a @ b)
    if d < -1 + 1e-9:
        return rot("y", 180.0) if abs(a[1]) < 0.9 else rot("x", 180.0)
    k = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
    return np.eye(3) + k + k @ k / (1.0 + d)


@dataclass
class Skeleton:
    """A skeleton's offsets (T pose, or arms lowered for an A pose) and its limbs' scales."""

    pose: str = "T"
    legs: float = 1.0
    arms: float = 1.0
    offsets: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, parent, offset in SKELETON:
            offset = np.array(offset, dtype=float)
            if name.endswith(("ForeArm", "Hand")):  # (their offsets are the upper arm's and the forearm's lengths)
                offset = offset * self.arms
                if self.pose == "A":
                    offset = rot("z", -45.0 if offset[0] > 0 else 45.0) @ offset
            elif name.endswith(("Foot", "Leg")) and not name.endswith("UpLeg"):
                offset = offset * self.legs
            self.offsets[name] = offset
        self.ends = {n: np.array(v, dtype=float) for n, v in END_SITES.items()}
        for n in ("LeftHand", "RightHand"):
            self.ends[n] = self.ends[n] * self.arms
            if self.pose == "A":
                self.ends[n] = rot("z", -45.0 if self.ends[n][0] > 0 else 45.0) @ self.ends[n]

    def rest_direction(self, name: str) -> np.ndarray:
        """The direction a bone points at rest (to its first child, or its end site)."""
        child = next((n for n, p, _ in SKELETON if p == name), None)
        return self.offsets[child] if child else self.ends[name]


@dataclass
class Pose:
    """One frame: the hips' place (BVH axes) and every joint's local rotation matrix."""

    hips: np.ndarray
    turns: dict


def _limb(skeleton: Skeleton, side: str, upper: str, lower: str, reach_to: np.ndarray, bend: np.ndarray,
          turns: dict) -> None:
    """Turn a limb's two bones so its end reaches `reach_to` (relative to its top joint, in the parent's frame),
    bending towards `bend` (the knee forward, the elbow back)."""
    a = np.linalg.norm(skeleton.offsets[f"{side}{lower}"])
    end = skeleton.offsets[f"{side}{'Foot' if lower == 'Leg' else 'Hand'}"]
    b = np.linalg.norm(end)
    d = np.linalg.norm(reach_to)
    d = min(max(d, abs(a - b) + 1e-4), a + b - 1e-5)
    direction = reach_to / np.linalg.norm(reach_to)
    cos_top = (a * a + d * d - b * b) / (2 * a * d)
    top_angle = math.acos(max(-1.0, min(1.0, cos_top)))
    side_way = bend - direction * float(bend @ direction)
    side_way /= np.linalg.norm(side_way)
    knee = a * (math.cos(top_angle) * direction + math.sin(top_angle) * side_way)
    upper_turn = swing(skeleton.offsets[f"{side}{lower}"], knee)
    turns[f"{side}{upper}"] = upper_turn
    toward = direction * d - knee
    turns[f"{side}{lower}"] = upper_turn.T @ swing(upper_turn @ end, toward) @ upper_turn


def make_pose(skeleton: Skeleton, hips: np.ndarray, hips_turn: np.ndarray, feet: dict, hands: dict,
              spine_bend: float = 0.0, head_turn: float = 0.0, foot_pitch: dict | None = None,
              foot_turn: dict | None = None) -> Pose:
    """A frame: the hips placed and turned, each foot's ankle at `feet[side]` (world, BVH axes) and each wrist at
    `hands[side]` from its shoulder (in the chest's frame, in arm lengths: its length is how far the arm
    reaches; missing: hanging relaxed), the spine bent forward and the head turned by degrees; each foot level,
    facing as the hips do (or as `foot_turn[side]` turns it) and pitched up by `foot_pitch[side]` degrees."""
    turns = {"Hips": hips_turn}
    spine = rot("x", spine_bend / 2.0)
    turns["Spine"], turns["Spine1"] = spine, spine
    turns["Neck"] = rot("x", -spine_bend / 2.0)
    turns["Head"] = rot("y", head_turn)
    for side, s in (("Left", 1.0), ("Right", -1.0)):
        hip_joint = hips + hips_turn @ skeleton.offsets[f"{side}UpLeg"]
        _limb(skeleton, side, "UpLeg", "Leg", hips_turn.T @ (feet[side] - hip_joint), np.array([0.0, 0.0, 1.0]), turns)
        # The foot level in the hips' frame (pitched by `foot_pitch`), whatever the leg's turns.
        leg_world = hips_turn @ turns[f"{side}UpLeg"] @ turns[f"{side}Leg"]
        pitch = (foot_pitch or {}).get(side, 0.0)
        turns[f"{side}Foot"] = leg_world.T @ (foot_turn or {}).get(side, hips_turn) @ rot("x", pitch)
        turns[f"{side}ToeBase"] = rot("x", -0.8 * pitch)
        turns[f"{side}Shoulder"] = np.eye(3)
        arm = np.linalg.norm(skeleton.offsets[f"{side}ForeArm"]) + np.linalg.norm(skeleton.offsets[f"{side}Hand"])
        wrist = np.asarray(hands.get(side, (0.1 * s, -0.85, 0.25)), dtype=float)
        _limb(skeleton, side, "Arm", "ForeArm", wrist * arm, np.array([0.0, -0.5, -1.0]), turns)
        turns[f"{side}Hand"] = rot("z", -10.0 * s)
    return Pose(hips, turns)


def walk(frames: int = 72, run: bool = False) -> list[Pose]:
    """Walking (or running) forward along +Z: each foot stands, then swings a stride forward, the other half a
    cycle later; the arms swing against the legs with the elbows bent."""
    sk = Skeleton()
    cycle, stride = (16, 0.9) if run else (24, 0.5)
    stand = int(cycle * (0.4 if run else 0.5))
    out = []
    for f in range(frames):
        bounce = 0.06 * abs(math.sin(2 * math.pi * f / cycle)) if run else 0.02 * math.cos(4 * math.pi * f / cycle)
        hips = np.array([0.0, HIP_HEIGHT - (0.1 if run else 0.03) + bounce, stride * f / cycle + stride / 2])
        feet, pitch, hands = {}, {}, {}
        for side, s, shift in (("Left", 1.0, 0), ("Right", -1.0, cycle // 2)):
            k, phase = divmod(f + shift, cycle)
            if phase < stand:  # (with a captured foot's jitter: a few millimetres)
                z, y, pitch[side] = stride * k + 0.004 * math.sin(2.3 * f), ANKLE_HEIGHT, 0.0
            else:
                u = (phase - stand + 1) / (cycle - stand + 1)
                z, y = stride * (k + u), ANKLE_HEIGHT + (0.25 if run else 0.12) * math.sin(math.pi * u)
                pitch[side] = 15.0 * math.sin(math.pi * u)
            feet[side] = np.array([0.11 * s, y, z])
            a = (0.45 if run else 0.25) * math.sin(2 * math.pi * (f + shift) / cycle)
            hands[side] = (0.08 * s, -(0.55 if run else 0.8) * math.cos(a), (0.55 if run else 0.8) * math.sin(a) + 0.15)
        out.append(make_pose(sk, hips, np.eye(3), feet, hands, spine_bend=8.0 if run else 2.0, foot_pitch=pitch))
    return out


def _standing_feet(width: float = 0.12) -> dict:
    return {side: np.array([width * s, ANKLE_HEIGHT, 0.0]) for side, s in (("Left", 1.0), ("Right", -1.0))}


def crouch(frames: int = 60) -> list[Pose]:
    """Standing, squatting down to 60 % of the hips' height with the feet planted and the arms forward, up again."""
    out = []
    for f in range(frames):
        depth = 0.5 - 0.5 * math.cos(2 * math.pi * f / (frames - 1))
        hips = np.array([0.0, HIP_HEIGHT - 0.4 * depth, -0.12 * depth])
        hands = {side: (0.05 * s, -0.3 + 0.3 * depth, 0.5 + 0.3 * depth)
                 for side, s in (("Left", 1.0), ("Right", -1.0))}
        out.append(make_pose(Skeleton(), hips, np.eye(3), _standing_feet(), hands, spine_bend=30.0 * depth,
                             head_turn=20.0 * depth))
    return out


def reach(frames: int = 48) -> list[Pose]:
    """Standing, the left arm reaching forward and up until it is straight and beyond, back again."""
    out = []
    for f in range(frames):
        u = math.sin(math.pi * f / (frames - 1))
        hands = {"Left": (0.05, -0.8 + 1.1 * u, 0.3 + 0.9 * u)}
        out.append(make_pose(Skeleton(), np.array([0.0, HIP_HEIGHT, 0.0]), np.eye(3), _standing_feet(), hands,
                             spine_bend=10.0 * u))
    return out


def turn_in_place(frames: int = 72) -> list[Pose]:
    """Turning half round on the spot in small steps: each foot lifts and is put down turned as the hips are."""
    out = []

    def angle(t: float) -> float:
        return 180.0 * min(max(t, 0.0), frames - 1) / (frames - 1)

    for f in range(frames):
        hips_turn = rot("y", angle(f))
        feet, facing = {}, {}
        for side, s, shift in (("Left", 1.0, 0), ("Right", -1.0, 9)):
            k, phase = divmod(f + shift, 18)
            landed, next_landing = angle(18 * k - shift), angle(18 * (k + 1) - shift)
            u = max(0.0, (phase - 11) / 7)
            facing[side] = rot("y", landed + (next_landing - landed) * u)
            feet[side] = facing[side] @ np.array([0.12 * s, 0.0, 0.0]) + np.array(
                [0.0, ANKLE_HEIGHT + 0.08 * math.sin(math.pi * u), 0.0])
        out.append(make_pose(Skeleton(), np.array([0.0, HIP_HEIGHT - 0.02, 0.0]), hips_turn, feet, {},
                             foot_turn=facing))
    return out


def jump(frames: int = 60) -> list[Pose]:
    """Crouching, springing up off the floor (the feet leave it) and landing in a crouch."""
    out = []
    for f in range(frames):
        t = f / (frames - 1)
        if t < 0.35:
            dip, air = 0.25 * math.sin(math.pi * t / 0.35), 0.0
        elif t < 0.65:
            dip, air = 0.0, 0.3 * math.sin(math.pi * (t - 0.35) / 0.3)
        else:
            dip, air = 0.25 * math.sin(math.pi * (t - 0.65) / 0.35), 0.0
        hips = np.array([0.0, HIP_HEIGHT - dip + air, 0.0])
        feet = {side: p + np.array([0.0, max(0.0, air - 0.05), 0.0]) for side, p in _standing_feet().items()}
        hands = {side: (0.3 * s, -0.4 + 1.5 * air, 0.4) for side, s in (("Left", 1.0), ("Right", -1.0))}
        out.append(make_pose(Skeleton(), hips, np.eye(3), feet, hands, spine_bend=100.0 * dip))
    return out


MOTIONS = {"walk": walk, "run": lambda: walk(64, run=True), "crouch": crouch, "reach": reach,
           "turn": turn_in_place, "jump": jump}


def write_bvh(path, poses: list[Pose], skeleton: Skeleton | None = None, lift: float = 0.0) -> None:
    """The poses as a BVH file (the root's offset 0, its channels carry the hips; `lift` raises the whole clip)."""
    skeleton = skeleton or Skeleton()
    lines, order = bvh_hierarchy([(n, p) for n, p, _ in SKELETON], skeleton.offsets, skeleton.ends)
    lines += ["MOTION", f"Frames: {len(poses)}", "Frame Time: 0.0333333"]
    for pose in poses:
        row = [pose.hips[0], pose.hips[1] + lift, pose.hips[2]]
        for name in order:
            row += zxy(pose.turns.get(name, np.eye(3)))
        lines.append(" ".join(f"{v:.6f}" for v in row))
    path.write_text("\n".join(lines) + "\n")


def import_clip(folder, motion: str = "walk", name: str | None = None, **options):
    """A clip of one of the `MOTIONS` written as BVH in `folder` and imported with Blender's BVH importer."""
    addon_utils.enable("io_anim_bvh", default_set=True)
    path = folder / f"{name or motion}.bvh"
    write_bvh(path, MOTIONS[motion](), **options)
    result = bpy.ops.import_anim.bvh(filepath=str(path), update_scene_fps=False, update_scene_duration=True)
    if result != {'FINISHED'}:
        raise RuntimeError(f"the BVH importer returned {result}")
    clip = bpy.context.object
    clip.animation_data.action.name = name or motion
    return clip


def rig_from(skeleton: Skeleton, name: str = "Copy", rename=None, location=(0.0, 0.0, 0.0), hinges: bool = False,
             fingers: bool = False):
    """An armature of the skeleton's shape at rest (Blender's axes: BVH's (x, y, z) is (x, -z, y)), its hips'
    joint at the standing height; `rename` maps the clip's names to the rig's; `hinges`: knees and elbows limited
    to bend one way about their X axes; `fingers`: five three-bone fingers on each hand (51 bones in all)."""
    rename = rename or (lambda n: n)
    heads = {}
    for bone, parent, _ in SKELETON:
        base = heads[parent] if parent else np.array([0.0, 0.0, HIP_HEIGHT])
        o = skeleton.offsets[bone]
        heads[bone] = base + np.array([o[0], -o[2], o[1]])
    bones = []
    for bone, parent, _ in SKELETON:
        d = skeleton.rest_direction(bone)
        tail = heads[bone] + np.array([d[0], -d[2], d[1]])
        if bone == "Hips":
            tail = heads[bone] + np.array([0.0, 0.0, 0.1])
        connected = parent is not None and bone not in (
            "LeftShoulder", "RightShoulder", "LeftUpLeg", "RightUpLeg", "Spine")
        # (knees and elbows: the X axis across the way the limb bends, as a hinge about X needs)
        roll = (0.0, -1.0, 0.0) if "Leg" in bone or "Foot" in bone else (0.0, 1.0, 0.0) if "Arm" in bone else None
        row = (rename(bone), tuple(heads[bone]), tuple(tail), rename(parent) if parent else None, connected)
        bones.append(row + ((roll,) if roll else ()))
    if fingers:
        for side, s in (("Left", 1.0), ("Right", -1.0)):
            hand = next(row for row in bones if row[0] == rename(f"{side}Hand"))
            wrist, knuckles = np.array(hand[1]), np.array(hand[2])
            for k, finger in enumerate(("Thumb", "Index", "Middle", "Ring", "Pinky")):
                base = knuckles + np.array([0.0, -0.04 + 0.02 * k, 0.0])
                way = (knuckles - wrist) / np.linalg.norm(knuckles - wrist) * 0.03
                parent = hand[0]
                for j in range(1, 4):
                    head, tail = base + way * (j - 1), base + way * j
                    bones.append((rename(f"{side}Hand{finger}{j}"), tuple(head), tuple(tail), parent, j > 1))
                    parent = rename(f"{side}Hand{finger}{j}")
    rig = rigbuild.make_armature(name, bones, location=location)
    if hinges:
        for bone in ("LeftLeg", "RightLeg", "LeftForeArm", "RightForeArm"):
            pb = rig.pose.bones[rename(bone)]
            pb.lock_ik_y = pb.lock_ik_z = True
            pb.use_ik_limit_x = True
            pb.ik_min_x, pb.ik_max_x = _hinge_range(rig, rename(bone))
    return rig


def _hinge_range(rig, bone: str) -> tuple[float, float]:
    """The range of a knee's or elbow's X turn that bends it the way it bends in the clips (knee forward, elbow
    back): the sign a small turn about X gives that moves the bone's tail that way."""
    data = rig.data.bones[bone]
    matrix = np.array(data.matrix_local)[:3, :3]
    y_axis = matrix[:, 1]
    x_axis = matrix[:, 0]
    moved = np.cross(x_axis, y_axis)  # (a positive turn about X moves the tail along +Z of the bone: X x Y)
    wanted = np.array([0.0, 1.0, 0.0]) if "Leg" in bone else np.array([0.0, -1.0, 0.0])  # (shin back, forearm forward)
    sign = 1.0 if float(moved @ wanted) > 0 else -1.0
    return (0.0, 2.7) if sign > 0 else (-2.7, 0.0)


def along_x(clip, name: str = "AlongX"):
    """A copy of the clip whose every bone lies along +X at rest (as some exporters leave them), keyed so its
    joints move exactly as the clip's: each bone turns in the world as the clip's bone does from its rest."""
    scene = bpy.context.scene
    first, last = (int(v) for v in clip.animation_data.action.frame_range)
    bones = []
    for bone in clip.data.bones:
        head = np.array(clip.matrix_world @ bone.head_local)
        bones.append((bone.name, tuple(head), tuple(head + np.array([0.1, 0.0, 0.0])),
                      bone.parent.name if bone.parent else None, False))
    copy = rigbuild.make_armature(name, bones)
    rests = {b.name: np.array(b.matrix_local) for b in copy.data.bones}
    clip_rests = {b.name: np.array(clip.matrix_world @ b.matrix_local) for b in clip.data.bones}
    for pb in copy.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    from mathutils import Matrix
    for frame in range(first, last + 1):
        scene.frame_set(frame)
        evaluated = clip.evaluated_get(bpy.context.evaluated_depsgraph_get())
        posed = {}
        for bone in copy.data.bones:  # parents first
            world = np.array(evaluated.matrix_world @ evaluated.pose.bones[bone.name].matrix)
            turn = world[:3, :3] @ np.linalg.inv(clip_rests[bone.name][:3, :3])
            matrix = np.eye(4)
            matrix[:3, :3] = turn @ rests[bone.name][:3, :3]
            matrix[:3, 3] = world[:3, 3]
            posed[bone.name] = matrix
            pb = copy.pose.bones[bone.name]
            parent = bone.parent
            if parent is None:
                basis = np.linalg.inv(rests[bone.name]) @ matrix
            else:
                relative = np.linalg.inv(rests[parent.name]) @ rests[bone.name]
                basis = np.linalg.inv(relative) @ np.linalg.inv(posed[parent.name]) @ matrix
            pb.matrix_basis = Matrix(basis.tolist())
            pb.keyframe_insert("rotation_quaternion", frame=frame)
            pb.keyframe_insert("location", frame=frame)
    return copy


#: BVH's axes in Blender's: (x, y, z) is (x, -z, y).
TO_BLENDER = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def key_clip(motion: str = "walk", name: str = "Clip", location=(0.0, 0.0, 0.0), frames: int | None = None,
             fingers: bool = False):
    """One of the `MOTIONS` keyed straight on an armature of the skeleton's shape, as Blender's BVH importer puts
    a BVH file (for a Blender whose importer cannot run: Debian's 3.4 opens files with a mode its Python refuses);
    `fingers`: with three-bone fingers (`rig_from`) curling and opening, each its own way."""
    from mathutils import Matrix

    poses = MOTIONS[motion]() if frames is None else walk(frames)
    clip = rig_from(Skeleton(), name, location=location, fingers=fingers)
    rests = {b.name: np.array(b.matrix_local)[:3, :3] for b in clip.data.bones}
    head = np.array(clip.data.bones["Hips"].head_local)
    for pb in clip.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    for frame, pose in enumerate(poses, 1):
        for pb in clip.pose.bones:
            rest = rests[pb.name]
            turn = rest.T @ TO_BLENDER @ pose.turns.get(pb.name, np.eye(3)) @ TO_BLENDER.T @ rest
            pb.rotation_quaternion = Matrix(turn.tolist()).to_quaternion()
            pb.keyframe_insert("rotation_quaternion", frame=frame)
        hips = clip.pose.bones["Hips"]
        hips.location = rests["Hips"].T @ (TO_BLENDER @ pose.hips - head)
        hips.keyframe_insert("location", frame=frame)
        for k, pb in enumerate(pb for pb in clip.pose.bones if "Hand" in pb.name and pb.name[-1].isdigit()):
            curl = 0.6 * (1.0 + math.sin(0.15 * frame + 0.7 * k))  # (radians about the bone's X, each its own phase)
            pb.rotation_quaternion = (math.cos(curl / 2.0), math.sin(curl / 2.0), 0.0, 0.0)
            pb.keyframe_insert("rotation_quaternion", frame=frame)
    return clip
