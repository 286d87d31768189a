# SPDX-License-Identifier: GPL-3.0-or-later
"""The benchmarks' rigs: layouts built in the scene with animated targets and FABRIK effectors, the samples' rigs,
the rig classes users bring, the motion-capture character, and how each is set up for a solver.

Used by `benchmarks/run.py` (live) and `benchmarks/bake.py` (`RIGS`, `build`, `set_mode`, `tentacle_rigs`).
The add-on must be registered before a rig is built.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from typing import Callable

import bpy
import numpy as np

from fabrik_addon.blender.effectors import constraints
from samples import rigbuild

#: FABRIK's iteration cap on every rig but the 1000-bone chain (which keeps the add-on's defaults).
ITERATIONS = 100


def hand_layout():
    """Palm plus five four-bone fingers: bones, effector tips and chain lengths."""
    bones = [("palm", (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), None, False)]
    tips = []
    for f in range(5):
        parent = "palm"
        for j in range(4):
            name = f"f{f}_{j}"
            x = (f - 2) * 0.25
            bones.append((name, (x, 1.1 + 0.3 * j, 0.0), (x, 1.1 + 0.3 * (j + 1), 0.0), parent, j > 0))
            parent = name
        tips.append(name)
    return bones, [(tip, 5) for tip in tips], 2.2


def chain_layout(count: int):
    """A connected chain of bones along +Z, 4 units long whatever the count."""
    return rigbuild.chain_bones(count, 1.0 / count * 4.0), [(f"bone{count - 1}", 0)], 4.0


RIGS = {
    "chain 10": lambda: chain_layout(10),
    "chain 50": lambda: chain_layout(50),
    "hand (5 x 4 + palm)": hand_layout,
}


def add_layout(layout, frames: range, name: str = "Rig", offset=(0.0, 0.0, 0.0), jump_every: int = 0):
    """The rig of a layout in the current scene with its animated targets and FABRIK effectors (live off); with
    `jump_every`, the targets jump across their circles every that many frames."""
    bones, effectors, reach = layout
    moved = [(n, _add(h, offset), _add(t, offset), *rest) for n, h, t, *rest in bones]
    rig = rigbuild.make_armature(name, moved)
    for k, (tip, chain) in enumerate(effectors):
        tail = rig.data.bones[tip].tail_local
        target = rigbuild.make_target(f"{name}_T{k}", tuple(tail))
        # Reachable motion: circles well inside the reach, around a point pulled in from the rest tip.
        center = tuple(offset[i] + (tail[i] - offset[i]) * 0.6 for i in range(3))
        axis = "XY" if tail[2] - offset[2] > tail[1] - offset[1] else "XZ"
        rigbuild.key_circle(target, center, 0.25 * reach, frames, axis=axis, jump_every=jump_every)
        rigbuild.add_effector(rig, tip, target, chain_length=chain)
    return rig


def _add(a, b) -> tuple:
    """Sum of two 3-vectors."""
    return tuple(x + y for x, y in zip(a, b))


def build(layout, solver: str, frames: range):
    """A fresh file with the rig, animated targets, and the chosen solver: 'none', 'blender' or 'fabrik'."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    rig = add_layout(layout, frames)
    pairs = [(e.bone, e.target) for e in rig.fabrik.effectors]
    set_mode(rig, solver)
    if solver == "fabrik":
        rig.fabrik.iterations = ITERATIONS
    return rig, pairs


def built(layout, solver: str, frames: range):
    """The rig of a layout, or of a builder (a rig maker such as `tentacle_rigs`), in a fresh file, set up for a
    solver as `build` sets a layout's."""
    if not callable(layout):
        return build(layout, solver, frames)[0]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    with quiet():  # the samples' operators print a line per target they key
        (rig,), _ = layout(frames)
    set_mode(rig, solver)
    return rig


def set_mode(rig, mode: str) -> None:
    """Make a rig with FABRIK effectors the mode's: live ('fabrik'), Blender IK instead ('blender'), bare ('none')."""
    # Blender's constraints get the effectors' targets, chains and poles; limits are the pose bones' own, shared.
    if mode == "fabrik":
        rig.fabrik.live = True
        return
    rig.fabrik.live = False
    if mode == "blender":
        _as_blender_ik(rig)
    rig.fabrik.effectors.clear()


def _as_blender_ik(rig) -> None:
    """Give each effector's bone Blender's IK constraint with its target, chain and pole, and drop the effectors."""
    for effector in rig.fabrik.effectors:
        constraint = rig.pose.bones[effector.bone].constraints.new("IK")
        constraint.target, constraint.subtarget = effector.target, effector.subtarget
        constraint.chain_count = effector.chain_length
        constraint.use_rotation = effector.use_rotation
        if effector.pole_target is not None:
            constraint.pole_target, constraint.pole_subtarget = effector.pole_target, effector.pole_subtarget
            constraint.pole_angle = effector.pole_angle
    rig.fabrik.effectors.clear()


