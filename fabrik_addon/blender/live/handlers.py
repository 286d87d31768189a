# SPDX-License-Identifier: GPL-3.0-or-later
"""Live solving: handlers that re-solve rigs on frame changes and when anything a solve reads changes.

A live frame of a rig is one read, one solve, one write (`solve`); a frame
where only the targets moved goes on from what the last frame read
(`onwards`).
"""

from __future__ import annotations

import traceback

import bpy
from bpy.app.handlers import persistent

from .. import app_handlers, solve
from ..effectors import effector_values, integrity
from ..effectors.effector_values import EffectorValues, comparable
from ..rig import animdata, armature, memory, moving_root
from ..rig.channels import PoseRead, read_pose
from ..rig.status import RigStatus, show
from . import gc_off, onwards

# Our own pose writes tag the rig for another depsgraph update; this guard and the inputs kept with each rig's
# memory keep us from reacting to them.
_busy = False


def forget_inputs(obj_name: str) -> None:
    """Make the next update solve this rig whole even if nothing it reads has changed (live switched, settings)."""
    memory.forget_reads(obj_name)


#: Per scene (by pointer): the object counts (the file's, the scene's) at its last scan, and its armature objects.
_armatures_in: dict[int, tuple] = {}


def live_rigs(scene: bpy.types.Scene, rescan: bool = True, objects: int | None = None) -> list:
    """Armature objects in the scene with live solving on (not in Edit Mode); without `rescan` (a frame change) the
    last scan's serve while the file holds as many objects as then (`objects`), as scanning every object costs more."""
    if not len(bpy.data.armatures):
        return []
    counts = (len(bpy.data.objects) if objects is None else objects, len(scene.objects))
    known = None if rescan else _armatures_in.get(scene.as_pointer())
    if known is not None and known[0] == counts:
        try:
            return _live_among(known[1])
        except ReferenceError:
            pass  # one of them was removed, another added: scan again
    armatures = [ob for ob in scene.objects if ob.type == 'ARMATURE']
    _armatures_in[scene.as_pointer()] = (counts, armatures)
    return _live_among(armatures)


def _live_among(armatures: list) -> list:
    """The armature objects with live solving on, not in Edit Mode (their bones are out of date there)."""
    return [ob for ob in armatures if ob.fabrik.live and not ob.data.is_editmode]


