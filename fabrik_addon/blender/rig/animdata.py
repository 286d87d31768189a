# SPDX-License-Identifier: GPL-3.0-or-later
"""Animation data and selection on every Blender we support: the one place that knows the differences.

Blender 4.4 brought layered actions (action -> layer -> strip -> channelbag
per slot) and 5.0 removed `Action.fcurves`; older Blender keeps F-curves on
the action itself.
"""

from __future__ import annotations

import bpy

from . import memory

try:  # Blender 4.4 and newer
    from bpy_extras.anim_utils import action_ensure_channelbag_for_slot, action_get_channelbag_for_slot
except ImportError:  # older Blender: F-curves live on the action
    action_ensure_channelbag_for_slot = action_get_channelbag_for_slot = None

LAYERED = action_ensure_channelbag_for_slot is not None


def ensure_action(obj: bpy.types.Object, new: bool, name: str):
    """The action to key into: the object's active one, or a new one (assigned, with a slot where needed)."""
    animation_data = obj.animation_data_create()
    action = None if new else animation_data.action
    if action is None:
        action = bpy.data.actions.new(name)
        animation_data.action = action
    if LAYERED and animation_data.action_slot is None:
        slot = action.slots.new(obj.id_type, obj.name)
        animation_data.action_slot = slot
    return action


def fcurves(obj: bpy.types.Object, create: bool = False):
    """The F-curve collection the object's animation uses (None when it has none and create is False)."""
    animation_data = obj.animation_data
    if animation_data is None or animation_data.action is None:
        return None
    action = animation_data.action
    if not LAYERED:
        return action.fcurves
    slot = animation_data.action_slot
    if slot is None:
        return None
    if create:
        return action_ensure_channelbag_for_slot(action, slot).fcurves
    channelbag = action_get_channelbag_for_slot(action, slot)
    return None if channelbag is None else channelbag.fcurves


def fcurve_paths(obj: bpy.types.Object, collection=None) -> frozenset[str]:
    """The data paths the object's F-curves (`fcurves`, or `collection` where the caller has it) animate, read
    again only when its action, its slot or the number of F-curves changes (live solving asks on every frame;
    kept with the rig's memory)."""
    collection = fcurves(obj) if collection is None else collection
    if collection is None:
        return frozenset()
    animation_data = obj.animation_data
    slot = getattr(animation_data, "action_slot", None)
    key = (animation_data.action.as_pointer(), slot.as_pointer() if slot is not None else 0, len(collection))
    kept = memory.of(obj)
    known = kept.fcurve_paths
    if known is None or known[0] != key:
        known = kept.fcurve_paths = (key, frozenset(fcurve.data_path for fcurve in collection))
    return known[1]


def ensure_fcurve(collection, data_path: str, index: int, group: str):
    """The F-curve for data_path[index] in the collection, made (in `group`) if it is missing."""
    fcurve = collection.find(data_path, index=index)
    if fcurve is None:
        fcurve = collection.new(data_path, index=index, action_group=group) if not LAYERED else collection.new(
            data_path, index=index, group_name=group
        )
    return fcurve


def is_selected(pose_bone: bpy.types.PoseBone) -> bool:
    """Whether a pose bone is selected (5.0 moved selection from the Bone to the pose bone)."""
    return pose_bone.select if hasattr(pose_bone, "select") else pose_bone.bone.select


def set_selected(pose_bone: bpy.types.PoseBone, state: bool) -> None:
    """Select or deselect a pose bone."""
    if hasattr(pose_bone, "select"):
        pose_bone.select = state
    else:
        pose_bone.bone.select = state


def animated_paths(obj: bpy.types.Object) -> list[str] | None:
    """Data paths the object's drivers and active action animate; None when NLA tracks may animate anything."""
    animation_data = obj.animation_data
    if animation_data is None:
        return []
    if len(animation_data.nla_tracks):
        return None
    paths = [driver.data_path for driver in animation_data.drivers]
    collection = fcurves(obj)
    if collection is not None:
        paths += [fcurve.data_path for fcurve in collection]
    return paths
