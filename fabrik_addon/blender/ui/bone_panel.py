# SPDX-License-Identifier: GPL-3.0-or-later
"""The FABRIK sub-panel of Bone properties > Inverse Kinematics: the bone's IK limits and stretch as FABRIK reads
them, where a rig built for Blender's IK sets them."""

from __future__ import annotations

import bpy
from bpy.types import Panel

from ..rig import armature
from . import presets
from .wrapping import draw_wrapped, room_for, split

#: The limits sub-panel's help (wrapped to the editor's width).
LIMITS_HELP = (
    "X and Z swing the bone: together an elliptical cone round its rest direction. "
    "Lock one of them for a hinge. Y twists it about itself. "
    "Stiffness makes it turn less; the rest of the chain makes up for it."
)


class BONE_PT_fabrik_limits(Panel):
    """The bone's IK limits and stretch as FABRIK uses them: Blender's own settings (the panel above greys them
    out for bones outside an IK constraint's chain; FABRIK chains read them all the same)"""

    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "bone"
    bl_label = "FABRIK Limits"
    bl_parent_id = "BONE_PT_inverse_kinematics"  # Blender's own panel, with this id in 3.4 through 5.0

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return cls.pose_bone(context) is not None

    @staticmethod
    def pose_bone(context: bpy.types.Context):
        """The pose bone the Bone properties show (their bone, else the active pose bone)."""
        obj = getattr(context, "object", None)
        if obj is None or obj.type != 'ARMATURE' or obj.pose is None:
            return None
        bone = getattr(context, "bone", None)
        if bone is not None and bone.name in obj.pose.bones:
            return obj.pose.bones[bone.name]
        return getattr(context, "active_pose_bone", None)

    def draw(self, context: bpy.types.Context):
        layout = self.layout
        pose_bone = BONE_PT_fabrik_limits.pose_bone(context)
        obj = context.object
        room = room_for(context)
        users = [e.name or e.bone for e in obj.fabrik.effectors
                 if pose_bone.name in armature.chain_bones(obj, e.bone, e.chain_length)]
        if users:
            draw_wrapped(layout, f"In the chain of {', '.join(users)}", room, 'CON_KINEMATIC')
        draw_wrapped(layout, LIMITS_HELP, room, 'INFO')
        presets.draw_preset_header(layout, presets.FABRIK_MT_bone_limits_presets, "fabrik.bone_limits_preset_add")
        split(layout)
        layout.prop(pose_bone, "ik_stretch", text="IK Stretch", slider=True)
        column = layout.column(align=True)
        column.prop(pose_bone, "lock_ik_x", text="Lock Swing X")
        column.prop(pose_bone, "lock_ik_y", text="Twist Y")
        column.prop(pose_bone, "lock_ik_z", text="Swing Z")
        column = layout.column(align=True)
        for axis, label in (("x", "Stiffness X"), ("y", "Y"), ("z", "Z")):
            sub = column.column(align=True)
            sub.active = not getattr(pose_bone, f"lock_ik_{axis}")
            sub.prop(pose_bone, f"ik_stiffness_{axis}", text=label, slider=True)
        column = layout.column(align=True)
        for axis, label in (("x", "Limit Swing X"), ("y", "Limit Twist Y"), ("z", "Limit Swing Z")):
            locked = getattr(pose_bone, f"lock_ik_{axis}")
            sub = column.column()
            sub.active = not locked
            sub.prop(pose_bone, f"use_ik_limit_{axis}", text=label)
            sub = column.column(align=True)
            sub.active = not locked and getattr(pose_bone, f"use_ik_limit_{axis}")
            sub.prop(pose_bone, f"ik_min_{axis}", text="Min")
            sub.prop(pose_bone, f"ik_max_{axis}", text="Max")
            column.separator()
        problems = [p for p in armature.limit_problems(obj) if p.startswith(f"bone '{pose_bone.name}'")]
        for problem in problems:
            draw_wrapped(layout, problem, room, 'ERROR', True)


classes = (BONE_PT_fabrik_limits,)

register, unregister = bpy.utils.register_classes_factory(classes)
