# SPDX-License-Identifier: GPL-3.0-or-later
"""The FABRIK tab in the 3D viewport sidebar (the Bone properties' sub-panel: `bone_panel`).

Laid out as Blender's own property panels are: labels left of their values (`use_property_split`), keyframe
dots beside what can be animated (`use_property_decorate`), and sub-panels (`bl_parent_id`) instead of one
long panel. Status lines are wrapped to the region's width (`wrapping`), so the whole message can be read.
"""

from __future__ import annotations

import math

import bpy
from bpy.types import Panel, UIList

from ..effectors import integrity, pins
from ..retarget import rests, setup
from ..rig import armature, memory, moving_root
from ..rig.props import FabrikEffector, effector_label
from ..rig.status import DISABLED, RigStatus, statuses
from . import compare, presets, setup_ops
from .wrapping import MARGIN_PIXELS, draw_wrapped, room_for, split

#: Per effector status kind: (icon, alert). Reached: a check mark; a miss (solved, but farther than the
#: tolerance): a warning, Blender's triangle without red (the viewport draws it yellow); bad input or a refusal
#: (nothing solved): a cancel sign in red.
STATUS_ICONS = {
    'REACHED': ('CHECKMARK', False),
    'MISSED': ('ERROR', False),
    'ERROR': ('CANCEL', True),
    'DISABLED': ('HIDE_ON', False),
    'NONE': ('INFO', False),
}


def effector_state(obj: bpy.types.Object, index: int) -> tuple[str, str]:
    """(kind, message) of one effector from its rig's last solve: kind is a key of STATUS_ICONS."""
    effectors = obj.fabrik.effectors
    if 0 <= index < len(effectors) and not effectors[index].enabled:
        return 'DISABLED', DISABLED
    rig_status = statuses.get(obj.name)
    kind = 'NONE' if rig_status is None else rig_status.kind(index)
    if kind == 'NONE':
        return kind, "not solved yet"
    message = rig_status.effectors.get(index, "")
    if kind == 'ERROR':
        return kind, message or rig_status.message
    return kind, message or (DISABLED if kind == 'DISABLED' else "")


def rig_state(rig_status: RigStatus) -> str:
    """The kind (a key of STATUS_ICONS) of a rig's last solve as a whole."""
    if not rig_status.ok:
        return 'ERROR'
    if not rig_status.reached:
        return 'NONE'  # nothing solved (a solve put off to the next update, say): no success to show
    return 'MISSED' if rig_status.missed else 'REACHED'


def invalid_fields(obj: bpy.types.Object, effector: FabrikEffector) -> set[str]:
    """The effector's fields that name something that is not there, so the panel draws them in red."""
    bad = set(integrity.missing_bones(obj, effector))
    if not effector.bone:
        bad.add("bone")
    elif "bone" not in bad and effector.bone in obj.data.bones:
        if effector.chain_length > len(armature.chain_bones(obj, effector.bone, 0)):
            bad.add("chain_length")  # longer than the bones up to the root
    if effector.target is None:
        bad.add("target")
    elif effector.subtarget and effector.target.type != 'ARMATURE':
        bad.add("subtarget")
    pole = effector.pole_target
    if pole is None and effector.lost_pole:
        bad.add("pole_target")
    elif pole is not None and effector.pole_subtarget and pole.type != 'ARMATURE':
        bad.add("pole_subtarget")
    return bad


def _stacked(layout: bpy.types.UILayout, label: str, alert: bool = False):
    """A label above a row as wide as the panel, for names and choices that a label beside them would cut at
    the sidebar's default width (none of them can be keyed, so they need no keyframe dot)."""
    column = layout.column(align=True)
    column.use_property_split = False
    column.use_property_decorate = False
    column.label(text=label)
    row = column.row(align=True)
    row.alert = alert
    return row


class FABRIK_UL_effectors(UIList):
    """Effectors of an armature: the name (double-click renames it) and an icon for the last solve's status."""

    def draw_item(
        self, context: bpy.types.Context, layout: bpy.types.UILayout, data, item, icon, active_data,
        active_propname, index
    ):
        obj = data.id_data
        kind, _message = effector_state(obj, index)
        status_icon, alert = STATUS_ICONS[kind]
        bad = bool(invalid_fields(obj, item))
        if getattr(self, "layout_type", 'DEFAULT') == 'GRID':
            layout.label(text="", icon=status_icon)
            return
        row = layout.row(align=True)
        row.active = kind != 'DISABLED'  # switched off (by its checkbox or the rig's switch): greyed, not red
        row.prop(item, "enabled", text="")
        name = row.row(align=True)
        name.alert = bad  # a missing bone or target: the row's name in red, as Blender marks invalid fields
        if item.name:
            name.prop(item, "name", text="", emboss=False)
        else:
            name.label(text=item.bone or "(no bone)")
        mark = row.row(align=True)
        mark.alert = alert
        mark.label(text="", icon=status_icon)


