# SPDX-License-Identifier: GPL-3.0-or-later
"""The FABRIK tab in the 3D viewport sidebar."""

from __future__ import annotations

import bpy
from bpy.types import Panel, UIList

from . import rig, solving


class FABRIK_UL_effectors(UIList):
    """Effectors of an armature: tip bone, target and the last solve's status."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.prop(item, "enabled", text="")
        split = row.split(factor=0.55, align=True)
        target = item.target.name if item.target else "(no target)"
        split.label(text=f"{item.bone or '(no bone)'} → {target}", icon='BONE_DATA')
        rig_status = solving.status.get(data.id_data.name)
        if rig_status is not None and index in rig_status.effectors:
            reached = rig_status.reached.get(index)
            status_row = split.row(align=True)
            status_row.alert = reached is False  # solved, but short of its target: red, like Blender's warnings
            icon = 'CHECKMARK' if reached else ('ERROR' if reached is False else 'CANCEL')
            status_row.label(text=rig_status.effectors[index], icon=icon)


class VIEW3D_PT_fabrik(Panel):
    """Effectors and solver settings of the active armature"""

    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"
    bl_label = "FABRIK"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.type == 'ARMATURE'

    def draw(self, context):
        layout = self.layout
        obj = context.object
        settings = obj.fabrik
        layout.prop(settings, "live")
        row = layout.row()
        row.template_list("FABRIK_UL_effectors", "", settings, "effectors", settings, "active_effector", rows=3)
        column = row.column(align=True)
        column.operator("fabrik.effector_add", icon='ADD', text="")
        column.operator("fabrik.effector_remove", icon='REMOVE', text="")
        column.separator()
        column.operator("fabrik.effector_move", icon='TRIA_UP', text="").direction = 'UP'
        column.operator("fabrik.effector_move", icon='TRIA_DOWN', text="").direction = 'DOWN'
        if 0 <= settings.active_effector < len(settings.effectors):
            effector = settings.effectors[settings.active_effector]
            box = layout.box()
            box.prop_search(effector, "bone", obj.data, "bones")
            box.prop(effector, "target")
            if effector.target is not None and effector.target.type == 'ARMATURE':
                box.prop_search(effector, "subtarget", effector.target.data, "bones")
            box.prop(effector, "chain_length")
            box.prop(effector, "weight")
            box.prop(effector, "use_stretch")
            row = box.row(align=True)
            row.prop(effector, "use_rotation")
            sub = row.row(align=True)
            sub.active = effector.use_rotation
            sub.prop(effector, "rotation_weight", text="Weight")
            row = box.row(align=True)
            row.enabled = effector.target is not None
            row.label(text="Animate Target:")
            for preset, label in (('CIRCLE', "Circle"), ('FIGURE_EIGHT', "Figure-Eight")):
                op = row.operator("fabrik.target_motion", text=label)
                op.preset, op.effector_target = preset, True
            box.prop(effector, "pole_target")
            if effector.pole_target is not None:
                if effector.pole_target.type == 'ARMATURE':
                    box.prop_search(effector, "pole_subtarget", effector.pole_target.data, "bones")
                box.prop(effector, "pole_angle")
            if effector.source_constraint:
                box.label(text=f"From IK constraint '{effector.source_constraint}' on '{effector.source_bone}'", icon='CONSTRAINT_BONE')
        layout.prop(settings, "solver")
        column = layout.column(align=True)
        column.prop(settings, "iterations")
        column.prop(settings, "tolerance")
        layout.prop(settings, "start")
        row = layout.row(align=True)
        row.operator("fabrik.solve", icon='CON_KINEMATIC')
        row.operator("fabrik.bake", icon='KEYINGSET')
        row = layout.row(align=True)
        row.operator("fabrik.convert_constraints", icon='CONSTRAINT_BONE')
        row.operator("fabrik.restore_constraints", text="Restore", icon='LOOP_BACK')
        rig_status = solving.status.get(obj.name)
        if rig_status is not None and rig_status.message:
            row = layout.row()
            row.alert = not rig_status.ok or rig_status.missed
            icon = 'CANCEL' if not rig_status.ok else ('ERROR' if rig_status.missed else 'CHECKMARK')
            row.label(text=rig_status.message, icon=icon)


class BONE_PT_fabrik_limits(Panel):
    """The bone's IK limits and stretch as FABRIK uses them (the same settings Blender's IK constraint reads)"""

    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "bone"
    bl_label = "FABRIK Limits"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        obj = context.object
        return obj is not None and obj.type == 'ARMATURE' and context.active_pose_bone is not None

    def draw(self, context):
        layout = self.layout
        pose_bone = context.active_pose_bone
        column = layout.column(align=True)
        column.label(text="X and Z tip the bone over: together an elliptical cone around its rest direction.")
        column.label(text="Lock one of them for a hinge. Y is the twist about the bone itself.")
        column.label(text="Stiffness makes the bone turn less; the rest of the chain makes up for it.")
        for axis in "xyz":
            box = layout.box()
            row = box.row(align=True)
            row.label(text=f"{axis.upper()} {'twist' if axis == 'y' else 'swing'}")
            row.prop(pose_bone, f"lock_ik_{axis}", text="Lock")
            row.prop(pose_bone, f"use_ik_limit_{axis}", text="Limit")
            sub = box.row(align=True)
            sub.active = getattr(pose_bone, f"use_ik_limit_{axis}") and not getattr(pose_bone, f"lock_ik_{axis}")
            sub.prop(pose_bone, f"ik_min_{axis}", text="Min")
            sub.prop(pose_bone, f"ik_max_{axis}", text="Max")
            box.prop(pose_bone, f"ik_stiffness_{axis}", text="Stiffness", slider=True)
        layout.prop(pose_bone, "ik_stretch", text="IK Stretch", slider=True)
        obj = context.object
        problems = [p for p in rig.limit_problems(obj) if p.startswith(f"bone '{pose_bone.name}'")]
        for problem in problems:
            layout.label(text=problem, icon='ERROR')


classes = (FABRIK_UL_effectors, VIEW3D_PT_fabrik, BONE_PT_fabrik_limits)

register, unregister = bpy.utils.register_classes_factory(classes)
