# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators: solve once, add and remove effectors."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty, IntProperty
from bpy.types import Operator

from . import constraints, solving


def _armature(context):
    """The active object when it is an armature, else None."""
    obj = context.object
    return obj if obj is not None and obj.type == 'ARMATURE' else None


class FABRIK_OT_solve(Operator):
    """Solve the active armature's effectors once at the current frame and pose the rig"""

    bl_idname = "fabrik.solve"
    bl_label = "Solve Now"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return _armature(context) is not None

    def execute(self, context):
        obj = _armature(context)
        try:
            result = solving.solve_object(obj, context.evaluated_depsgraph_get())
        except ValueError as exc:
            self.report({'ERROR'}, str(exc))
            return {'CANCELLED'}
        level = {'INFO'} if result.ok else {'WARNING'}
        self.report(level, f"FABRIK '{obj.name}': {result.message}")
        return {'FINISHED'}


class FABRIK_OT_effector_add(Operator):
    """Add an effector for the active bone; a selected other object becomes its target"""

    bl_idname = "fabrik.effector_add"
    bl_label = "Add Effector"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return _armature(context) is not None

    def execute(self, context):
        obj = _armature(context)
        effector = obj.fabrik.effectors.add()
        bone = context.active_pose_bone or (obj.data.bones.active and obj.pose.bones.get(obj.data.bones.active.name))
        if bone is not None:
            effector.bone = bone.name
        others = [o for o in context.selected_objects if o is not obj]
        if others:
            effector.target = others[0]
        obj.fabrik.active_effector = len(obj.fabrik.effectors) - 1
        self.report({'INFO'}, f"Added effector for '{effector.bone or '(no bone)'}'")
        return {'FINISHED'}


class FABRIK_OT_effector_remove(Operator):
    """Remove the selected effector (the bones keep their current pose)"""

    bl_idname = "fabrik.effector_remove"
    bl_label = "Remove Effector"
    bl_options = {'REGISTER', 'UNDO'}

    index: IntProperty(name="Index", default=-1, description="Effector to remove (-1: the active one)")

    @classmethod
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def execute(self, context):
        settings = _armature(context).fabrik
        index = settings.active_effector if self.index < 0 else self.index
        if not 0 <= index < len(settings.effectors):
            self.report({'ERROR'}, f"No effector {index}")
            return {'CANCELLED'}
        name = settings.effectors[index].bone
        settings.effectors.remove(index)
        settings.active_effector = max(0, min(settings.active_effector, len(settings.effectors) - 1))
        self.report({'INFO'}, f"Removed effector for '{name}'")
        return {'FINISHED'}


class FABRIK_OT_effector_move(Operator):
    """Move the active effector up or down the list (order matters only for reading; weights decide conflicts)"""

    bl_idname = "fabrik.effector_move"
    bl_label = "Move Effector"
    bl_options = {'REGISTER', 'UNDO'}

    direction: EnumProperty(name="Direction", items=(('UP', "Up", ""), ('DOWN', "Down", "")), default='UP')

    @classmethod
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and len(obj.fabrik.effectors) > 1

    def execute(self, context):
        settings = _armature(context).fabrik
        index = settings.active_effector
        other = index - 1 if self.direction == 'UP' else index + 1
        if not (0 <= index < len(settings.effectors) and 0 <= other < len(settings.effectors)):
            return {'CANCELLED'}
        settings.effectors.move(index, other)
        settings.active_effector = other
        self.report({'INFO'}, f"Moved effector '{settings.effectors[other].bone}' {self.direction.lower()}")
        return {'FINISHED'}


class FABRIK_OT_convert_constraints(Operator):
    """Turn the armature's Blender IK constraints into FABRIK effectors and mute the constraints"""

    bl_idname = "fabrik.convert_constraints"
    bl_label = "Convert IK Constraints"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return _armature(context) is not None

    def execute(self, context):
        obj = _armature(context)
        converted, skipped = constraints.convert_ik_constraints(obj)
        for reason in skipped:
            self.report({'WARNING'}, f"Skipped {reason}")
        if not converted:
            self.report({'WARNING'} if skipped else {'INFO'}, "No IK constraint to convert")
            return {'CANCELLED'} if not skipped else {'FINISHED'}
        self.report({'INFO'}, f"Converted {len(converted)} IK constraint(s) into effectors: {', '.join(converted)}")
        return {'FINISHED'}


class FABRIK_OT_restore_constraints(Operator):
    """Remove the effectors made from IK constraints and switch those constraints back on"""

    bl_idname = "fabrik.restore_constraints"
    bl_label = "Restore IK Constraints"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and any(e.source_constraint for e in obj.fabrik.effectors)

    def execute(self, context):
        restored = constraints.restore_ik_constraints(_armature(context))
        self.report({'INFO'}, f"Restored {len(restored)} IK constraint(s)" + (f": {', '.join(restored)}" if restored else ""))
        return {'FINISHED'}


classes = (
    FABRIK_OT_solve,
    FABRIK_OT_effector_add,
    FABRIK_OT_effector_remove,
    FABRIK_OT_effector_move,
    FABRIK_OT_convert_constraints,
    FABRIK_OT_restore_constraints,
)

register, unregister = bpy.utils.register_classes_factory(classes)