class FABRIK_UL_retarget_bones(UIList):
    """A retarget's mapping: each body part with the clip's bone and the rig's (red where one is missing)."""

    def draw_item(
        self, context: bpy.types.Context, layout: bpy.types.UILayout, data, item, icon, active_data,
        active_propname, index
    ):
        row = layout.row(align=True)
        row.alert = not (item.source and item.target)
        row.label(text=item.name)
        row.label(text=item.source or "-")
        row.label(text=item.target or "-")


class FabrikSidebarPanel:
    """What the FABRIK tab's panels share: where they sit and the rig they show (the active armature, or the
    rig of the active target or pole, so the tab stays while a target is dragged)."""

    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "FABRIK"

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return setup_ops.rig_for_panel(context) is not None


class FabrikArmaturePanel(FabrikSidebarPanel):
    """A sub-panel only an armature has (not the rig of an active target)."""

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = setup_ops.rig_for_panel(context)
        return obj is not None and obj.type == 'ARMATURE'


class VIEW3D_PT_fabrik(FabrikSidebarPanel, Panel):
    """Effectors and live solving of the active armature"""

    bl_label = "FABRIK"

    def draw(self, context: bpy.types.Context):
        layout = self.layout
        obj = setup_ops.rig_for_panel(context)
        settings = obj.fabrik
        if obj != context.object:
            layout.label(text=f"Rig: {obj.name}", icon='ARMATURE_DATA')
        row = layout.row()
        row.template_list("FABRIK_UL_effectors", "", settings, "effectors", settings, "active_effector", rows=3)
        column = row.column(align=True)
        column.operator("fabrik.effector_add", icon='ADD', text="")
        column.operator("fabrik.effector_add_with_target", icon='EMPTY_AXIS', text="")
        column.operator("fabrik.effector_remove", icon='REMOVE', text="")
        column.separator()
        column.operator("fabrik.effector_move", icon='TRIA_UP', text="").direction = 'UP'
        column.operator("fabrik.effector_move", icon='TRIA_DOWN', text="").direction = 'DOWN'
        split(layout)
        column = layout.column(heading="Live")  # ("Live Solving" whole would be cut at the default width)
        column.prop(settings, "live", text="Solving")
        column.prop(settings, "influence", slider=True)
        row = layout.row(align=True)
        row.operator("fabrik.solve", icon='CON_KINEMATIC')
        row.operator("fabrik.bake", text="Bake", icon='KEYINGSET')
        row = layout.row(align=True)
        row.operator("fabrik.convert_constraints", text="Convert IK", icon='CONSTRAINT_BONE')
        row.operator("fabrik.restore_constraints", text="Restore", icon='LOOP_BACK')


class VIEW3D_PT_fabrik_status(FabrikSidebarPanel, Panel):
    """The last solve: the rig as a whole, then each effector, in full"""

    bl_label = "Status"
    bl_parent_id = "VIEW3D_PT_fabrik"

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        room = room_for(context)
        rig_status = statuses.get(obj.name)
        if rig_status is None or not rig_status.message:
            layout.label(text="Live solving off: the rig plays its own keys" if not obj.fabrik.live
                         else "Solving at the next update", icon='INFO')
        else:
            kind = rig_state(rig_status)
            icon, alert = STATUS_ICONS[kind]
            draw_wrapped(layout, rig_status.message, room, icon, alert)
        column = layout.column()
        for index, effector in enumerate(obj.fabrik.effectors):
            kind, message = effector_state(obj, index)
            if kind == 'NONE' and rig_status is None:
                continue
            icon, alert = STATUS_ICONS[kind]
            draw_wrapped(column, f"{effector_label(obj.fabrik, index)}: {message}", room, icon, alert,
                         active=kind != 'DISABLED')
        layout.operator("fabrik.copy_report", icon='COPYDOWN')


