# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators: solve once, manage effectors, convert Blender IK constraints, bake keyframes."""

from __future__ import annotations

import time

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty
from bpy.types import Operator

from . import bake, constraints, editable, solving


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
            # Live solving off: the solved pose is the animator's now (nothing to give back later).
            result = solving.solve_object(obj, context.evaluated_depsgraph_get(), hold=obj.fabrik.live)
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
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def execute(self, context):
        obj = _armature(context)
        settings = obj.fabrik
        index = settings.active_effector if self.index < 0 else self.index
        if not 0 <= index < len(settings.effectors):
            self.report({'ERROR'}, f"No effector {index}")
            return {'CANCELLED'}
        name = settings.effectors[index].bone
        settings.effectors.remove(index)
        settings.active_effector = max(0, min(settings.active_effector, len(settings.effectors) - 1))
        obj.update_tag()  # a live rig solves without it at the next update
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
        # The records outlive the effectors: Restore finds a constraint whose effector was removed.
        settings = obj.fabrik if obj is not None else None
        return settings is not None and (len(settings.converted) > 0 or any(e.source_constraint for e in settings.effectors))

    def execute(self, context):
        restored, problems = constraints.restore_ik_constraints(_armature(context))
        for problem in problems:
            self.report({'WARNING'}, problem)
        self.report({'INFO'}, f"Restored {len(restored)} IK constraint(s)" + (f": {', '.join(restored)}" if restored else ""))
        return {'FINISHED'}


class FABRIK_OT_bake(Operator):
    """Bake the FABRIK solution into rotation keyframes on the rig's action (Esc cancels and changes nothing)"""

    bl_idname = "fabrik.bake"
    bl_label = "Bake Keyframes"
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(name="Start", description="First frame to bake (default: the scene's)", default=-1)
    frame_end: IntProperty(name="End", description="Last frame to bake (default: the scene's)", default=-1)
    step: IntProperty(name="Step", description="Bake every n-th frame", default=1, min=1)
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
        name="Tolerance", description="How far (in channel units) a dropped key may be from the curve", default=1e-4,
        min=0.0, precision=6,
    )
    start: EnumProperty(
        name="Start",
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

    _baker = None
    _timer = None

    @classmethod
    def poll(cls, context):
        obj = _armature(context)
        return obj is not None and len(obj.fabrik.effectors) > 0

    def _start(self, context) -> bool:
        """Set up the baker; False (with a report) when there is nothing to bake."""
        scene, obj = context.scene, _armature(context)
        first = scene.frame_start if self.frame_start < 0 else self.frame_start
        last = scene.frame_end if self.frame_end < 0 else self.frame_end
        self._baker = None
        try:
            # Refused before any work (the Baker checks the rig itself): keys into a linked action are not saved.
            action = None if self.new_action or obj.animation_data is None else obj.animation_data.action
            refused = bake.refusal(obj) or editable.action_editable(action)
            if refused:
                raise ValueError(refused)
            frames = list(range(first, last + 1, self.step))
            self._baker = bake.Baker(scene, obj, frames, bake.bake_bones(obj, self.bones), bake.warm_start_of(obj, self.start))
        except Exception as exc:  # never raise into Blender; the Baker leaves nothing set up when it raises
            self.report({'ERROR'}, f"Cannot bake: {exc}")
            return False
        return True

    def _finish(self, context):
        baker, self._baker = self._baker, None
        try:
            result = baker.finish(self.new_action, self.cleanup_tolerance if self.use_cleanup else None, self.keep_live)
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

    def execute(self, context):
        if not self._start(context):
            return {'CANCELLED'}
        try:
            while not self._baker.done:
                self._baker.step()
        except Exception as exc:
            self._baker.cancel()
            self._baker = None
            self.report({'ERROR'}, f"Bake stopped: {exc}")
            return {'CANCELLED'}
        return self._finish(context)

    def invoke(self, context, event):
        if not self._start(context):
            return {'CANCELLED'}
        wm = context.window_manager
        wm.progress_begin(0, self._baker.progress[1])
        self._timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        wm = context.window_manager
        if event.type == 'ESC':
            self._stop(context)
            self._baker.cancel()
            self._baker = None
            self.report({'INFO'}, "Bake cancelled; nothing was changed")
            return {'CANCELLED'}
        if event.type != 'TIMER':
            return {'RUNNING_MODAL'}
        try:
            began = time.perf_counter()
            while not self._baker.done and time.perf_counter() - began < 0.1:
                self._baker.step()
        except Exception as exc:
            self._stop(context)
            self._baker.cancel()
            self._baker = None
            self.report({'ERROR'}, f"Bake stopped: {exc}")
            return {'CANCELLED'}
        done, total = self._baker.progress
        wm.progress_update(done)
        context.workspace.status_text_set(f"Baking FABRIK: {100 * done // total}% (Esc to cancel)")
        if not self._baker.done:
            return {'RUNNING_MODAL'}
        self._stop(context)
        return self._finish(context)

    def cancel(self, context) -> None:
        """Blender ends the modal bake (a file load, the window closing): undo what it set up, write nothing."""
        try:
            self._stop(context)
        except (AttributeError, ReferenceError):
            pass  # no window or workspace left to tidy
        if self._baker is not None:
            # A bake dropped by a file load is marked abandoned by then and touches nothing of the old file.
            self._baker.cancel()
            self._baker = None

    def _stop(self, context) -> None:
        """Remove the timer and the progress display."""
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        if context.workspace is not None:
            context.workspace.status_text_set(None)

    @classmethod
    def register(cls) -> None:
        """Watch file loads: a modal bake in progress must let go of the file it was baking."""
        if bake.drop_running_bakes not in bpy.app.handlers.load_pre:
            bpy.app.handlers.load_pre.append(bake.drop_running_bakes)

    @classmethod
    def unregister(cls) -> None:
        """Stop watching file loads."""
        while bake.drop_running_bakes in bpy.app.handlers.load_pre:
            bpy.app.handlers.load_pre.remove(bake.drop_running_bakes)


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
