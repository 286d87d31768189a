# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for the sequence test (`tests/blender/test_sequences.py`): the scene it plays on, and what it measures.

Everything here names Blender data by name, never by a Python reference kept
across steps: undo and file loads replace the data, and old references then
point at freed memory.
"""

from __future__ import annotations

import math
from typing import Iterable

import bpy
import numpy as np
from blender_scenes import rigbuild
from mathutils import Vector

from fabrik_addon.blender.rig.held_bones import held_bones
from samples import rig_classes  # noqa: E402  (blender_scenes puts samples/ on the path)

#: Frames the scene's animation covers; steps also visit a few frames outside it.
FRAMES = range(1, 21)

#: The rigs steps act on, by object name: a chain with one effector part way up, a hand (a tree of five
#: effectors sharing the palm), an arm with joint limits and an elbow pole, and a rig that carries a Blender IK
#: constraint (no effector until Convert makes one).
CHAIN, HAND, ARM, IK_RIG = "Chain", "hand", "arm_pole_bent", "IKRig"
RIGS = (CHAIN, HAND, ARM, IK_RIG)
#: Objects no effector ever reads or moves: an animated empty and an animated armature without effectors.
BYSTANDERS = ("Bystander", "BystanderRig")

#: Pose-bone channels (name, size), as a pose bone holds them.
CHANNELS = (
    ("location", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4), ("scale", 3)
)
#: Object channels compared the same way.
OBJECT_CHANNELS = (("location", 3), ("rotation_euler", 3), ("rotation_quaternion", 4), ("scale", 3))


def build_scene() -> None:
    """The scene of one sequence, in an empty file: four rigs (three solving live), targets, bystanders."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    rigbuild.use_frames(FRAMES)

    # A 5-bone chain; the effector moves bone1..bone3, so bone0 (its base) and bone4 (past its tip) are not its own.
    chain = rigbuild.make_armature(CHAIN, rigbuild.chain_bones(5, 0.5), location=(-2.0, 0.0, 0.0))
    target = rigbuild.make_target("ChainTarget", (-1.4, 0.0, 1.4))
    rigbuild.key_circle(target, (-1.6, 0.0, 1.3), 0.4, FRAMES, axis="XZ")
    rigbuild.add_effector(chain, "bone3", target, chain_length=3)

    # The hand of rig_classes: five fingers through the palm, knuckle and hinge limits; targets near the tips.
    case = rig_classes.build_hand()
    hand = case.obj
    # Targets where the fingertips are in a random pose inside the limits (so each can be reached), fixed seed.
    samples = rig_classes.random_targets(case, np.random.default_rng(14), 1)[0]
    hand.location = (2.0, 0.0, 0.0)
    bpy.context.view_layer.update()
    for i, (spec, (tail, _)) in enumerate(zip(case.effectors, samples)):
        finger_target = rigbuild.make_target(f"HandTarget{i}", hand.matrix_world @ Vector(tail), size=0.01)
        if i % 2 == 0:  # some targets move with the frames, the others stand
            rigbuild.key_circle(finger_target, tuple(finger_target.location), 0.005, FRAMES, axis="YZ")
        rigbuild.add_effector(hand, spec.bone, finger_target, chain_length=spec.chain_length)

    # The arm of rig_classes: shoulder and elbow limits, a pole behind the elbow that keeps the rest bend.
    case = rig_classes.build_arm_pole_bent()
    arm = case.obj
    spec = case.effectors[0]
    reach_target = rigbuild.make_target("ArmTarget", (0.55, -0.1, 1.3), size=0.05)
    rigbuild.key_path(reach_target, FRAMES, lambda f: (0.55 + 0.01 * f, -0.1, 1.3 - 0.005 * f))
    effector = rigbuild.add_effector(arm, spec.bone, reach_target, chain_length=spec.chain_length)
    effector.pole_target = bpy.data.objects[spec.pole]
    effector.pole_angle = spec.pole_angle

    # A rig set up with Blender's own IK, for Convert and Restore.
    ik_rig = rigbuild.make_armature(IK_RIG, rigbuild.chain_bones(3, 0.4), location=(0.0, 2.0, 0.0))
    ik_target = rigbuild.make_target("IKTarget", (0.4, 2.0, 0.9))
    constraint = ik_rig.pose.bones["bone2"].constraints.new('IK')
    constraint.target, constraint.chain_count = ik_target, 3

    # Bystanders: an animated empty, and an armature with a posed, animated bone and no effectors.
    bystander = rigbuild.make_target(BYSTANDERS[0], (0.0, -2.0, 0.5))
    bystander.rotation_euler = (0.3, 0.2, 0.1)
    rigbuild.key_circle(bystander, (0.0, -2.0, 0.5), 0.5, FRAMES, axis="XY")
    other = rigbuild.make_armature(BYSTANDERS[1], rigbuild.chain_bones(3, 0.5, prefix="b"), location=(0.0, -3.0, 0.0))
    other.pose.bones["b0"].rotation_quaternion = (0.9, 0.3, 0.1, 0.0)
    other.pose.bones["b1"].rotation_mode = 'XYZ'
    for frame, angle in ((1, 0.0), (10, 0.8), (20, -0.4)):
        other.pose.bones["b1"].rotation_euler = (angle, 0.0, 0.2)
        other.pose.bones["b1"].keyframe_insert("rotation_euler", frame=frame)
    other.pose.bones["b2"].location = (0.1, 0.0, 0.0)

    for name in (CHAIN, HAND, ARM, IK_RIG):
        bpy.data.objects[name].fabrik.live = True
    scene.frame_set(1)
    bpy.context.view_layer.update()


