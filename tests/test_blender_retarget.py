# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget in the real bpy module: a walk the test writes as a BVH file, imported with Blender's bundled BVH
importer, put on a rig of other proportions built here: bones mapped by name, the hips following scaled, the
feet found standing and pinned (they do not slide), every reachable target reached, no limit broken, baked."""

from __future__ import annotations

import math
import types

import bpy
import numpy as np
import pytest

import addon_utils  # noqa: E402  (only importable once bpy is)

from blender_scenes import RecordingLayout, rigbuild, tip_world
from fabrik_addon.blender import animdata, pins, retarget, status

pytestmark = pytest.mark.usefixtures("addon_per_test")

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


def write_walk(path) -> None:
    """The clip as a BVH file: hips moving forward at a steady height, legs stepping, arms swinging a little."""
    lines = ["HIERARCHY"]

    def joint(name: str, depth: int) -> None:
        pad = "  " * depth
        parent, offset = next((p, o) for n, p, o in JOINTS if n == name)
        lines.append(f"{pad}{'ROOT' if parent is None else 'JOINT'} {name}")
        lines.append(f"{pad}{{")
        lines.append(f"{pad}  OFFSET {offset[0]:.6f} {offset[1]:.6f} {offset[2]:.6f}")
        channels = "6 Xposition Yposition Zposition" if parent is None else "3"
        lines.append(f"{pad}  CHANNELS {channels} Zrotation Xrotation Yrotation")
        children = [n for n, p, _ in JOINTS if p == name]
        for child in children:
            joint(child, depth + 1)
        if not children:
            end = END_SITES[name]
            lines.extend([f"{pad}  End Site", f"{pad}  {{", f"{pad}    OFFSET {end[0]} {end[1]} {end[2]}", f"{pad}  }}"])
        lines.append(f"{pad}}}")

    joint("Hips", 0)
    lines += ["MOTION", f"Frames: {FRAMES}", "Frame Time: 0.0416667"]
    order = []

    def walk_order(name: str) -> None:
        order.append(name)
        for child in [n for n, p, _ in JOINTS if p == name]:
            walk_order(child)

    walk_order("Hips")
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


def import_walk(tmp_path):
    """The clip imported with Blender's own BVH importer (its add-on enabled for the test)."""
    addon_utils.enable("io_anim_bvh", default_set=True)
    path = tmp_path / "walk.bvh"
    write_walk(path)
    assert bpy.ops.import_anim.bvh(filepath=str(path), update_scene_fps=False, update_scene_duration=True) == {'FINISHED'}
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
    for name in ("calf_l", "calf_r", "lowerarm_l", "lowerarm_r"):
        pb = rig.pose.bones[name]
        pb.lock_ik_y = pb.lock_ik_z = True
        pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -2.6, 2.6
    return rig


def retargeted(tmp_path, **options):
    clip = import_walk(tmp_path)
    rig = stocky_rig()
    rig.fabrik.retarget_source = clip
    bpy.context.view_layer.objects.active = rig
    assert bpy.ops.fabrik.retarget_map() == {'FINISHED'}
    result = bpy.ops.fabrik.retarget(**options)
    assert result == {'FINISHED'}
    return clip, rig


def test_the_clips_bones_and_the_rigs_are_mapped_by_their_names(tmp_path):
    clip = import_walk(tmp_path)
    rig = stocky_rig()
    rig.fabrik.retarget_source = clip
    assert retarget.map_bones(rig) == []
    pairs = retarget.mapping(rig)
    assert pairs["thigh.L"] == ("LeftUpLeg", "thigh_l") and pairs["forearm.R"] == ("RightForeArm", "lowerarm_r")
    assert pairs["hips"] == ("Hips", "pelvis") and pairs["head"] == ("Head", "head")
    assert retarget.refusal(rig) is None


def test_the_feet_stand_still_while_pinned_and_every_target_in_reach_is_reached(tmp_path):
    clip, rig = retargeted(tmp_path, bake=False)
    effectors = {e.name: e for e in rig.fabrik.effectors}
    assert set(effectors) == {"hand.L", "hand.R", "foot.L", "foot.R", "head"}
    scene = bpy.context.scene
    assert (scene.frame_start, scene.frame_end) == (1, FRAMES)
    for name in ("foot.L", "foot.R"):
        spans = pins.spans(rig, effectors[name])
        assert len(spans) >= 2, (name, spans)
        for first, last in spans:
            held, followed = [], []
            for frame in range(first, last + 1):
                scene.frame_set(frame)
                held.append(np.array(tip_world(rig, effectors[name].bone)))
                followed.append(np.array(effectors[name].target.matrix_world.translation))
            slide = max(np.linalg.norm(h - held[0]) for h in held)
            jitter = max(np.linalg.norm(f - followed[0]) for f in followed)
            assert slide < 1e-4 and jitter > 2e-3, (name, first, last, slide, jitter)
    missed = []
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        shown = status.statuses[rig.name]
        missed += [(frame, i, m) for i, m in shown.effectors.items() if not m.startswith("reached")]
    assert not missed, missed[:5]


