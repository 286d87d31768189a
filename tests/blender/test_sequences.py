# SPDX-License-Identifier: GPL-3.0-or-later
"""Random sequences of what animators do to rigs, in the real bpy module, checked after every step (issue 14).

A hypothesis state machine plays, on four rigs in one scene (a chain with an
effector part way up, the hand of `samples/rig_classes.py`, the arm with
limits and an elbow pole, and a rig carrying a Blender IK constraint) plus
two bystanders (an animated empty, an animated armature with no effectors):
frame changes, targets moved, keyed and deleted (X > Delete) and replaced,
bones renamed, posed and switched to other rotation modes, IK limits set
(swing cones, hinges) and cleared on the chain and the arm, NaN channels and
zero scale (on a parent bone or the rig object) set and healed, Alt+R (the
operator in Pose Mode, and the same in Python), live solving toggled, the
solver, iterations, tolerance and start changed, effectors added and removed
with the operators, Solve Now, short bakes (operator and `bake_object`),
Convert and Restore of IK constraints, undo to a pushed step, save and
reload, and the add-on disabled and enabled again (with steps in between).

After every step it asserts:

- no exception reached Blender (`sys.excepthook`, which Blender calls for
  errors in handlers and property callbacks, stays quiet), no step raised,
  and no rig's live solving was switched off except where the add-on is
  designed to (a rig object scaled to zero has no space to solve in);
- no pose channel of any armature and no key of any action is not finite,
  apart from the channels a step set to NaN on purpose;
- nothing outside the add-on's reach changed: every object's transform,
  every bone outside every effector's chain (and outside what live solving
  holds to give back), every rest bone and every F-curve key other than the
  chains' (a bake keys those), compared with the state right after the
  user's own edit, with animated channels taking their curves' values after
  a frame change; after an undo, with the state the undo went back to;
- the status matches the evaluated pose: each effector the status of a
  live rig (or of a rig just solved with Solve Now) calls reached has its
  evaluated tip within 10 times the rig's tolerance (a fraction of its
  longest chain) of its evaluated target.

Undo works in the bpy module once steps are pushed (`ed.undo_push`), as the
UI pushes one after each operator; the test pushes them where the UI would.
Runs derandomized under CI (the "ci" profile of conftest.py), inside about a
minute on two loaded cores.
"""

from __future__ import annotations

import copy
import io
import math
import shutil
import sys
import tempfile
from contextlib import redirect_stdout

import bpy
import pytest
import sequence_steps as steps
from blender_scenes import rigbuild
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from mathutils import Matrix, Quaternion, Vector

import fabrik_addon

#: Examples (scenes) and steps per example: sized to CI's budget (about a minute for the file on 2 cores).
EXAMPLES = 60
STEPS = 40

#: Rotation modes a step switches a bone to.
MODES = ('QUATERNION', 'XYZ', 'ZXY', 'YZX', 'AXIS_ANGLE')
#: The one refusal the add-on is designed to give in these steps (an ERROR report, which bpy.ops raises as
#: RuntimeError; `bake_object` raises ValueError): a rig object scaled to zero has no space to solve in.
ZERO_SCALE = "zero scale"

#: Exceptions Blender handed to sys.excepthook (from handlers and property callbacks) during the current step.
_escaped: list[str] = []


def _record_exception(kind, value, tb) -> None:
    """Blender prints errors in handlers and update callbacks through sys.excepthook: note them instead."""
    import traceback

    _escaped.append("".join(traceback.format_exception(kind, value, tb)))


@pytest.fixture
def watched_addon(addon_per_test):
    """The add-on registered (see conftest's addon_per_test) with sys.excepthook recording what escapes."""
    previous = sys.excepthook
    sys.excepthook = _record_exception
    yield
    sys.excepthook = previous


def _obj(name: str):
    """An object by name (undo and file loads replace the Python objects, so none is kept)."""
    return bpy.data.objects[name]


def _rotation_value(mode: str, q: Quaternion):
    """(channel, value) setting a bone in rotation mode `mode` to the rotation q."""
    if mode == 'QUATERNION':
        return "rotation_quaternion", tuple(q)
    if mode == 'AXIS_ANGLE':
        axis, angle = q.to_axis_angle()
        return "rotation_axis_angle", (angle, *axis)
    return "rotation_euler", tuple(q.to_euler(mode))


