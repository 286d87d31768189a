# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators: solve once, manage effectors, convert Blender IK constraints, bake keyframes."""

from __future__ import annotations

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty
from bpy.types import Operator

from .. import solve
from ..bake import baking
from ..effectors import constraints, pins
from ..long_work import SteppedOperator
from ..rig import editable, props, status
from .setup_ops import rig_for_panel


def _armature(context: bpy.types.Context):
    """The active object when it is an armature, else None."""
    obj = context.object
    return obj if obj is not None and obj.type == 'ARMATURE' else None


class FABRIK_OT_solve(Operator):
    """Solve the rig's effectors (the active armature, or the rig of the active target) once at the current frame
    and pose the rig"""

    bl_idname = "fabrik.solve"
    bl_label = "Solve Now"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        refused = editable.editable(obj)
        if refused:  # a linked rig: Blender would let us pose it, but nothing of it is saved
            status.show(obj.name, status.RigStatus(message=refused, ok=False))
            self.report({'ERROR'}, f"Cannot solve: {refused}")
            return {'CANCELLED'}
        try:
            # Live solving off: the solved pose is the animator's now (nothing to give back later).
            result, _ = solve.solve_object(obj, context.evaluated_depsgraph_get(), hold=obj.fabrik.live)
        except ValueError as exc:
            self.report({'ERROR'}, str(exc))
            return {'CANCELLED'}
        level = {'WARNING'} if not result.ok or result.missed else {'INFO'}
        self.report(level, f"FABRIK '{obj.name}': {result.message}")
        return {'FINISHED'}


class FABRIK_OT_effector_add(Operator):
    """Add an effector for the active bone; a selected other object becomes its target"""

    bl_idname = "fabrik.effector_add"
    bl_label = "Add Effector"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return _armature(context) is not None

    def execute(self, context: bpy.types.Context):
        obj = _armature(context)
        effector = obj.fabrik.effectors.add()
        bone = context.active_pose_bone or (obj.data.bones.active and obj.pose.bones.get(obj.data.bones.active.name))
        if bone is not None:
            effector.bone = bone.name
        # (named: drivers, Restore and pin keys find an effector by its name, which stays when it moves)
        effector.name = props.unique_name(obj.fabrik, effector.bone or "Effector")
        others = [o for o in context.selected_objects if o is not obj]
        if others:
            effector.target = others[0]
        obj.fabrik.active_effector = len(obj.fabrik.effectors) - 1
        obj.update_tag()  # a live rig solves with it at the next update
        self.report({'INFO'}, f"Added effector for '{effector.bone or '(no bone)'}'")
        return {'FINISHED'}


class FABRIK_OT_effector_remove(Operator):
    """Remove the selected effector (the bones keep their current pose)"""

    bl_idname = "fabrik.effector_remove"
    bl_label = "Remove Effector"
    bl_options = {'REGISTER', 'UNDO'}

    index: IntProperty(name="Index", default=-1, description="Effector to remove (-1: the active one)")

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        settings = obj.fabrik
        index = settings.active_effector if self.index < 0 else self.index
        if not 0 <= index < len(settings.effectors):
            self.report({'ERROR'}, f"No effector {index}")
            return {'CANCELLED'}
        effector = settings.effectors[index]
        name = effector.bone
        # An effector made by Convert leaves its IK constraint muted (Restore finds it): say so, or the chain
        # silently has neither solver.
        source = (effector.source_constraint, effector.source_bone) if effector.source_constraint else None
        switched = effector.switched
        if editable.keys_editable(obj) is None:  # (a linked action keeps them: nothing of it is saved)
            pins.clear(obj, effector)  # (its pin keys go with it: a later effector of its name would take them)
        settings.effectors.remove(index)
        settings.active_effector = max(0, min(settings.active_effector, len(settings.effectors) - 1))
        obj.update_tag()  # a live rig solves without it at the next update
        if source is None:
            self.report({'INFO'}, f"Removed effector for '{name}'")
        else:
            driver = " and its driver" if switched else ""
            self.report({'WARNING'}, f"Removed effector for '{name}': its IK constraint '{source[0]}' on "
                        f"'{source[1]}' stays muted; Restore IK Constraints gives it back with its targets{driver}")
        return {'FINISHED'}


class FABRIK_OT_effector_move(Operator):
    """Move the active effector up or down the list (order matters only for reading; weights decide conflicts)"""

    bl_idname = "fabrik.effector_move"
    bl_label = "Move Effector"
    bl_options = {'REGISTER', 'UNDO'}

    direction: EnumProperty(name="Direction", items=(('UP', "Up", ""), ('DOWN', "Down", "")), default='UP')

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and len(obj.fabrik.effectors) > 1

    def execute(self, context: bpy.types.Context):
        settings = rig_for_panel(context).fabrik
        index = settings.active_effector
        other = index - 1 if self.direction == 'UP' else index + 1
        if not (0 <= index < len(settings.effectors) and 0 <= other < len(settings.effectors)):
            return {'CANCELLED'}
        settings.effectors.move(index, other)
        settings.active_effector = other
        self.report({'INFO'}, f"Moved effector '{settings.effectors[other].bone}' {self.direction.lower()}")
        return {'FINISHED'}


