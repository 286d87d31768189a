# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators for retargeting a captured clip onto the rig: map its bones, and retarget in one click."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty
from bpy.types import Operator

from . import editable, retarget
from .setup_ops import rig_for_panel


class FABRIK_OT_retarget_map(Operator):
    """Map the clip's bones and the rig's onto body parts by their names (Mixamo, BVH, Rigify, Unreal, Rokoko \
and more), replacing the list; edit the list for the rest"""

    bl_idname = "fabrik.retarget_map"
    bl_label = "Map Bones"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        obj = rig_for_panel(context)
        return obj is not None and obj.fabrik.retarget_source is not None

    def execute(self, context):
        obj = rig_for_panel(context)
        missing = retarget.map_bones(obj)
        mapped = len(retarget.mapping(obj))
        if missing:
            self.report({'WARNING'}, f"Mapped {mapped} parts; no bones found for {', '.join(missing)}: pick them in "
                        "the list")
        else:
            self.report({'INFO'}, f"Mapped {mapped} parts of '{obj.fabrik.retarget_source.name}' onto '{obj.name}'")
        return {'FINISHED'}


class FABRIK_OT_retarget(Operator):
    """Put the clip's motion on the rig: targets and poles that follow the clip scaled to the rig's legs, the \
hips following, effectors on wrists, ankles and neck, the feet pinned where they stand, then bake (sets the \
scene's frame range to the clip's and turns Live Solving on)"""

    bl_idname = "fabrik.retarget"
    bl_label = "Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    find_contacts: BoolProperty(name="Pin the Feet", default=True,
                                description="Find where the clip's feet stand and pin them there")
    bake: BoolProperty(name="Bake", default=True,
                       description="Bake the retargeted motion into keys (progress in the status bar, Esc cancels)")

    @classmethod
    def poll(cls, context):
        obj = rig_for_panel(context)
        return obj is not None and obj.fabrik.retarget_source is not None

    def execute(self, context):
        obj, scene = rig_for_panel(context), context.scene
        mapped_here = not retarget.mapping(obj)
        if mapped_here:
            retarget.map_bones(obj)
        refused = retarget.refusal(obj) or editable.keys_editable(obj)
        if refused:
            if mapped_here:
                obj.fabrik.retarget_bones.clear()  # (a refusal changes nothing: Map Bones shows what it finds)
            self.report({'ERROR'}, f"Cannot retarget: {refused}")
            return {'CANCELLED'}
        try:
            made = retarget.setup(obj, scene)
        except Exception as exc:  # never raise into Blender
            self.report({'ERROR'}, f"Cannot retarget: {exc}")
            return {'CANCELLED'}
        span = retarget.frame_range(obj)
        if span is not None:
            scene.frame_start, scene.frame_end = span
        obj.fabrik.live = True
        pinned = 0
        if self.find_contacts and span is not None:
            try:
                keyed, skipped = retarget.pin_feet(obj, scene, span)
                pinned = sum(len(spans) for spans in keyed.values())
                for name, why in skipped.items():
                    self.report({'WARNING'}, f"'{name}' not pinned: {why}")
            except Exception as exc:  # (the retarget stands without pins)
                self.report({'WARNING'}, f"No feet pinned: {exc}")
        self.report({'INFO'}, f"Retargeted '{obj.fabrik.retarget_source.name}' onto '{obj.name}': "
                    f"{len(made)} effectors, {pinned} foot contact(s) pinned")
        if self.bake and span is not None:
            try:
                retarget.bake_hips(obj, *span)
            except Exception as exc:  # never raise into Blender
                self.report({'ERROR'}, f"Retargeted, but the hips could not be baked: {exc}")
                return {'FINISHED'}
            # The chains' bake shows progress and Esc cancels it (the hips keep their keys: undo takes them back).
            try:
                bpy.ops.fabrik.bake('INVOKE_DEFAULT', frame_start=span[0], frame_end=span[1])
            except RuntimeError as exc:  # (the bake said why; the retarget stands)
                self.report({'WARNING'}, f"Retargeted, but not baked: {exc}")
        return {'FINISHED'}


class FABRIK_OT_retarget_remove(Operator):
    """Take the retarget away: the effectors it made and their pins, its empties, the hips' constraint, and a generated Rigify rig's IK/FK switches back as they were (the baked keys stay)"""

    bl_idname = "fabrik.retarget_remove"
    bl_label = "Remove Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        obj = rig_for_panel(context)
        return obj is not None and obj.type == 'ARMATURE' and retarget.made_here(obj)

    def execute(self, context):
        obj = rig_for_panel(context)
        refused = editable.editable(obj)
        if refused:
            self.report({'ERROR'}, f"Cannot remove the retarget: {refused}")
            return {'CANCELLED'}
        removed = retarget.take_away(obj)
        self.report({'INFO'}, f"Removed the retarget from '{obj.name}' ({removed} effectors); its keys stay")
        return {'FINISHED'}


classes = (FABRIK_OT_retarget_map, FABRIK_OT_retarget, FABRIK_OT_retarget_remove)

register, unregister = bpy.utils.register_classes_factory(classes)
