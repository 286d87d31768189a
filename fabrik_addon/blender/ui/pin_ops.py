# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators for pins: pin the active effector's target over a range, clear its pins, find contacts and pin them."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty
from bpy.types import Operator

from ..effectors import contact_pins, pins
from ..effectors.effector_goals import EffectorError, world_matrix
from ..long_work import SteppedOperator
from ..rig import editable
from .ops import FRAME_MAX, FRAME_MIN, fill_frame_range
from .setup_ops import rig_and_effector, rig_for_panel


class FABRIK_OT_pin(Operator):
    """Pin the active effector's target where it is on the start frame, over a range of frames: the tip stays \
planted there while the rest of the rig moves (keys Pin, Pin Location and Rotation in the rig's action; a pin it \
overlaps is replaced)"""

    bl_idname = "fabrik.pin"
    bl_label = "Pin Target"
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(
        name="Start Frame", description="First frame the target is held fully (where it is on this frame)",
        default=1, min=FRAME_MIN, max=FRAME_MAX, options={'SKIP_SAVE'},
    )
    frame_end: IntProperty(
        name="End Frame", description="Last frame the target is held fully", default=10, min=FRAME_MIN,
        max=FRAME_MAX, options={'SKIP_SAVE'},
    )
    blend_in: IntProperty(
        name="Blend In", description="Frames before the start over which the pin takes hold", default=2, min=1,
        soft_max=50,
    )
    blend_out: IntProperty(
        name="Blend Out", description="Frames after the end over which the pin lets go", default=2, min=1,
        soft_max=50,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, -1)
        return effector is not None and effector.target is not None

    def draw(self, _context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        column = layout.column(align=True)
        column.prop(self, "frame_start")
        column.prop(self, "frame_end", text="End")
        column = layout.column(align=True)
        column.prop(self, "blend_in")
        column.prop(self, "blend_out", text="Out")

    def invoke(self, context: bpy.types.Context, _event):
        frame = context.scene.frame_current
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = frame
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = max(self.frame_start, min(context.scene.frame_end, self.frame_start + 10))
        if context.window is None:
            return self.execute(context)
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, -1)
        if effector is None or effector.target is None:
            self.report({'ERROR'}, "Cannot pin: the active effector has no target")
            return {'CANCELLED'}
        if self.frame_end < self.frame_start:
            self.report({'ERROR'}, f"Cannot pin: the End Frame ({self.frame_end}) comes before the Start Frame "
                        f"({self.frame_start})")
            return {'CANCELLED'}
        refused = editable.keys_editable(obj)
        if refused:
            self.report({'ERROR'}, f"Cannot pin: {refused}")
            return {'CANCELLED'}
        scene = context.scene
        before = scene.frame_current
        try:
            scene.frame_set(self.frame_start)
            world = world_matrix(effector.target, effector.subtarget, context.evaluated_depsgraph_get()).copy()
        except EffectorError as exc:
            self.report({'ERROR'}, f"Cannot pin: {exc}")
            return {'CANCELLED'}
        finally:
            scene.frame_set(before)
        if not all(abs(c) < float("inf") for row in world for c in row):
            self.report({'ERROR'}, f"Cannot pin: target '{effector.target.name}' is not at a finite location on "
                        f"frame {self.frame_start}")
            return {'CANCELLED'}
        span = pins.Span(self.frame_start, self.frame_end, self.blend_in, self.blend_out)
        before = pins.spans(obj, effector)
        try:
            pins.key_span(obj, effector, span, world)
        except Exception as exc:  # never raise into Blender
            self.report({'ERROR'}, f"Cannot pin: {exc}")
            return {'CANCELLED'}
        obj.update_tag()
        gone = [s for s in before if s not in pins.spans(obj, effector)]
        replaced = f"; it replaces the pin on frames {pins.range_text(gone)}" if gone else ""
        self.report({'INFO'}, f"Pinned '{effector.name}' on frames {self.frame_start}-{self.frame_end} "
                    f"(blending in from {span.keyed[0]}, out until {span.keyed[1]}){replaced}")
        return {'FINISHED'}


class FABRIK_OT_pin_clear(Operator):
    """Remove all the active effector's pins (their keys), so its target is followed on every frame again"""

    bl_idname = "fabrik.pin_clear"
    bl_label = "Clear Pins"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_and_effector(context, -1)[1] is not None

    def execute(self, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, -1)
        name = effector.name or effector.bone
        spans, pinned = pins.spans(obj, effector), effector.pin
        refused = editable.keys_editable(obj)
        if refused:
            self.report({'ERROR'}, f"Cannot clear the pins: {refused}")
            return {'CANCELLED'}
        removed = pins.clear(obj, effector)
        if not removed and pinned == 0.0:
            self.report({'INFO'}, f"'{name}' has no pins")
            return {'CANCELLED'}
        effector.pin = 0.0
        obj.update_tag()
        held = f" (frames {pins.range_text(spans)})" if spans else ""
        self.report({'INFO'}, f"Cleared the pins of '{name}'{held}")
        return {'FINISHED'}