# -- what a step may touch -------------------------------------------------------------------------------------


def chain_names(rig) -> set[str]:
    """Bones the add-on may write on a rig: every effector's chain (by the names the effectors hold now) and every
    bone it keeps written values for (live solving off gives those back). A name that is no longer a bone (renamed
    while the add-on was off, and not followed yet) counts by the bone in the place the add-on follows it to: the
    held entry's or the effector's noted place among the bones."""
    bones = rig.data.bones

    def followed(name: str, index: int) -> str:
        return name if name in bones or not 0 <= index < len(bones) else bones[index].name

    names = {followed(entry.name, entry.index) for entry in held_bones(rig)}
    for effector in rig.fabrik.effectors:
        ref = effector.bone_refs.get("bone")
        bone = bones.get(followed(effector.bone, ref.index if ref is not None else -1))
        count = 0
        while bone is not None and (effector.chain_length == 0 or count < effector.chain_length):
            names.add(bone.name)
            bone, count = bone.parent, count + 1
    return names


def reachable(enabled: bool) -> dict[str, set[str]]:
    """Per armature object, the bones the add-on may write (nothing at all while it is switched off)."""
    if not enabled:
        return {}
    return {obj.name: chain_names(obj) for obj in bpy.data.objects if obj.type == 'ARMATURE'}


def merge(*maps: dict[str, set[str]]) -> dict[str, set[str]]:
    """The union of several `reachable` results."""
    merged: dict[str, set[str]] = {}
    for reach in maps:
        for name, bones in reach.items():
            merged.setdefault(name, set()).update(bones)
    return merged


# -- animation data, on every Blender the add-on supports ------------------------------------------------------


def all_fcurves(action) -> list:
    """Every F-curve of an action: in its layers' channelbags (layered actions, 4.4+) or on the action."""
    if hasattr(action, "layers") and not hasattr(action, "fcurves"):
        curves = []
        for layer in action.layers:
            for strip in layer.strips:
                for channelbag in getattr(strip, "channelbags", ()):
                    curves.extend(channelbag.fcurves)
        return curves
    return list(action.fcurves)


def object_fcurves(obj) -> dict[tuple[str, int], object]:
    """The F-curves animating an object now, by (data path, index); muted ones are left out (they key nothing)."""
    animation_data = obj.animation_data
    if animation_data is None or animation_data.action is None:
        return {}
    action = animation_data.action
    if hasattr(animation_data, "action_slot") and not hasattr(action, "fcurves"):
        from bpy_extras.anim_utils import action_get_channelbag_for_slot

        slot = animation_data.action_slot
        channelbag = action_get_channelbag_for_slot(action, slot) if slot is not None else None
        curves = list(channelbag.fcurves) if channelbag is not None else []
    else:
        curves = list(action.fcurves)
    return {(fc.data_path, fc.array_index): fc for fc in curves if not fc.mute}