def _inputs_of(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> tuple[tuple, list[EffectorValues]]:
    """A hashable snapshot of what a solve of obj reads apart from its channels: matrices of the rig, targets and
    poles, its settings and its structure; and the effectors as it read them (with their problems and their
    targets' and poles' world matrices), for the solve to go on from."""
    settings = obj.fabrik
    values = effector_values.read(obj)
    # The skeleton is rebuilt (a new object) only when bones, rest pose, IK limits or stretch factors change.
    snapshot = [
        integrity.problems_of(obj, depsgraph, values),
        comparable(onwards.world_or_none(obj, "", depsgraph)),
        settings.solver, settings.iterations, effector_values.same_if_nan(settings.tolerance), settings.start,
        effector_values.same_if_nan(settings.influence),
        id(armature.skeleton_of(obj)),
        settings.root_mode, settings.root_bone, *map(effector_values.same_if_nan, (
            settings.root_weight, settings.root_distance, settings.root_angle,
        )), moving_root.inputs(obj),
        comparable(onwards.world_or_none(settings.floor, "", depsgraph)),  # (last: `onwards.reused` puts this frame's there)
    ]
    for value in values:
        value.target_world = onwards.world_or_none(value.target, value.subtarget, depsgraph)
        value.pole_world = onwards.world_or_none(value.pole_target, value.pole_subtarget, depsgraph)
        snapshot.append((comparable(value.target_world), comparable(value.pole_world), value.solved()))
    return tuple(snapshot), values


def _unchanged_parts(obj: bpy.types.Object, updated: "onwards.Updates | None") -> frozenset[str]:
    """The parts of obj's structure (`armature.BONES`, `SETTINGS`) this evaluation left as they were: an IK
    setting's edit tags the armature data too, so where that was not updated and nothing animates a setting, they
    stand (none unless the rig was watched)."""
    if updated is None or not memory.of(obj).watched:
        return frozenset()
    parts = set()
    data_updated = updated.has(obj.data)
    if not data_updated:
        parts.add(armature.BONES)
    if not (data_updated or _ik_animated(obj)) or not updated.has(obj):
        parts.add(armature.SETTINGS)
    return frozenset(parts)


#: The pose-bone IK settings a rig's structure reads, as animation addresses them (`pose.bones["..."].<name>`).
_IK_PATHS = tuple(f".{name}" for name, _ in armature.LIMIT_SETTINGS) + (".ik_stretch",)


def _ik_animated(obj: bpy.types.Object) -> bool:
    """Whether the rig's animation (its action's F-curves, NLA strips) or drivers may set an IK setting: looked at
    again only when its F-curves' paths (`animdata.fcurve_paths`) or the number of drivers or NLA tracks change."""
    animation_data = obj.animation_data
    if animation_data is None:
        return False
    drivers = animation_data.drivers
    paths = animdata.fcurve_paths(obj)
    key = (paths, len(drivers), len(animation_data.nla_tracks))  # (the same paths are the same object: cheap)
    kept = memory.of(obj)
    known = kept.ik_animation
    if known is not None and known[0] == key:
        return known[1]
    # An NLA strip's action may animate anything: treated as animating the settings.
    animated = bool(key[2]) or any(path.endswith(_IK_PATHS) for path in [*paths, *(d.data_path for d in drivers)])
    kept.ik_animation = (key, animated)
    return animated


@gc_off.collection_deferred()  # (what a frame makes is freed when it ends)
def solve_live(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph, only_if_inputs_changed: bool) -> None:
    """Solve every live rig of the scene; a rig that fails is switched off with its error shown."""
    global _busy
    if _busy:
        return
    _busy = True
    watched = set()
    try:
        objects = memory.forget_missing(every_name=only_if_inputs_changed)
        rigs = live_rigs(scene, rescan=only_if_inputs_changed, objects=objects)
        # A frame change re-reads only what the evaluation updated; any other update checks everything.
        updated = onwards.Updates(depsgraph) if depsgraph is not None and rigs and not only_if_inputs_changed else None
        for obj in rigs:
            kept = memory.of(obj)
            try:
                if updated is not None:
                    # A frame where only the targets moved goes on from what the last frame read.
                    inputs = onwards.reused(obj, depsgraph, updated, kept.watched, kept)
                    if inputs is not None:
                        watched.add(obj.name)
                        kept.inputs = inputs
                        continue
                # The rig's structure is read and checked once here; the solve uses what was read.
                with armature.frozen_structure(obj, _unchanged_parts(obj, updated)):
                    watched.add(obj.name)
                    inputs, values = _inputs_of(obj, depsgraph)
                    # Effectors follow renamed bones and let deleted targets go; read again where that changed one.
                    if integrity.untidy(obj, values) and integrity.tidy(obj, depsgraph):
                        inputs, values = _inputs_of(obj, depsgraph)
                    pose = read_pose(obj)
                    # A frame change always solves: the channels are read before only where they are compared
                    # (and the solve goes on from what was read).
                    if only_if_inputs_changed and kept.inputs == (inputs, pose.snapshot()):
                        continue
                    _solve(obj, depsgraph, inputs, values, pose)
            except Exception as exc:  # never raise into Blender's event loop
                memory.forget_reads(obj.name)
                obj.fabrik.live = False
                show(obj.name, RigStatus(message=f"live solving stopped: {exc}", ok=False))
                print(f"FABRIK: live solving of '{obj.name}' stopped:\n{traceback.format_exc()}")
    finally:
        # Every change to a rig's structure tags its object or armature, and the next evaluation lists what it
        # updated; so while each evaluation is seen, one that lists neither changed no structure. (Blender
        # evaluates once more after frame_change_post handlers, unseen: a later handler that edits bones there
        # goes unnoticed until the rig is next updated.)
        for name in memory.names():
            memory.of(name).watched = name in watched
        _busy = False


def _solve(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, inputs: tuple, values: list[EffectorValues],
    pose: PoseRead | None = None
) -> None:
    """Solve one rig whole from its effectors as its inputs read them (and its pose as read, where it was), and
    keep the inputs with the channels as the solve left them, and what the next frames may go on from."""
    kept = memory.of(obj)
    kept.read = None
    pose = pose or read_pose(obj)
    result, read_ = solve.solve_object(obj, depsgraph, checked=values, pose=pose)
    if kept.again:  # put off to the next update: nothing on screen counts as solved yet
        kept.inputs = None
        # In the GUI nothing else may come for a while (a tag inside this handler fires no handler again): ask
        # for that update from a timer rather than wait for one.
        # Not in background mode: no event loop runs the timer there (the caller's next update solves), and a
        # timer left registered at exit crashes Blender 4.2.
        if not bpy.app.background and not bpy.app.timers.is_registered(tag_put_off):
            bpy.app.timers.register(tag_put_off, first_interval=0.0)
        return
    # The channels as the solve left them: what it read and wrote (what it wrote by other means read again).
    kept.inputs = (inputs, pose.snapshot())
    if depsgraph is not None and read_ is not None:
        kept.read = onwards.keepable(obj, depsgraph, inputs, values, result, read_)


def tag_put_off() -> None:
    """Tag the rigs whose solve was put off for an update, so the depsgraph handler solves them (a one-shot
    timer callback)."""
    for name in memory.names():
        kept = memory.get(name)
        if kept is None or not kept.again:
            continue
        try:
            obj = bpy.data.objects.get(name)
            if obj is not None and obj.type == 'ARMATURE' and obj.fabrik.live:
                obj.update_tag()
        except Exception:  # the add-on was disabled or the file replaced meanwhile: nothing left to solve
            pass
    return None


def solve_now(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> None:
    """Solve a live rig at once (a setting changed, which is no depsgraph update), as the handlers would."""
    global _busy
    if _busy:
        return
    _busy = True
    try:
        _solve(obj, depsgraph, *_inputs_of(obj, depsgraph))
    finally:
        _busy = False


@persistent
def on_frame_change(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Re-solve after animation has been evaluated for the new frame."""
    solve_live(scene, depsgraph, only_if_inputs_changed=False)


@persistent
def on_depsgraph_update(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Re-solve when a watched target or the rig itself has moved."""
    solve_live(scene, depsgraph, only_if_inputs_changed=True)


@persistent
def on_load(_filepath: str) -> None:
    """References from the previous file are stale after a load."""
    _armatures_in.clear()
    memory.reset()


@persistent
def on_undo(*_args) -> None:
    """Undo and redo put back data-blocks our handlers were not told of: check every rig's structure again."""
    _armatures_in.clear()
    memory.forget_reads()


_handlers = (
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.load_post, on_load),
    (bpy.app.handlers.undo_post, on_undo),
    (bpy.app.handlers.redo_post, on_undo),
)


def register() -> None:
    """Install the handlers (once)."""
    app_handlers.install(_handlers)


def unregister() -> None:
    """Remove the handlers and the timer, and forget all state."""
    app_handlers.remove(_handlers)
    if bpy.app.timers.is_registered(tag_put_off):
        bpy.app.timers.unregister(tag_put_off)
    on_load(None)