class FABRIK_OT_convert_constraints(Operator):
    """Turn the armature's Blender IK constraints into FABRIK effectors and mute the constraints (their targets are kept aside for Restore)"""

    bl_idname = "fabrik.convert_constraints"
    bl_label = "Convert IK Constraints"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        return rig_for_panel(context) is not None

    def execute(self, context: bpy.types.Context):
        obj = rig_for_panel(context)
        converted, skipped = constraints.convert_ik_constraints(obj)
        for reason in skipped:
            self.report({'WARNING'}, f"Skipped {reason}")
        if not converted:
            self.report({'WARNING'} if skipped else {'INFO'}, "No IK constraint to convert")
            return {'CANCELLED'} if not skipped else {'FINISHED'}
        self.report({'INFO'}, f"Converted {len(converted)} IK constraint(s) into effectors: {', '.join(converted)}")
        stretchy = sum(constraints.STRETCH_NOTE in label for label in converted)
        if stretchy:  # (the status bar shows the last report)
            self.report({'WARNING'}, f"{stretchy} converted chain(s) have IK Stretch: FABRIK lengthens bones only "
                        "for a target out of reach, Blender's IK also shortens them within reach; see the Info log")
        return {'FINISHED'}


class FABRIK_OT_restore_constraints(Operator):
    """Remove the effectors made from IK constraints and switch those constraints back on, with their targets"""

    bl_idname = "fabrik.restore_constraints"
    bl_label = "Restore IK Constraints"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        # The records outlive the effectors: Restore finds a constraint whose effector was removed.
        settings = obj.fabrik if obj is not None else None
        return settings is not None and (len(settings.converted) > 0 or any(e.source_constraint for e in settings.effectors))

    def execute(self, context: bpy.types.Context):
        restored, problems = constraints.restore_ik_constraints(rig_for_panel(context))
        for problem in problems:
            self.report({'WARNING'}, problem)
        self.report({'INFO'}, f"Restored {len(restored)} IK constraint(s)" + (f": {', '.join(restored)}" if restored else ""))
        return {'FINISHED'}


#: Blender's frame limits (MINAFRAME, MAXFRAME): negative frames bake too.
FRAME_MIN, FRAME_MAX = -1048574, 1048574


def fill_frame_range(properties, scene: bpy.types.Scene) -> None:
    """Give the bake range the caller left unset the scene's (its preview range when that is on, as playback)."""
    preview = scene.use_preview_range
    scene_values = {
        "frame_start": scene.frame_preview_start if preview else scene.frame_start,
        "frame_end": scene.frame_preview_end if preview else scene.frame_end,
        "step": max(1, scene.frame_step),
    }
    for name, value in scene_values.items():
        if hasattr(properties, name) and not properties.is_property_set(name):
            setattr(properties, name, value)