def keys_of(fcurve) -> tuple:
    """An F-curve's keys (frame, value, both handles) as one comparable value."""
    values = [0.0] * (6 * len(fcurve.keyframe_points))
    for name, offset in (("co", 0), ("handle_left", 2), ("handle_right", 4)):
        part = [0.0] * (2 * len(fcurve.keyframe_points))
        fcurve.keyframe_points.foreach_get(name, part)
        for k in range(len(fcurve.keyframe_points)):
            values[6 * k + offset: 6 * k + offset + 2] = part[2 * k: 2 * k + 2]
    return tuple(values)


# -- the state compared before and after a step ----------------------------------------------------------------


def bone_path(bone: str, channel: str) -> str:
    """The data path of a pose bone's channel, as F-curves name it."""
    return f'pose.bones["{bpy.utils.escape_identifier(bone)}"].{channel}'


def snapshot() -> dict:
    """Every channel of every object and pose bone, every armature's rest bones and every F-curve's keys, by a
    key that names its owner: what the add-on must leave alone, minus what it may write (see `compare`)."""
    state: dict = {}
    for obj in bpy.data.objects:
        if not obj.users_scene:
            continue  # deleted in the viewport: no longer part of the scene
        curves = object_fcurves(obj)
        for channel, _ in OBJECT_CHANNELS:
            state[("object", obj.name, "", channel)] = (tuple(getattr(obj, channel)), _keyed(curves, channel))
        state[("object", obj.name, "", "rotation_mode")] = (obj.rotation_mode, ())
        if obj.type != 'ARMATURE':
            continue
        for pose_bone in obj.pose.bones:
            for channel, _ in CHANNELS:
                path = bone_path(pose_bone.name, channel)
                value = tuple(getattr(pose_bone, channel))
                state[("bone", obj.name, pose_bone.name, channel)] = (value, _keyed(curves, path))
            state[("bone", obj.name, pose_bone.name, "rotation_mode")] = (pose_bone.rotation_mode, ())
        for bone in obj.data.bones:
            rest = (tuple(bone.head_local), tuple(bone.tail_local), bone.parent.name if bone.parent else "")
            state[("rest", obj.name, bone.name, "")] = (rest, ())
    for action in bpy.data.actions:
        for fcurve in all_fcurves(action):
            state[("keys", action.name, fcurve.data_path, str(fcurve.array_index))] = (keys_of(fcurve), ())
    return state


def _keyed(curves: dict, path: str) -> tuple:
    """The component indices of a channel that F-curves animate."""
    return tuple(sorted(index for (data_path, index) in curves if data_path == path))


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN (a channel a step set to NaN on purpose stays NaN)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def compare(before: dict, after: dict, reach: dict[str, set[str]], frame_changed: bool | str) -> list[str]:
    """What changed between two snapshots outside the add-on's reach, in words (nothing: an empty list).

    `reach` names the bones the add-on may write; keys of actions may change
    only on those bones' channels. A channel animated by an F-curve takes
    its curve's value at the current frame after a frame change (the curves
    themselves are compared too), so after one it is compared with that;
    `frame_changed="either"` (an undo, which may evaluate the animation
    again) accepts the curve's value or the value before.
    """
    changes = []
    for key, (value, keyed) in before.items():
        kind, owner, name, channel = key
        if kind == "bone" and name in reach.get(owner, ()):
            continue
        if kind == "keys" and _reached_path(owner, name, reach):
            continue
        if key not in after:
            if kind in ("object", "keys"):
                continue  # objects deleted and curves removed are checked through what remains
            changes.append(f"{key} went away")
            continue
        now, _ = after[key]
        if frame_changed and keyed:
            expected = list(value)
            obj = bpy.data.objects[owner]
            curves = object_fcurves(obj)
            path = channel if kind == "object" else bone_path(name, channel)
            frame = bpy.context.scene.frame_current
            for index in keyed:
                if (path, index) in curves:
                    expected[index] = curves[(path, index)].evaluate(frame)
            if frame_changed == "either" and _same(value, now):
                continue
            if not all(abs(x - y) <= 1e-5 * (1.0 + abs(y)) for x, y in zip(now, expected)):
                changes.append(f"{key}: {value} -> {now}, its curves give {tuple(expected)}")
            continue
        if not _same(value, now):
            changes.append(f"{key}: {value} -> {now}")
    return changes