#: Identity value of each pose channel (Alt+R and healing put these back).
IDENTITY = {
    "location": (0.0, 0.0, 0.0), "rotation_quaternion": (1.0, 0.0, 0.0, 0.0), "rotation_euler": (0.0, 0.0, 0.0),
    "rotation_axis_angle": (0.0, 0.0, 1.0, 0.0), "scale": (1.0, 1.0, 1.0),
}


def _finite_inactive_rotations(pose_bone) -> bool:
    """Whether the rotation channels a bone's rotation mode does not use hold finite values."""
    active = {'QUATERNION': "rotation_quaternion", 'AXIS_ANGLE': "rotation_axis_angle"}.get(
        pose_bone.rotation_mode, "rotation_euler"
    )
    return all(
        math.isfinite(v) for channel in ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
        if channel != active for v in getattr(pose_bone, channel)
    )


class Sequences(RuleBasedStateMachine):
    """One scene per example; each rule is one step a user could take, checked by `_step`."""

    def __init__(self) -> None:
        super().__init__()
        if not hasattr(bpy.types.Object, "fabrik"):
            fabrik_addon.register()
        steps.build_scene()
        self.enabled = True
        #: What the model expects, kept with undo checkpoints: live solving per rig, bones set to NaN on purpose
        #: (object, bone), bones and rig objects scaled to zero (object, bone or "").
        self.model = {"live": {name: True for name in steps.RIGS}, "nan": set(), "zero": set()}
        self.checkpoint = None
        self.counter = 0
        self.folder = tempfile.mkdtemp(prefix="fabrik_sequences_")

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        if not hasattr(bpy.types.Object, "fabrik"):
            fabrik_addon.register()  # the next example (and the fixture) expect it registered

    # -- the frame of every step -----------------------------------------------------------------------------

    def _step(self, edit=None, act=None, frame_changed=False, fresh=(), compare_with=None, refusals=()) -> None:
        """Run one step and check every invariant.

        `edit` is the user's own change (its effects are the expected state:
        the snapshot is taken after it), `act` what then runs with the
        add-on's part in it (operators, handlers, callbacks); the scene then
        settles as after an edit in the viewport. `fresh` names rigs solved
        by this step whose status must match even with live solving off.
        `compare_with` replaces the snapshot (an undo compares with the state
        it went back to). `refusals` are ERROR reports `act` may give.
        """
        _escaped.clear()
        output = io.StringIO()
        with redirect_stdout(output):  # the add-on prints the traceback when it stops a rig's live solving
            reach = steps.reachable(self.enabled)
            if edit is not None:
                edit()
            reach = steps.merge(reach, steps.reachable(self.enabled))
            before = steps.snapshot()
            if compare_with is not None:
                before, earlier_reach = compare_with
                reach = steps.merge(reach, earlier_reach)
            if act is not None:
                try:
                    act()
                except (RuntimeError, ValueError) as exc:
                    if not any(text in str(exc) for text in refusals):
                        raise
            bpy.context.view_layer.update()
        self._check(before, steps.merge(reach, steps.reachable(self.enabled)), frame_changed, set(fresh),
                    output.getvalue())

    def _check(self, before, reach, frame_changed, fresh, output) -> None:
        """Assert every invariant after a step (see the module's docstring); `output` is what the step printed."""
        problems = [f"an exception reached Blender:\n{text}" for text in _escaped]
        problems += [f"not finite: {text}" for text in steps.non_finite(self.model["nan"])]
        changes = steps.compare(before, steps.snapshot(), reach, frame_changed)
        problems += [f"changed outside the add-on's reach: {text}" for text in changes]
        if self.enabled:
            from fabrik_addon.blender.rig.status import statuses

            for name in steps.RIGS:
                rig = _obj(name)
                status = statuses.get(name)
                message = status.message if status is not None else ""
                expected = self.model["live"][name]
                if rig.fabrik.live != expected:
                    stopped_by_zero_scale = (name, "") in self.model["zero"] and ZERO_SCALE in message
                    if expected and stopped_by_zero_scale:
                        self.model["live"][name] = False  # designed: a rig with no space to solve in stops
                    else:
                        problems.append(f"'{name}': live solving is {rig.fabrik.live}, expected {expected}: {message}")
                designed_stop = (name, "") in self.model["zero"] and ZERO_SCALE in message
                if "live solving stopped" in message and not designed_stop:
                    problems.append(f"'{name}': {message}")
                if "failed" in message:
                    problems.append(f"'{name}': {message}")
                if status is not None and (rig.fabrik.live or name in fresh):
                    problems += [f"'{name}': {text}" for text in steps.status_mismatches(rig, status)]
        if problems:
            raise AssertionError("\n".join(problems) + (f"\n--- printed:\n{output}" if output.strip() else ""))

    def _rig_bone(self, rig_name: str, index: int) -> str:
        """A bone of a rig, by an index taken modulo its bone count."""
        bones = _obj(rig_name).data.bones
        return bones[index % len(bones)].name

    def _rename_in_model(self, rig_name: str, old: str, new: str) -> None:
        """Keep the model's bone names in step with a rename."""
        for key in ("nan", "zero"):
            self.model[key] = {(o, new if (o, b) == (rig_name, old) else b) for o, b in self.model[key]}

    @staticmethod
    def _targets() -> list[str]:
        """Empties in the scene that an effector may read (targets, poles, and ones left from removed effectors)."""
        return sorted(o.name for o in bpy.context.scene.objects if o.type == 'EMPTY' and o.name not in steps.BYSTANDERS)

    @staticmethod
    def _override(rig_name: str, *others):
        """A context where the rig is active and selected (with `others`), as the add-on's operators need."""
        rig = _obj(rig_name)
        return bpy.context.temp_override(
            active_object=rig, object=rig, selected_objects=[rig, *others], selected_editable_objects=[rig, *others]
        )

    # -- time ------------------------------------------------------------------------------------------------

    @rule(frame=st.integers(0, 24))
    def change_frame(self, frame):
        self._step(act=lambda: bpy.context.scene.frame_set(frame), frame_changed=True)

    # -- targets ---------------------------------------------------------------------------------------------

    @rule(index=st.integers(0, 50), offset=st.tuples(*[st.floats(-1.0, 1.0)] * 3), key=st.booleans())
    def move_target(self, index, offset, key):
        """Drag a target (or pole) in the viewport, and maybe key it where it now is."""
        def edit():
            targets = self._targets()
            if not targets:
                return
            target = _obj(targets[index % len(targets)])
            scale = 0.02 if target.name.startswith("HandTarget") else 0.2  # about a tenth of the rig
            target.location += Vector(offset) * scale
            if key:
                target.keyframe_insert("location", frame=bpy.context.scene.frame_current)

        self._step(edit=edit)

    @rule(index=st.integers(0, 50))
    def delete_target(self, index):
        """X > Delete on a target or pole: unlinked from the scene, kept alive only by the effector's pointer."""
        def edit():
            targets = self._targets()
            if not targets:
                return
            doomed = _obj(targets[index % len(targets)])
            for other in bpy.context.view_layer.objects:
                other.select_set(other == doomed)
            bpy.context.view_layer.objects.active = doomed
            assert bpy.ops.object.delete() == {'FINISHED'}

        self._step(edit=edit)

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20))
    def replace_target(self, rig, index):
        """Give an effector whose target was deleted a new one, next to its tip."""
        def edit():
            effectors = _obj(rig).fabrik.effectors
            if not len(effectors):
                return
            effector = effectors[index % len(effectors)]
            if effector.target is not None:
                return
            self.counter += 1
            bone = _obj(rig).data.bones.get(effector.bone)
            place = _obj(rig).matrix_world @ bone.tail_local if bone is not None else Vector()
            effector.target = rigbuild.make_target(f"New{self.counter}", place, size=0.02)

        self._step(edit=edit)

    # -- bones -----------------------------------------------------------------------------------------------

    @rule(rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20))
    def rename_bone(self, rig, index):
        """Rename a bone through `bone.name` (as the Outliner and the Bone properties do)."""
        def edit():
            bone = _obj(rig).data.bones[self._rig_bone(rig, index)]
            self.counter += 1
            old, new = bone.name, f"{bone.name.split('.r')[0]}.r{self.counter}"
            bone.name = new
            self._rename_in_model(rig, old, new)

        self._step(edit=edit)

    @rule(rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20), mode=st.sampled_from(MODES))
    def change_rotation_mode(self, rig, index, mode):
        self._step(edit=lambda: setattr(_obj(rig).pose.bones[self._rig_bone(rig, index)], "rotation_mode", mode))

    @rule(
        rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20), angle=st.floats(-3.0, 3.0),
        axis=st.sampled_from(((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.6, 0.0, 0.8))),
    )
    def pose_bone(self, rig, index, angle, axis):
        """Rotate a bone by hand (FK), in whatever rotation mode it is in."""
        def edit():
            pose_bone = _obj(rig).pose.bones[self._rig_bone(rig, index)]
            channel, value = _rotation_value(pose_bone.rotation_mode, Quaternion(axis, angle))
            setattr(pose_bone, channel, value)

        self._step(edit=edit)

    @rule(
        rig=st.sampled_from((steps.CHAIN, steps.ARM)), index=st.integers(0, 20),
        kind=st.sampled_from(("cone", "hinge", "free")), degrees=st.sampled_from((5.0, 40.0)),
    )
    def limit_bone(self, rig, index, kind, degrees):
        """Set a bone's IK limits (Bone properties > Inverse Kinematics): a swing cone, a hinge, or none."""
        def edit():
            pose_bone = _obj(rig).pose.bones[self._rig_bone(rig, index)]
            r = math.radians(degrees)
            pose_bone.lock_ik_x, pose_bone.lock_ik_y, pose_bone.lock_ik_z = False, False, kind == "hinge"
            pose_bone.use_ik_limit_x = pose_bone.use_ik_limit_z = kind != "free"
            pose_bone.ik_min_x, pose_bone.ik_max_x = -r, r
            pose_bone.ik_min_z, pose_bone.ik_max_z = -r, r

        self._step(edit=edit)

    @rule(
        rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20),
        kind=st.sampled_from(("nan_rotation", "nan_location", "zero_scale_parent", "zero_scale_rig")),
    )
    def poison(self, rig, index, kind):
        """A channel set to NaN (a broken driver or script), or a parent scaled to zero (a bone or the rig)."""
        def edit():
            obj = _obj(rig)
            name = self._rig_bone(rig, index)
            pose_bone = obj.pose.bones[name]
            if kind == "nan_rotation":
                channel, _ = _rotation_value(pose_bone.rotation_mode, Quaternion())
                value = list(getattr(pose_bone, channel))
                value[index % len(value)] = math.nan
                setattr(pose_bone, channel, value)
                self.model["nan"].add((rig, name))
            elif kind == "nan_location":
                value = list(pose_bone.location)
                value[index % 3] = math.nan
                pose_bone.location = value
                self.model["nan"].add((rig, name))
            elif kind == "zero_scale_parent":
                parents = [b.name for b in obj.data.bones if b.children]
                name = parents[index % len(parents)]
                obj.pose.bones[name].scale = (0.0, 0.0, 0.0)
                self.model["zero"].add((rig, name))
            else:
                obj.scale = (1.0, 0.0, 1.0)
                self.model["zero"].add((rig, ""))

        self._step(edit=edit)

    @precondition(lambda self: self.model["nan"] or self.model["zero"])
    @rule()
    def heal(self):
        """Put finite values back where NaN was set, and scale 1 where zero was."""
        def edit():
            for obj_name, bone in self.model["nan"] | self.model["zero"]:
                obj = _obj(obj_name)
                if not bone:
                    obj.scale = (1.0, 1.0, 1.0)
                    continue
                pose_bone = obj.pose.bones.get(bone)
                if pose_bone is None:
                    continue
                for channel, identity in IDENTITY.items():
                    value = tuple(getattr(pose_bone, channel))
                    fixed = tuple(v if math.isfinite(v) else i for v, i in zip(value, identity))
                    if channel == "scale" and (obj_name, bone) in self.model["zero"]:
                        fixed = identity
                    if fixed != value:
                        setattr(pose_bone, channel, fixed)
            self.model["nan"], self.model["zero"] = set(), set()

        self._step(edit=edit)

    @rule(rig=st.sampled_from(steps.RIGS), use_operator=st.booleans())
    def clear_transforms(self, rig, use_operator):
        """Alt+R, Alt+G, Alt+S on every bone: the operator in Pose Mode, or the same values set from Python."""
        def edit():
            obj = _obj(rig)
            kept = set()
            if use_operator:
                # Alt+R clears the rotation of each bone's own mode only: a NaN that a mode switch carried into
                # another mode's channel stays (Blender's doing: found by this test).
                kept = {(rig, b.name) for b in obj.pose.bones if not _finite_inactive_rotations(b)}
                bpy.context.view_layer.objects.active = obj
                with self._override(rig):
                    bpy.ops.object.mode_set(mode='POSE')
                    bpy.ops.pose.select_all(action='SELECT')
                    assert bpy.ops.pose.transforms_clear() == {'FINISHED'}
                    bpy.ops.object.mode_set(mode='OBJECT')
            else:
                for pose_bone in obj.pose.bones:
                    for channel, identity in IDENTITY.items():
                        setattr(pose_bone, channel, identity)
            self.model["nan"] = {(o, b) for o, b in self.model["nan"] if o != rig} | kept
            self.model["zero"] = {(o, b) for o, b in self.model["zero"] if o != rig or not b}

        reach = steps.reachable(self.enabled).get(rig, set())
        self._step(edit=edit)
        # Leaving Pose Mode runs the handlers inside the edit: the bones no chain holds must still be at rest.
        obj = _obj(rig)
        reach |= steps.reachable(self.enabled).get(rig, set())
        for pose_bone in obj.pose.bones:
            if pose_bone.name not in reach:
                difference = max(abs(a - b) for row, unit in zip(pose_bone.matrix_basis, Matrix.Identity(4))
                                 for a, b in zip(row, unit))
                assert difference < 1e-6, f"'{rig}': {pose_bone.name} not at rest after Alt+R: {pose_bone.matrix_basis}"

    # -- the add-on's settings and operators -----------------------------------------------------------------

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS))
    def toggle_live(self, rig):
        def act():
            settings = _obj(rig).fabrik
            settings.live = not settings.live
            self.model["live"][rig] = settings.live

        self._step(act=act)

    @precondition(lambda self: self.enabled)
    @rule(
        rig=st.sampled_from(steps.RIGS),
        change=st.one_of(
            st.tuples(st.just("solver"), st.sampled_from(('FABRIK', 'CCD', 'JACOBIAN_TRANSPOSE', 'DLS', 'TWO_BONE'))),
            st.tuples(st.just("iterations"), st.sampled_from((1, 5, 50, 200))),
            st.tuples(st.just("tolerance"), st.sampled_from((0.0, 1e-6, 1e-4, 1e-3, 1e-2))),
            st.tuples(st.just("start"), st.sampled_from(('FK', 'PREVIOUS'))),
        ),
    )
    def change_setting(self, rig, change):
        self._step(act=lambda: setattr(_obj(rig).fabrik, *change))

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from((steps.CHAIN, steps.HAND, steps.ARM)), index=st.integers(0, 20),
          chain_length=st.integers(0, 3))
    def add_effector(self, rig, index, chain_length):
        """Select a bone, shift-select a new empty, press + (the IK rig is left to its constraint)."""
        if len(_obj(rig).fabrik.effectors) >= 7:
            return
        self.counter += 1
        name = f"Added{self.counter}"

        def edit():
            obj = _obj(rig)
            bone = obj.data.bones[self._rig_bone(rig, index)]
            rigbuild.make_target(name, obj.matrix_world @ (bone.tail_local + Vector((0.02, 0.0, -0.02))), size=0.02)
            obj.data.bones.active = bone

        def act():
            with self._override(rig, _obj(name)):
                assert bpy.ops.fabrik.effector_add() == {'FINISHED'}
            _obj(rig).fabrik.effectors[-1].chain_length = chain_length

        self._step(edit=edit, act=act)

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS), index=st.integers(0, 20))
    def remove_effector(self, rig, index):
        def act():
            count = len(_obj(rig).fabrik.effectors)
            if count:
                with self._override(rig):
                    assert bpy.ops.fabrik.effector_remove(index=index % count) == {'FINISHED'}

        self._step(act=act)

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS))
    def solve_now(self, rig):
        def act():
            with self._override(rig):
                assert bpy.ops.fabrik.solve() == {'FINISHED'}

        zero = (rig, "") in self.model["zero"]
        self._step(act=act, fresh=() if zero else (rig,), refusals=(ZERO_SCALE,) if zero else ())

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS), first=st.integers(1, 20), length=st.integers(1, 4),
          use_operator=st.booleans())
    def bake(self, rig, first, length, use_operator):
        """Bake a few frames (live solving is off afterwards, so playback shows the keys)."""
        from fabrik_addon.blender.bake import baking

        if not len(_obj(rig).fabrik.effectors):
            return

        def act():
            if use_operator:
                with self._override(rig):
                    assert bpy.ops.fabrik.bake(frame_start=first, frame_end=first + length - 1) == {'FINISHED'}
            else:
                baking.bake_object(_obj(rig), range(first, first + length))
            self.model["live"][rig] = False

        zero = (rig, "") in self.model["zero"]
        refusals = (ZERO_SCALE,) if zero else ()
        # A bake visits its frames and comes back with frame_set: animated channels take their curves' values. A
        # rig scaled to zero is refused before any frame is visited: an unkeyed value may then stay as it was.
        self._step(act=act, refusals=refusals, frame_changed="either" if zero else True)
        self.model["live"][rig] = _obj(rig).fabrik.live if zero else self.model["live"][rig]

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS))
    def convert_constraints(self, rig):
        def act():
            with self._override(rig):
                assert bpy.ops.fabrik.convert_constraints() in ({'FINISHED'}, {'CANCELLED'})
            self.model["live"][rig] = _obj(rig).fabrik.live  # converting switches live solving on

        self._step(act=act)

    @precondition(lambda self: self.enabled)
    @rule(rig=st.sampled_from(steps.RIGS))
    def restore_constraints(self, rig):
        def act():
            with self._override(rig):
                if bpy.ops.fabrik.restore_constraints.poll():
                    assert bpy.ops.fabrik.restore_constraints() == {'FINISHED'}
            self.model["live"][rig] = _obj(rig).fabrik.live

        self._step(act=act)

    # -- undo, files, the add-on itself ----------------------------------------------------------------------

    @rule()
    def push_undo_step(self):
        """What the UI does after each operator: the state an undo goes back to."""
        def act():
            bpy.ops.ed.undo_push(message="sequence checkpoint")
            self.checkpoint = (copy.deepcopy(self.model), steps.snapshot(), steps.reachable(self.enabled))

        self._step(act=act)

    @precondition(lambda self: self.checkpoint is not None)
    @rule()
    def undo(self):
        """Ctrl+Z back to the last pushed step (the current state is pushed first, as the UI would have)."""
        model, state, reach = self.checkpoint

        def act():
            bpy.ops.ed.undo_push(message="sequence current")
            assert bpy.ops.ed.undo() == {'FINISHED'}
            self.model = copy.deepcopy(model)

        # An undo may evaluate the animation again: animated channels hold their curves' values or those of then.
        self._step(act=act, compare_with=(state, reach), frame_changed="either")

    @rule()
    def save_and_reload(self):
        def act():
            path = f"{self.folder}/sequence.blend"
            frame = bpy.context.scene.frame_current
            assert bpy.ops.wm.save_as_mainfile(filepath=path) == {'FINISHED'}
            assert bpy.ops.wm.open_mainfile(filepath=path) == {'FINISHED'}
            self.checkpoint = None  # a load starts a new undo history
            bpy.context.scene.frame_set(frame)

        self._step(act=act, frame_changed=True)

    @precondition(lambda self: self.enabled)
    @rule()
    def disable_addon(self):
        def act():
            fabrik_addon.unregister()
            self.enabled = False

        self._step(act=act)

    @precondition(lambda self: not self.enabled)
    @rule()
    def enable_addon(self):
        def act():
            fabrik_addon.register()
            self.enabled = True

        self._step(act=act)


def test_random_sequences_of_user_steps_keep_every_invariant(watched_addon):
    run_state_machine_as_test(
        Sequences,
        settings=settings(
            max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