def convert_from_blender_ik(rig) -> None:
    """Make a rig with FABRIK effectors one converted from Blender's IK: the effectors become IK constraints (as
    `set_mode` 'blender' makes them), and Convert IK Constraints turns them back into effectors, muting them (a
    muted constraint still ties the armature to its target in Blender's dependency graph)."""
    _as_blender_ik(rig)
    converted, skipped = constraints.convert_ik_constraints(rig)  # (what the operator does)
    assert converted and not skipped, skipped


def live_layout(make: Callable) -> Callable:
    """A builder of one live FABRIK rig of a layout in the current scene (for the memory checks)."""
    def builder(frames: range):
        rig = add_layout(make(), frames)
        rig.fabrik.iterations = ITERATIONS
        set_mode(rig, "fabrik")
        return rig
    return builder


def chain_reach(rig, tip: str, chain_length: int) -> float:
    """The chain's reach in world units: its bone lengths and the rest gaps between unconnected bones."""
    bones = rig.data.bones
    names, bone = [], bones[tip]
    while bone is not None and (chain_length == 0 or len(names) < chain_length):
        names.append(bone.name)
        bone = bone.parent
    to_world = rig.matrix_world.to_3x3()
    reach = 0.0
    for child, parent in zip(names, names[1:] + [None]):
        reach += (to_world @ (bones[child].tail_local - bones[child].head_local)).length
        if parent is not None:
            reach += (to_world @ (bones[child].head_local - bones[parent].tail_local)).length
    return reach


# The rigs of the table: each builder adds rigs with FABRIK effectors to the current scene and returns them.

def humanoid_rigs(frames: range) -> tuple[list, str]:
    """Rigify's human metarig from samples/humanoid.py: legs, arms (with poles) and head, five effectors."""
    from samples import humanoid

    return [humanoid.build(frames)], "samples/humanoid.py: Rigify human metarig, 5 effectors, 4 with poles, bone meshes"


def tentacle_rigs(frames: range) -> tuple[list, str]:
    """The 40-bone tentacle of samples/tentacle.py, every joint in a swing cone (Blender's IK limits)."""
    from samples import tentacle

    return [tentacle.build(frames)], (
        f"samples/tentacle.py: {tentacle.COUNT} bones, +-{tentacle.CONE:g} degree cones (IK limits X and Z), "
        "bone meshes"
    )


def hinged_hand_rigs(frames: range) -> tuple[list, str]:
    """The hand of samples/hand.py: its knuckles flex and spread, its finger joints are hinges (IK limits)."""
    from samples import hand

    return [hand.build(frames)], "samples/hand.py: palm + 5 fingers, knuckles in ranges, hinges (IK limits)"


def robot_arm_rigs(frames: range) -> tuple[list, str]:
    """The six-axis arm of samples/robot_arm.py: every joint a hinge (two axes locked, a range on the third)."""
    from samples import robot_arm

    return [robot_arm.build(frames)], "samples/robot_arm.py: 6 hinge joints (IK limits), warm starts as the sample sets"


#: Frames between two keyed target poses of a rig class: smooth motion, a new reachable pose every second.
KEY_STEP = 24


def class_rigs(build: str, note: str, jump_every: int = 0) -> Callable:
    """A rig class of samples/rig_classes.py (as `benchmarks/limits.py` measures its reach), live: each effector's
    target keyed every KEY_STEP frames at a pose the rig reaches (forward kinematics of random poses inside its
    limits, the same in every scene and run), Blender's smooth interpolation between; its poles where it has them.
    With `jump_every`, the target moves smoothly from one such pose to the next over that many frames, then jumps
    to a third one."""
    def builder(frames: range) -> tuple[list, str]:
        from mathutils import Matrix

        from samples import rig_classes

        case = getattr(rig_classes, build)()
        rig = case.obj
        if jump_every:
            starts = range(frames.start, frames.stop + jump_every, jump_every)
            keys = [frame for start in starts for frame in (start, start + jump_every - 1)]
        else:
            keys = range(frames.start, frames.stop + KEY_STEP, KEY_STEP)
        samples = rig_classes.random_targets(case, np.random.default_rng(11), len(keys))
        for k, spec in enumerate(case.effectors):
            target = rigbuild.make_target(f"{rig.name}_T{k}", (0.0, 0.0, 0.0), size=0.05)
            target.rotation_mode = "QUATERNION"
            previous = None
            for frame, sample in zip(keys, samples):
                location, rotation = sample[k]
                matrix = Matrix(rotation).to_4x4() if rotation is not None else Matrix.Identity(4)
                matrix.translation = location
                target.matrix_world = rig.matrix_world @ matrix
                target.keyframe_insert("location", frame=frame)
                if rotation is not None:
                    # Blender interpolates the components: each key on the previous one's side, the short way.
                    if previous is not None:
                        turned = target.rotation_quaternion.copy()
                        turned.make_compatible(previous)
                        target.rotation_quaternion = turned
                    previous = target.rotation_quaternion.copy()
                    target.keyframe_insert("rotation_quaternion", frame=frame)
            effector = rigbuild.add_effector(rig, spec.bone, target, chain_length=spec.chain_length)
            effector.use_rotation = spec.rotation
            if spec.pole:
                effector.pole_target, effector.pole_angle = bpy.data.objects[spec.pole], spec.pole_angle
        jumps = f"; every {jump_every} frames the target jumps to another reachable pose" if jump_every else ""
        return [rig], note + jumps
    return builder