class FABRIK_OT_find_contacts(SteppedOperator, Operator):
    """Find where the effectors' targets (or tips) are planted in the animation (slow and near the lowest they \
go) and pin them there: the pins replace the effectors' pins in the frame range and can be edited like any keys"""

    bl_idname = "fabrik.find_contacts"
    bl_label = "Find Contacts"
    bl_options = {'REGISTER', 'UNDO'}
    _noun, _doing = "Find Contacts", "Finding contacts"

    effectors: EnumProperty(
        name="Effectors",
        items=(('ALL', "All Effectors", "Every enabled effector with a target"),
               ('ACTIVE', "Active Effector", "Only the active effector")),
        default='ALL',
    )
    source: EnumProperty(
        name="Look At",
        items=(('TARGETS', "Targets", "Where the targets stand still (their animation; the fastest)"),
               ('TIPS', "Tips", "Where the tips stand still as the scene plays them (with live solving, or the "
                "rig's own keys)")),
        default='TARGETS',
    )
    frame_start: IntProperty(name="Start Frame", default=1, min=FRAME_MIN, max=FRAME_MAX, options={'SKIP_SAVE'},
                             description="First frame to look at")
    frame_end: IntProperty(name="End Frame", default=250, min=FRAME_MIN, max=FRAME_MAX, options={'SKIP_SAVE'},
                           description="Last frame to look at")
    speed: FloatProperty(
        name="Speed", default=contact_pins.SPEED, min=0.0, soft_max=0.1, precision=3,
        description="A target moving at most this much a frame, as a share of its chain's length, may be planted",
    )
    height: FloatProperty(
        name="Height", default=contact_pins.HEIGHT, min=0.0, soft_max=0.5, precision=3,
        description="A target at most this high above the lowest it goes, as a share of its chain's length, may "
                    "be planted",
    )
    shortest: IntProperty(name="Shortest", default=contact_pins.SHORTEST, min=1, soft_max=50,
                          description="Contacts of fewer frames are left out")
    blend: IntProperty(name="Blend", default=contact_pins.BLEND, min=1, soft_max=20,
                       description="Frames over which each pin takes hold and lets go (fewer where contacts are close)")
    # Set by invoke when it opens the dialog: the dialog's OK runs modal.
    use_modal: BoolProperty(name="Modal", default=False, options={'HIDDEN', 'SKIP_SAVE'})

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def draw(self, _context: bpy.types.Context) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(self, "effectors")
        layout.prop(self, "source")
        column = layout.column(align=True)
        column.prop(self, "frame_start")
        column.prop(self, "frame_end", text="End")
        column = layout.column(align=True)
        column.prop(self, "speed")
        column.prop(self, "height")
        layout.prop(self, "shortest")
        layout.prop(self, "blend")

    def _start(self, context: bpy.types.Context) -> bool:
        obj = rig_for_panel(context)
        fill_frame_range(self.properties, context.scene)
        settings = obj.fabrik
        indices = list(range(len(settings.effectors))) if self.effectors == 'ALL' else [settings.active_effector]
        try:
            if self.frame_end < self.frame_start:
                raise ValueError(f"the End Frame ({self.frame_end}) comes before the Start Frame ({self.frame_start})")
            refused = editable.keys_editable(obj)
            if refused:
                raise ValueError(refused)
            self._work = contact_pins.ContactFinder(
                context.scene, obj, [i for i in indices if 0 <= i < len(settings.effectors)],
                range(self.frame_start, self.frame_end + 1), self.speed, self.height, self.shortest, self.blend,
                self.source,
            )
        except ValueError as exc:
            self.report({'ERROR'}, f"Cannot find contacts: {exc}")
            return False
        return True

    def _finish(self, context: bpy.types.Context):
        finder, self._work = self._work, None
        try:
            keyed, replaced = finder.finish()
        except Exception as exc:  # never raise into Blender (finish puts the frame and live solving back)
            self.report({'ERROR'}, f"Find Contacts stopped: {exc}")
            return {'CANCELLED'}
        finder.obj.update_tag()
        for name, why in finder.skipped.items():
            self.report({'WARNING'}, f"'{name}' left out: {why}")
        count = sum(len(spans) for spans in keyed.values())
        parts = [f"'{name}' {pins.range_text([(s.first, s.last) for s in spans])}" for name, spans in keyed.items() if spans]
        before = f", replacing {replaced} pin key(s) in the range" if replaced else ""
        self.report({'INFO'}, f"Found {count} contact(s) and pinned them{before}"
                    + (": " + "; ".join(parts) if parts else ""))
        return {'FINISHED'}

    def execute(self, context: bpy.types.Context):
        # OK in the dialog runs modal (Esc cancels); a script's call and the redo panel's re-run finish at once.
        if self.use_modal and context.window is not None and not self.is_repeat():
            self.use_modal = False
            return self.run_modal(context)
        self.use_modal = False
        return self.run_at_once(context)

    def invoke(self, context: bpy.types.Context, _event):
        fill_frame_range(self.properties, context.scene)
        if context.window is None:
            return self.execute(context)
        self.use_modal = True
        return context.window_manager.invoke_props_dialog(self)


classes = (FABRIK_OT_pin, FABRIK_OT_pin_clear, FABRIK_OT_find_contacts)

register, unregister = bpy.utils.register_classes_factory(classes)