class FABRIK_OT_bake(SteppedOperator, Operator):
    """Bake the FABRIK solution into rotation keyframes on the rig's action (Esc cancels and changes nothing)"""

    bl_idname = "fabrik.bake"
    bl_label = "Bake Keyframes"
    bl_options = {'REGISTER', 'UNDO'}

    # SKIP_SAVE: each bake starts from the scene's range, not from the last bake's (see fill_frame_range).
    frame_start: IntProperty(
        name="Start Frame", description="First frame to bake", default=1, min=FRAME_MIN, max=FRAME_MAX,
        options={'SKIP_SAVE'},
    )
    frame_end: IntProperty(
        name="End Frame", description="Last frame to bake", default=250, min=FRAME_MIN, max=FRAME_MAX,
        options={'SKIP_SAVE'},
    )
    step: IntProperty(
        name="Frame Step", description="Bake every n-th frame", default=1, min=1, max=FRAME_MAX,
        options={'SKIP_SAVE'},
    )
    bones: EnumProperty(
        name="Bones",
        items=(
            ('CHAINS', "Effector Chains", "The bones the effectors move"),
            ('SELECTED', "Selected Bones", "The selected pose bones"),
        ),
        default='CHAINS',
    )
    new_action: BoolProperty(name="New Action", description="Key into a new action instead of the active one", default=False)
    use_cleanup: BoolProperty(
        name="Clean Up", description="Drop keys that the neighbouring keys already reproduce", default=False
    )
    cleanup_tolerance: FloatProperty(
        name="Clean-Up Tolerance", description="How far (in channel units) a dropped key may be from the curve",
        default=1e-4, min=0.0, precision=6,
    )
    start: EnumProperty(
        name="Solve From",
        description="Where each frame's solve starts",
        items=(
            ('RIG', "As Live Solving", "Start each frame where the rig's live solving starts (its Start From setting), "
             "so the keys play back what you saw while scrubbing"),
            ('FK', "This Frame's Pose", "Solve every frame on its own from the pose animation gives it: the same as "
             "scrubbing with live solving, and the fastest bake (frames are solved together)"),
            ('PREVIOUS', "Previous Frame's Solution", "Continuous: start each frame from the previous frame's "
             "solution, for smooth motion without flips where limits allow several poses"),
        ),
        default='RIG',
    )
    keep_live: BoolProperty(
        name="Keep Live Solving",
        description="Leave live solving on after baking (off: playback shows exactly the baked keys)",
        default=False,
    )
    # Set by invoke when it opens the dialog: the dialog's OK calls execute, which then runs the modal bake.
    use_modal: BoolProperty(name="Modal", default=False, options={'HIDDEN', 'SKIP_SAVE'})

    _noun, _doing = "Bake", "Baking FABRIK"

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = rig_for_panel(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def draw(self, _context: bpy.types.Context) -> None:
        """The dialog and the redo panel, in Blender's split-label layout."""
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        column = layout.column(align=True)
        column.prop(self, "frame_start")
        column.prop(self, "frame_end", text="End")
        column.prop(self, "step")
        layout.prop(self, "bones")
        layout.prop(self, "start")
        column = layout.column(heading="Bake Into")
        column.prop(self, "new_action")
        column = layout.column(heading="Keys")
        column.prop(self, "use_cleanup")
        sub = column.column()
        sub.active = self.use_cleanup
        sub.prop(self, "cleanup_tolerance", text="Tolerance")
        layout.prop(self, "keep_live")

    def _start(self, context: bpy.types.Context) -> bool:
        """Set up the baker; False (with a report) when there is nothing to bake."""
        scene, obj = context.scene, rig_for_panel(context)
        fill_frame_range(self.properties, scene)
        self._work = None
        try:
            # Refused before any work (the Baker checks the rig itself): keys into a linked action are not saved.
            action = None if self.new_action or obj.animation_data is None else obj.animation_data.action
            refused = baking.refusal(obj) or editable.action_editable(action)
            if refused:
                raise ValueError(refused)
            if self.frame_end < self.frame_start:
                raise ValueError(f"the End Frame ({self.frame_end}) comes before the Start Frame ({self.frame_start})")
            frames = list(range(self.frame_start, self.frame_end + 1, self.step))
            self._work = baking.Baker(scene, obj, frames, baking.bake_bones(obj, self.bones),
                                     baking.warm_start_of(obj, self.start),
                                     self.cleanup_tolerance if self.use_cleanup else None)
        except Exception as exc:  # never raise into Blender; the Baker leaves nothing set up when it raises
            self.report({'ERROR'}, f"Cannot bake: {exc}")
            return False
        return True

    def _finish(self, context: bpy.types.Context):
        baker, self._work = self._work, None
        try:
            result = baker.finish(self.new_action, self.keep_live)
        except Exception as exc:  # finish puts live solving and the frame back itself
            self.report({'ERROR'}, f"Bake stopped: {exc}")
            return {'CANCELLED'}
        for problem in result.problems[:5]:
            self.report({'WARNING'}, problem)
        if len(result.problems) > 5:
            self.report({'WARNING'}, f"... and {len(result.problems) - 5} more problems")
        extra = f", {result.removed_by_cleanup} dropped by clean-up" if self.use_cleanup else ""
        skipped = f", {len(result.skipped)} bone(s) left unkeyed on some frames" if result.skipped else ""
        # Problems make the whole bake a warning: keys were written, but not all that were asked for.
        self.report(
            {'WARNING'} if result.problems else {'INFO'},
            f"Baked {result.frames} frames of {result.bones} bones into '{result.action or '(no action)'}': "
            f"{result.keys} keys{extra}{skipped} in {result.seconds:.2f} s",
        )
        return {'FINISHED'}

    def execute(self, context: bpy.types.Context):
        # OK in the dialog: run modal (progress in the status bar, Esc cancels). Python calls and the redo
        # panel's re-runs end here with use_modal off and bake at once: a redo re-run must finish inside this
        # call (Blender owns that operator and handles no events meanwhile), so it shows progress but Esc cannot
        # reach it.
        if self.use_modal and context.window is not None and not self.is_repeat():
            self.use_modal = False  # what the redo panel re-runs later bakes at once
            return self.run_modal(context)
        self.use_modal = False
        return self.run_at_once(context)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event):
        # A caller that names the range (a script, a test) has chosen it: no dialog. A click on the button names
        # none (SKIP_SAVE: nothing is remembered from the last bake), so the button always asks.
        chosen = any(self.properties.is_property_set(name) for name in ("frame_start", "frame_end"))
        fill_frame_range(self.properties, context.scene)
        if context.window is None:
            return self.execute(context)  # no window to show a dialog or progress in
        if chosen:
            return self.run_modal(context)
        self.use_modal = True
        return context.window_manager.invoke_props_dialog(self)


classes = (
    FABRIK_OT_solve,
    FABRIK_OT_effector_add,
    FABRIK_OT_effector_remove,
    FABRIK_OT_effector_move,
    FABRIK_OT_convert_constraints,
    FABRIK_OT_restore_constraints,
    FABRIK_OT_bake,
)

register, unregister = bpy.utils.register_classes_factory(classes)