class VIEW3D_PT_fabrik_effector(FabrikSidebarPanel, Panel):
    """The active effector's bone, target, chain and goals"""

    bl_label = "Active Effector"
    bl_parent_id = "VIEW3D_PT_fabrik"

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = setup_ops.rig_for_panel(context)
        return obj is not None and 0 <= obj.fabrik.active_effector < len(obj.fabrik.effectors)

    def draw_header(self, context: bpy.types.Context):
        obj = setup_ops.rig_for_panel(context)
        self.layout.prop(obj.fabrik.effectors[obj.fabrik.active_effector], "enabled", text="")

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        effector = obj.fabrik.effectors[obj.fabrik.active_effector]
        bad = invalid_fields(obj, effector)
        room = room_for(context)
        layout.active = effector_state(obj, obj.fabrik.active_effector)[0] != 'DISABLED'  # off: greyed
        _stacked(layout, "Name").prop(effector, "name", text="")

        column = layout.column()
        _stacked(column, "Tip Bone", "bone" in bad).prop_search(effector, "bone", obj.data, "bones", text="")
        _stacked(column, "Target", "target" in bad).prop(effector, "target", text="")
        if effector.target is None and effector.lost_target:
            draw_wrapped(column, f"Target '{effector.lost_target}' was deleted", room, 'ERROR', True)
        if effector.target is not None and effector.target.type == 'ARMATURE':
            _stacked(column, "Target Bone", "subtarget" in bad).prop_search(
                effector, "subtarget", effector.target.data, "bones", text="")
        elif "subtarget" in bad:
            _stacked(column, "Target Bone", True).prop(effector, "subtarget", text="")

        column = layout.column()
        row = column.row()
        row.alert = "chain_length" in bad
        row.prop(effector, "chain_length", text="Chain")
        column.prop(effector, "weight", text="Weight")
        column.prop(effector, "use_stretch")
        row = column.row(align=True, heading="Rotation")
        row.prop(effector, "use_rotation", text="")
        sub = row.row(align=True)
        sub.active = effector.use_rotation
        sub.prop(effector, "rotation_weight", text="", slider=True)

        column = layout.column()
        row = _stacked(column, "Pole", "pole_target" in bad)
        row.prop(effector, "pole_target", text="")
        row.operator("fabrik.pole_add", icon='ADD', text="")
        if effector.pole_target is None and effector.lost_pole:
            draw_wrapped(column, f"Pole target '{effector.lost_pole}' was deleted", room, 'ERROR', True)
        if effector.pole_target is not None:
            if effector.pole_target.type == 'ARMATURE':
                _stacked(column, "Pole Bone", "pole_subtarget" in bad).prop_search(
                    effector, "pole_subtarget", effector.pole_target.data, "bones", text="")
            row = column.row(align=True)
            row.prop(effector, "pole_angle")
            row.operator("fabrik.pole_angle_auto", icon='AUTO', text="")

        layout.separator()
        layout.prop(effector, "influence", slider=True)
        if effector.source_constraint:
            draw_wrapped(layout, f"From IK constraint '{effector.source_constraint}' on '{effector.source_bone}'",
                         room, 'CONSTRAINT_BONE')


class VIEW3D_PT_fabrik_pins(FabrikSidebarPanel, Panel):
    """The active effector's pins: where its target is held still over keyed ranges of frames"""

    bl_label = "Pins"
    bl_parent_id = "VIEW3D_PT_fabrik"

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return VIEW3D_PT_fabrik_effector.poll(context)

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        effector = obj.fabrik.effectors[obj.fabrik.active_effector]
        layout.prop(effector, "pin", slider=True)
        column = layout.column()
        column.active = effector.pin > 0.0
        column.prop(effector, "pin_location", text="Location")
        row = layout.row(align=True)
        row.operator("fabrik.pin", icon='PINNED')
        row.operator("fabrik.pin_clear", icon='UNPINNED', text="Clear")
        spans = pins.spans(obj, effector)
        room = room_for(context)
        if spans:
            text = "Held on frames " + pins.range_text(spans)
            draw_wrapped(layout, text, room, 'KEYFRAME')
        layout.operator("fabrik.find_contacts", icon='VIEWZOOM')


class VIEW3D_PT_fabrik_solver(FabrikSidebarPanel, Panel):
    """How the rig is solved: the method, its stopping rules and where each solve starts"""

    bl_label = "Solver"
    bl_parent_id = "VIEW3D_PT_fabrik"

    def draw(self, context: bpy.types.Context):
        layout = self.layout
        settings = setup_ops.rig_for_panel(context).fabrik
        presets.draw_preset_header(layout, presets.FABRIK_MT_rig_settings_presets, "fabrik.rig_settings_preset_add")
        split(layout)
        _stacked(layout, "Solver").prop(settings, "solver", text="")
        column = layout.column(align=True)
        column.prop(settings, "iterations")
        column.prop(settings, "tolerance")
        _stacked(layout, "Start From").prop(settings, "start", text="")
        _stacked(layout, "Floor").prop(settings, "floor", text="")