def test_the_hips_follow_the_clip_scaled_to_the_rigs_legs_and_no_limit_is_broken(tmp_path):
    clip, rig = retargeted(tmp_path, bake=False)
    scene = bpy.context.scene
    space = retarget.space_matrix(rig)
    scale = space.to_scale()[0]
    assert scale == pytest.approx((0.29 + 0.28) / (THIGH + SHIN), rel=0.02)
    for frame in (1, 20, 50):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        source = clip.evaluated_get(depsgraph)
        target = rig.evaluated_get(depsgraph)
        clip_hips = source.matrix_world @ source.pose.bones["Hips"].head
        rig_hips = target.matrix_world @ target.pose.bones["pelvis"].head
        assert (rig_hips - space @ clip_hips).length < 1e-4, frame
        for name in ("calf_l", "calf_r", "lowerarm_l", "lowerarm_r"):
            turn = target.pose.bones[name].matrix_basis.to_quaternion()
            axis_y, axis_z = abs(turn.y), abs(turn.z)
            assert axis_y < 1e-6 and axis_z < 1e-6, (frame, name, turn)  # a hinge: a turn about X only


def test_one_click_bakes_the_hips_and_the_chains_and_the_walk_plays_from_the_keys_alone(tmp_path):
    clip, rig = retargeted(tmp_path, bake=True)
    scene = bpy.context.scene
    foot = next(e for e in rig.fabrik.effectors if e.name == "foot.L")
    first, last = pins.spans(rig, foot)[0]
    assert not rig.fabrik.live and not rig.pose.bones["pelvis"].constraints
    paths = {c.data_path for c in animdata.fcurves(rig)}
    assert {'pose.bones["pelvis"].location', 'pose.bones["calf_l"].rotation_quaternion'} <= paths
    space = retarget.space_matrix(rig)
    for frame in (5, 40):  # the hips from their keys, where the clip's hips are, scaled
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        source, target = clip.evaluated_get(depsgraph), rig.evaluated_get(depsgraph)
        clip_hips = source.matrix_world @ source.pose.bones["Hips"].head
        assert (target.matrix_world @ target.pose.bones["pelvis"].head - space @ clip_hips).length < 1e-4
    held = []
    for frame in range(first, last + 1):
        scene.frame_set(frame)
        held.append(np.array(tip_world(rig, foot.bone)))
    assert max(np.linalg.norm(h - held[0]) for h in held) < 1e-4


def test_retarget_refuses_without_a_mapping_it_can_use_and_changes_nothing(tmp_path):
    clip = import_walk(tmp_path)
    rig = stocky_rig()
    bpy.context.view_layer.objects.active = rig
    rig.fabrik.retarget_source = clip
    retarget.map_bones(rig)
    rig.fabrik.retarget_bones["thigh.L"].target = ""
    with pytest.raises(RuntimeError, match=r"no bones for thigh\.L"):
        bpy.ops.fabrik.retarget(bake=False)
    assert len(rig.fabrik.effectors) == 0 and bpy.data.collections.get(retarget.collection_name(rig)) is None
    rig.fabrik.retarget_bones["thigh.L"].target = "nope"
    with pytest.raises(RuntimeError, match="the rig has no bone 'nope'"):
        bpy.ops.fabrik.retarget(bake=False)


def test_a_second_retarget_replaces_the_first_and_the_mapping_saves(tmp_path):
    clip, rig = retargeted(tmp_path, bake=False)
    assert bpy.ops.fabrik.retarget(bake=False) == {'FINISHED'}
    assert len(rig.fabrik.effectors) == 5
    collection = bpy.data.collections[retarget.collection_name(rig)]
    assert len(collection.objects) == len({o.name for o in collection.objects}) == 12
    path = str(tmp_path / "retarget.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["Stocky"]
    assert retarget.mapping(rig)["shin.R"] == ("RightLeg", "calf_r") and rig.fabrik.retarget_source is not None


def test_the_retarget_panel_shows_the_source_the_mapping_and_what_is_missing(tmp_path):
    clip = import_walk(tmp_path)
    rig = stocky_rig()
    rig.fabrik.retarget_source = clip
    retarget.map_bones(rig)
    rig.fabrik.retarget_bones["thigh.L"].target = ""
    rig.fabrik.retarget_index = list(rig.fabrik.retarget_bones.keys()).index("thigh.L")
    log = []
    panel = types.SimpleNamespace(layout=RecordingLayout(log))
    context = types.SimpleNamespace(object=rig, scene=bpy.context.scene, region=None,
                                    preferences=bpy.context.preferences)
    assert bpy.types.VIEW3D_PT_fabrik_retarget.poll(context)
    bpy.types.VIEW3D_PT_fabrik_retarget.draw(panel, context)
    operators = {args[0] for name, args, _ in log if name == "operator"}
    searched = [args[1] for name, args, _ in log if name == "prop_search"]
    text = " ".join(kwargs.get("text", "") for name, _, kwargs in log if name == "label")
    assert operators == {"fabrik.retarget_map", "fabrik.retarget"}
    assert any(name == "template_list" and args[0] == "FABRIK_UL_retarget_bones" for name, args, _ in log)
    assert searched == ["source", "target"]
    assert "no bones for thigh.L" in text and "Clip's thigh.L" in text