def _reached_path(action_name: str, data_path: str, reach: dict[str, set[str]]) -> bool:
    """Whether an F-curve keys a bone the add-on may write, on an action of a rig (bakes key those)."""
    for obj in bpy.data.objects:
        animation_data = obj.animation_data
        if obj.type == 'ARMATURE' and animation_data is not None and animation_data.action is not None:
            if animation_data.action.name == action_name:
                if any(data_path.startswith(f'pose.bones["{bpy.utils.escape_identifier(bone)}"].')
                       for bone in reach.get(obj.name, ())):
                    return True
    return False


def non_finite(excluded: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Every non-finite pose channel of any armature and every non-finite key of any action, in words.

    `excluded` are (object, bone) pairs whose channels a step set to NaN on purpose.
    """
    excluded = set(excluded)
    found = []
    for obj in bpy.data.objects:
        if obj.type != 'ARMATURE':
            continue
        for pose_bone in obj.pose.bones:
            if (obj.name, pose_bone.name) in excluded:
                continue
            for channel, _ in CHANNELS:
                value = tuple(getattr(pose_bone, channel))
                if not all(math.isfinite(v) for v in value):
                    found.append(f"{obj.name}: {pose_bone.name}.{channel} = {value}")
    for action in bpy.data.actions:
        for fcurve in all_fcurves(action):
            values = keys_of(fcurve)
            if not all(math.isfinite(v) for v in values):
                found.append(f"action '{action.name}': a key of {fcurve.data_path}[{fcurve.array_index}] is not finite")
    return found


# -- the status against the evaluated scene --------------------------------------------------------------------


def chain_reach(rig, effector) -> float:
    """An effector's chain laid end to end (armature units): bone lengths and the rest gaps between them."""
    bone = rig.data.bones.get(effector.bone)
    total, count = 0.0, 0
    while bone is not None and (effector.chain_length == 0 or count < effector.chain_length):
        total += bone.length
        if bone.parent is not None and count + 1 != effector.chain_length:
            total += (bone.head_local - bone.parent.tail_local).length
        bone, count = bone.parent, count + 1
    return total


def status_mismatches(rig, status, slack: float = 10.0) -> list[str]:
    """Effectors the status calls reached whose tip, as Blender evaluates the scene, is not on its target.

    Allowed: `slack` times the rig's tolerance (a fraction of its longest
    chain, as the add-on defines it), plus 1e-5 of that length for the single
    precision the pose is kept in.
    """
    effectors = rig.fabrik.effectors
    sizes = [chain_reach(rig, e) for e in effectors if e.bone in rig.data.bones]
    size = max(sizes, default=0.0) * max(rig.matrix_world.to_scale())
    allowed = size * (slack * rig.fabrik.tolerance + 1e-5)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    wrong = []
    for index, reached in status.reached.items():
        if not reached:
            continue
        if index >= len(effectors):
            wrong.append(f"effector {index} is reported reached but the rig has {len(effectors)} effectors")
            continue
        effector = effectors[index]
        if effector.target is None or effector.bone not in evaluated.pose.bones:
            wrong.append(f"effector {index} ({effector.bone}) is reported reached without a target or tip bone")
            continue
        tip = evaluated.matrix_world @ evaluated.pose.bones[effector.bone].tail
        goal = effector.target.evaluated_get(depsgraph).matrix_world.translation
        miss = (tip - goal).length
        if not miss <= allowed:
            wrong.append(
                f"effector {index} ({effector.bone} -> {effector.target.name}) is reported "
                f"'{status.effectors.get(index)}' but its evaluated tip misses by {miss:.3g} (allowed {allowed:.3g})"
            )
    return wrong