class VIEW3D_PT_fabrik_root(FabrikArmaturePanel, Panel):
    """A root that moves with the effectors: the hips shift and turn where a target is out of reach, or follow
    the effectors' pull"""

    bl_label = "Root"
    bl_parent_id = "VIEW3D_PT_fabrik"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        settings = obj.fabrik
        _stacked(layout, "Moves").prop(settings, "root_mode", text="")
        column = layout.column()
        column.active = settings.root_mode != 'OFF'
        missing = bool(settings.root_bone) and settings.root_bone not in obj.data.bones
        _stacked(column, "Bone", missing).prop_search(settings, "root_bone", obj.data, "bones", text="")
        if not settings.root_bone:
            top = moving_root.top_bone(obj)
            column.label(text=f"Top of the first chain: {top}" if top else "No effector's chain yet", icon='INFO')
        weight = column.row()
        weight.active = settings.root_mode == 'FREE'
        weight.prop(settings, "root_weight", slider=True)
        column.prop(settings, "root_distance")
        column.prop(settings, "root_angle")
        problem = moving_root.problem(obj, settings.root_bone or moving_root.top_bone(obj))
        if problem:
            draw_wrapped(layout, problem, room_for(context), 'ERROR', True)
        kept = memory.get(obj.name)
        away = kept.root_away if kept is not None and settings.root_mode != 'OFF' and settings.live else None
        if away is not None:
            units = context.scene.unit_settings
            shift = bpy.utils.units.to_string(units.system, 'LENGTH', away[0] * units.scale_length, precision=3)
            layout.label(text=f"Moved {shift}, turned {math.degrees(away[1]):.1f}°", icon='INFO')


class VIEW3D_PT_fabrik_testing(FabrikSidebarPanel, Panel):
    """Ways to try the rig: key the active effector's target on a path, and compare the solvers"""

    bl_label = "Testing"
    bl_parent_id = "VIEW3D_PT_fabrik"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        settings = obj.fabrik
        effector = None
        if 0 <= settings.active_effector < len(settings.effectors):
            effector = settings.effectors[settings.active_effector]
        column = layout.column(heading="Animate Target")
        column.enabled = effector is not None and effector.target is not None
        row = column.row(align=True)
        for preset, label in (('CIRCLE', "Circle"), ('FIGURE_EIGHT', "Figure-Eight")):
            op = row.operator("fabrik.target_motion", text=label)
            op.preset, op.effector_target = preset, True
        layout.separator()
        room = room_for(context, reserve=MARGIN_PIXELS + 10)  # (the legend sits in a box)
        compare.draw(layout, obj, wrap=room.lines)


class VIEW3D_PT_fabrik_retarget(FabrikArmaturePanel, Panel):
    """Put a captured clip's motion on this rig: the clip's armature, its bones mapped onto the rig's, Retarget"""

    bl_label = "Retarget"
    bl_parent_id = "VIEW3D_PT_fabrik"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context: bpy.types.Context):
        layout = split(self.layout)
        obj = setup_ops.rig_for_panel(context)
        settings = obj.fabrik
        _stacked(layout, "Source").prop(settings, "retarget_source", text="")
        layout.operator("fabrik.retarget_map", icon='GROUP_BONE')
        if len(settings.retarget_bones):
            layout.template_list("FABRIK_UL_retarget_bones", "", settings, "retarget_bones", settings,
                                 "retarget_index", rows=4)
            index = settings.retarget_index
            if 0 <= index < len(settings.retarget_bones):
                row = settings.retarget_bones[index]
                source = settings.retarget_source
                if source is not None and source.type == 'ARMATURE':
                    _stacked(layout, f"Clip's {row.name}", bool(row.source) and row.source not in source.data.bones
                             ).prop_search(row, "source", source.data, "bones", text="")
                _stacked(layout, f"Rig's {row.name}", bool(row.target) and row.target not in obj.data.bones
                         ).prop_search(row, "target", obj.data, "bones", text="")
        refused = setup.refusal(obj)
        if refused and settings.retarget_source is not None:
            draw_wrapped(layout, refused, room_for(context), 'ERROR', True)
        if not refused:
            body, arms = rests.scales(obj)
            layout.prop(settings, "retarget_scale")
            layout.prop(settings, "retarget_arm_scale")
            draw_wrapped(layout, f"Hips move {body:.3g}x the clip's, hands reach {arms['L']:.3g}x / {arms['R']:.3g}x "
                         "(0: from the bones)", room_for(context), 'INFO', False)
        row = layout.row(align=True)
        row.operator("fabrik.retarget", icon='ARMATURE_DATA')
        row.operator("fabrik.retarget_remove", icon='X', text="Remove")


classes = (
    FABRIK_UL_effectors,
    FABRIK_UL_retarget_bones,
    VIEW3D_PT_fabrik,
    VIEW3D_PT_fabrik_status,
    VIEW3D_PT_fabrik_effector,
    VIEW3D_PT_fabrik_pins,
    VIEW3D_PT_fabrik_solver,
    VIEW3D_PT_fabrik_root,
    VIEW3D_PT_fabrik_retarget,
    VIEW3D_PT_fabrik_testing,
)

register, unregister = bpy.utils.register_classes_factory(classes)
