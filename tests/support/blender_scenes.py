# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for tests that run the real bpy module: a clean scene, the registered add-on, measurements."""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np

from samples import rigbuild

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]
#: Per sample: the armature it saves, the bone of its first effector, and its Start From.
SAMPLE_ARMATURES = {
    "chain": ("Arm", "arm5", "FK"),
    "robot_arm": ("RobotArm", "gripper", "PREVIOUS"),
    "tentacle": ("Tentacle", "seg39", "FK"),
    "hand": ("Hand", "thumb2", "FK"),
    "hexapod": ("Hexapod", "tibia_front_L", "FK"),
    "humanoid": ("Human", "shin.L", "FK"),
    "ur5": ("UR5", "link6", "PREVIOUS"),
}


def empty_scene() -> None:
    """Start from an empty file (the add-on's classes and handlers stay registered)."""
    bpy.ops.wm.read_factory_settings(use_empty=True)


def tip_world(rig, bone: str):
    """World position of a bone's tail as Blender evaluates it."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    return evaluated.matrix_world @ evaluated.pose.bones[bone].tail


def target_world(obj):
    """World position of an object as Blender evaluates it."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    return obj.evaluated_get(depsgraph).matrix_world.translation.copy()


def rotation_channels(rig):
    """Every rotation channel of every pose bone, in every mode, as one array (single precision, as stored)."""
    parts = []
    for channel, size in (("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4)):
        values = np.empty(len(rig.pose.bones) * size, dtype=np.float32)
        rig.pose.bones.foreach_get(channel, values)
        parts.append(values)
    return np.concatenate(parts)


def chain_rig(count: int = 4, length: float = 1.0, target_at=(1.5, 0.0, 2.5), live: bool = True):
    """A connected chain along +Z with one effector on its last bone and an empty as target."""
    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(count, length))
    target = rigbuild.make_target("Target", target_at)
    rigbuild.add_effector(rig, f"bone{count - 1}", target)
    rig.fabrik.live = live
    bpy.context.view_layer.objects.active = rig
    return rig, target


class RecordingLayout:
    """A stand-in for UILayout: panels cannot draw in background mode, so their calls are recorded instead."""

    def __init__(self, log):
        self.log = log
        self.active = True

    def __getattr__(self, name):
        if name in {"row", "column", "box", "split"}:
            return lambda *args, **kwargs: RecordingLayout(self.log)

        def record(*args, **kwargs):
            self.log.append((name, args, kwargs))
            return RecordingLayout(self.log)

        return record
