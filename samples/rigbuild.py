# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers the sample scripts share: build an armature from a bone list, add targets, animate them."""

from __future__ import annotations

import math
from typing import Sequence

import bpy

Bone = tuple  # (name, head, tail, parent name or None, connected)


def make_armature(name: str, bones: Sequence[Bone], location=(0.0, 0.0, 0.0)):
    """A new armature object linked to the scene, with bones given as (name, head, tail, parent, connected)."""
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    view_layer = bpy.context.view_layer
    previous_active = view_layer.objects.active
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode='EDIT')
    for bone_name, head, tail, parent, connected in bones:
        edit_bone = data.edit_bones.new(bone_name)
        edit_bone.head, edit_bone.tail = head, tail
        if parent:
            edit_bone.parent = data.edit_bones[parent]
            edit_bone.use_connect = connected
    bpy.ops.object.mode_set(mode='OBJECT')
    if previous_active is not None:
        view_layer.objects.active = previous_active
    return obj


def make_target(name: str, location, size: float = 0.2):
    """An empty to use as an IK target."""
    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = 'SPHERE'
    obj.empty_display_size = size
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    return obj


def add_effector(rig, bone: str, target, chain_length: int = 0, weight: float = 1.0):
    """Add a FABRIK effector to the rig (the add-on must be enabled)."""
    effector = rig.fabrik.effectors.add()
    effector.bone, effector.target = bone, target
    effector.chain_length, effector.weight = chain_length, weight
    return effector


def key_circle(obj, center, radius: float, frames: range, axis: str = 'XY', turns: float = 1.0) -> None:
    """Keyframe obj's location on a circle in the given plane, one key per frame."""
    a, b = 'XYZ'.index(axis[0]), 'XYZ'.index(axis[1])
    for frame in frames:
        angle = 2.0 * math.pi * turns * (frame - frames.start) / max(1, len(frames))
        location = list(center)
        location[a] += radius * math.cos(angle)
        location[b] += radius * math.sin(angle)
        obj.location = location
        obj.keyframe_insert("location", frame=frame)


def chain_bones(count: int, length: float, prefix: str = "bone", start=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)) -> list[Bone]:
    """A connected chain of equal bones along an axis."""
    bones = []
    for i in range(count):
        head = tuple(start[k] + axis[k] * length * i for k in range(3))
        tail = tuple(start[k] + axis[k] * length * (i + 1) for k in range(3))
        bones.append((f"{prefix}{i}", head, tail, f"{prefix}{i - 1}" if i else None, True))
    return bones