#: How far Rigify's IK controls move along their limbs, out and in (metres): out, the arms and legs stretch.
RIGIFY_SWING = 0.25
#: Frames per swing out and back.
RIGIFY_PERIOD = 48


def rigify_offset(frame: int) -> float:
    """How far out along its limb each IK control of the Rigify row stands at a frame (negative: in)."""
    return RIGIFY_SWING * math.sin(2.0 * math.pi * frame / RIGIFY_PERIOD)


def rigify_rigs(frames: range) -> tuple[list, str]:
    """A human Rigify generates from its metarig (about 700 bones), its arms and legs switched to IK, converted
    (Convert IK Constraints, IK Stretch kept on); each hand and foot control swings out along its limb, beyond
    reach, and back in."""
    with quiet():  # (Rigify prints a line a step)
        rig = rigbuild.generated_rigify()
    for obj in list(bpy.context.scene.objects):  # (the metarig it came from: not part of the measure)
        if obj.type == "ARMATURE" and obj is not rig:
            bpy.data.objects.remove(obj)
    for side in "LR":
        rig.pose.bones[f"upper_arm_parent.{side}"]["IK_FK"] = 0.0
        rig.pose.bones[f"thigh_parent.{side}"]["IK_FK"] = 0.0
    # Rigify drives its IK constraints' mute (the IK/FK switch): drop those drivers, or they unmute them again.
    for fcurve in list(rig.animation_data.drivers):
        if "_ik" in fcurve.data_path and ".constraints[" in fcurve.data_path:
            rig.animation_data.drivers.remove(fcurve)
    converted, _ = constraints.convert_ik_constraints(rig)
    assert len(converted) == 4 and all(e.use_stretch for e in rig.fabrik.effectors), converted
    bones = rig.data.bones
    for control, base in (("hand_ik", "upper_arm_ik"), ("foot_ik", "thigh_ik")):
        for side in "LR":
            pose_bone = rig.pose.bones[f"{control}.{side}"]
            rest = bones[f"{control}.{side}"].matrix_local
            outward = (rest.translation - bones[f"{base}.{side}"].head_local).normalized()
            along = rest.to_3x3().inverted() @ outward  # (a control's location is in its own rest axes)
            for frame in frames:
                pose_bone.location = along * rigify_offset(frame)
                pose_bone.keyframe_insert("location", frame=frame)
    return [rig], "Rigify's generated human, 4 IK limbs converted with IK Stretch, controls swinging out of reach"


def mocap_rigs(frames: range) -> tuple[list, str]:
    """The motion-capture character of benchmarks/mocap.py: hips keyed every frame, hands, feet and head followed."""
    import mocap

    return [mocap.build(frames)], (
        "benchmarks/mocap.py: 52 bones, hips animated, 3-bone arms from the collar and 2-bone legs with poles, "
        "a head chain through the chest"
    )


def mocap_pinned_rigs(frames: range) -> tuple[list, str]:
    """The motion-capture character with its feet pinned while they stand (`mocap.pin_feet`)."""
    import mocap

    (rig,), note = mocap_rigs(frames)
    mocap.pin_feet(rig, frames)
    return [rig], note + "; each foot pinned over the frames it stands"


def mocap_root_rigs(frames: range) -> tuple[list, str]:
    """The motion-capture character with its feet pinned and its hips free to follow the pull (`mocap.free_root`)."""
    import mocap

    (rig,), note = mocap_pinned_rigs(frames)
    mocap.free_root(rig)
    return [rig], note + "; the hips free to follow half the pull, within 0.2 m and 10 degrees (Root: Free)"


def layout_rigs(make: Callable, note: str, copies: int = 1, jump_every: int = 0) -> Callable:
    """A builder of `copies` rigs of a layout, side by side (`jump_every`: as `add_layout`)."""
    def builder(frames: range) -> tuple[list, str]:
        # 6 units apart, five to a row: no rig reaches into another's space.
        offsets = [(6.0 * (k % 5), 6.0 * (k // 5), 0.0) for k in range(copies)]
        return [
            add_layout(make(), frames, f"Rig{k}", offset, jump_every) for k, offset in enumerate(offsets)
        ], note
    return builder


@contextlib.contextmanager
def quiet():
    """Send what Blender itself prints to stdout (it bypasses sys.stdout) to /dev/null for a while."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
