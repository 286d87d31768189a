# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators for retargeting a captured clip onto the rig: map its bones, and retarget in one click."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty
from bpy.types import Operator

from ..bake import baking
from ..long_work import SteppedOperator
from ..retarget import job, setup
from ..rig import editable
from .setup_ops import rig_for_panel


class FABRIK_OT_retarget_map(Operator):
    """Map the clip's bones and the rig's onto body parts by their names (Mixamo, BVH, Rigify, Unreal, Rokoko \
and more), replacing the list; edit the list for the rest"""

    bl_idname = "fabrik.retarget_map"
    bl_label = "Map Bones"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and obj.fabrik.retarget_source is not None

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        missing = setup.map_bones(obj)
        mapped = len(setup.mapping(obj))
        if missing:
            self.report({'WARNING'}, f"Mapped {mapped} parts; no bones found for {', '.join(missing)}: pick them in "
                        "the list")
        else:
            self.report({'INFO'}, f"Mapped {mapped} parts of '{obj.fabrik.retarget_source.name}' onto '{obj.name}'")
        return {'FINISHED'}


class FABRIK_OT_retarget(SteppedOperator, Operator):
    """Put the clip's motion on the rig: every mapped bone turns as the clip's, keyed, then FABRIK puts the hands \
and feet where the clip's are (scaled limb by limb), holds the feet where they stand and bakes (sets the scene's \
frame range to the clip's; progress in the status bar, Esc cancels)"""

    bl_idname = "fabrik.retarget"
    bl_label = "Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    find_contacts: BoolProperty(name="Hold the Feet", default=True,
                                description="Find where the clip's feet stand, heel and toe, and hold them there")
    bake: BoolProperty(name="Bake", default=True,
                       description="Bake FABRIK's corrections into keys (off: live solving corrects the ends)")

    _noun, _doing = "Retarget", "Retargeting"

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and obj.fabrik.retarget_source is not None

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event):
        return self.run_modal(context)

    def _start(self, context: bpy.types.Context) -> bool:
        obj, scene = rig_for_panel(context), context.scene
        self._mapped_here = mapped_here = not setup.mapping(obj)
        if mapped_here:
            setup.map_bones(obj)
        # (and what the bake of its corrections would refuse, a Floor or a Tolerance it cannot use, before it starts)
        refused = setup.refusal(obj) or editable.keys_editable(obj) or baking.refusal(obj)
        if not refused:
            try:
                self._work = job.Retargeting(scene, obj, self.find_contacts, self.bake)
            except Exception as exc:  # never raise into Blender
                refused = str(exc)
        if refused:
            if mapped_here:
                obj.fabrik.retarget_bones.clear()  # (a refusal changes nothing: Map Bones shows what it finds)
            self.report({'ERROR'}, f"Cannot retarget: {refused}")
            return False
        return True

    def _drop(self) -> None:
        """Cancel the work; one stopped before it changed the rig leaves no mapping it made either, and one that
        had keyed the clip's pose is kept (`_kept`: its operator finishes, so one undo takes it back)."""
        work = self._work
        super()._drop()
        self._kept = work is not None and work.written
        if work is not None and not work.written and getattr(self, "_mapped_here", False):
            work.obj.fabrik.retarget_bones.clear()

    def execute(self, context: bpy.types.Context):
        self._kept = False
        result = self.run_at_once(context)
        return {'FINISHED'} if self._kept else result

    def modal(self, context: bpy.types.Context, event: bpy.types.Event):
        work = self._work
        if event.type == 'ESC' and work is not None and work.written:
            self._stop(context)
            self._drop()
            self.report({'WARNING'}, f"Retarget's bake cancelled: '{work.obj.name}' keeps the clip's pose, and live "
                        "solving corrects its hands and feet")
            return {'FINISHED'}  # (one undo step takes the whole retarget back)
        self._kept = False
        result = super().modal(context, event)
        return {'FINISHED'} if 'CANCELLED' in result and self._kept else result

    def _finish(self, context: bpy.types.Context):
        work, self._work = self._work, None
        try:
            result = work.finish()
        except Exception as exc:  # never raise into Blender
            self.report({'ERROR'}, f"Retargeted, but not baked: {exc}")
            return {'FINISHED'}
        obj = work.obj
        copy, layout = work.copy, work.layout
        held = sum(len(runs[0]) + len(runs[1]) for runs in copy.contacts.values())
        self.report({'INFO'}, f"Retargeted '{work.clip.name}' onto '{obj.name}': {len(work.frames)} frames, "
                    f"{len(copy.local)} bones, {held} foot contact(s) held, body scale {layout.scale:.3g}")
        if layout.tipped > 45.0:
            self.report({'WARNING'}, f"The clip stands on another axis than the rig ({layout.tipped:.0f} degrees "
                        "off its up): stood up")
        if abs(copy.grounded) > 0.25 * layout.leg_length:
            self.report({'WARNING'}, f"The clip's floor was {copy.grounded:+.3g} off the rig's: moved onto it")
        far = {name: count for name, count in copy.beyond.items() if count}
        if far:
            self.report({'WARNING'}, "The clip's hand is beyond its arm's reach (scaled) on " + ", ".join(
                f"{count} frame(s) for {name}" for name, count in far.items()) + ": the arm goes straight towards it")
        if result is not None and result.problems:
            self.report({'WARNING'}, f"{len(result.problems)} frame(s) with a limb short of its goal, first: "
                        f"{result.problems[0]}")
        return {'FINISHED'}


class FABRIK_OT_retarget_remove(Operator):
    """Take the retarget away: the effectors it made and their pins, its empties, and a generated Rigify rig's \
IK/FK switches back as they were (the keys stay)"""

    bl_idname = "fabrik.retarget_remove"
    bl_label = "Remove Retarget"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and obj.type == 'ARMATURE' and setup.made_here(obj)

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        refused = editable.editable(obj)
        if refused:
            self.report({'ERROR'}, f"Cannot remove the retarget: {refused}")
            return {'CANCELLED'}
        removed = setup.take_away(obj)
        self.report({'INFO'}, f"Removed the retarget from '{obj.name}' ({removed} effectors); its keys stay")
        return {'FINISHED'}


classes = (FABRIK_OT_retarget_map, FABRIK_OT_retarget, FABRIK_OT_retarget_remove)

register, unregister = bpy.utils.register_classes_factory(classes)
