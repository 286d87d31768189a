# SPDX-License-Identifier: GPL-3.0-or-later
"""Live solving: handlers that re-solve rigs on frame changes and when anything a solve reads changes."""

from __future__ import annotations

import traceback

import bpy
from bpy.app.handlers import persistent

from . import animdata, effector_values, integrity, rig, solving, steady
from .effector_values import EffectorValues, comparable

# Our own pose writes tag the rig for another depsgraph update; this guard and
# the input signature below keep us from reacting to them.
_busy = False
#: Per rig: the inputs of the last live solve (matrices, settings, structure), with its channels as that
#: solve left them -- so our own writes compare equal and only someone else's change re-solves.
_last_inputs: dict[str, tuple] = {}

#: How many objects the file had when the per-rig tables were last pruned.
_objects_seen = -1


def _forget_deleted_rigs() -> int:
    """Drop what the tables keep per rig for rigs that are gone (checked when the file's object count changes);
    the file's object count."""
    global _objects_seen
    objects = bpy.data.objects
    count = len(objects)
    if count == _objects_seen:
        return count
    _objects_seen = count
    remembered = set(_last_inputs) | set(_ik_animation) | set(solving.status) | steady.remembered()
    for name in remembered | rig.cached_rigs() | solving.remembered_rigs():
        if objects.get(name) is None:
            _last_inputs.pop(name, None)
            _ik_animation.pop(name, None)
            steady.forget(name)
            solving.forget(name)
            rig.forget(name)
    return count


def forget_inputs(obj_name: str) -> None:
    """Make the next update solve this rig even if nothing it reads has changed (live switched, settings)."""
    _last_inputs.pop(obj_name, None)
    steady.forget(obj_name)


#: Per scene (by pointer): the object counts (the file's, the scene's) at its last scan, and its armature objects.
_armatures_in: dict[int, tuple] = {}


def live_rigs(scene, rescan: bool = True, objects: int | None = None) -> list:
    """Armature objects in the scene with live solving on (not while in Edit Mode: their bones are out of date).

    Without `rescan` (a frame change) the scene's armature objects from the
    last scan are used while the file and the scene hold as many objects as
    then: scanning every object of a large scene on every frame costs more
    than the counts (0.36 against 0.12 ms with 3000 objects), and a file
    without armatures costs nothing. `objects` is the file's object count,
    where the caller has it.
    """
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


def _inputs_of(obj, depsgraph) -> tuple[tuple, list[EffectorValues]]:
    """A hashable snapshot of what a solve of obj reads apart from its channels: matrices of the rig, targets and
    poles, its settings and its structure; and the effectors as it read them (with their problems and their
    targets' and poles' world matrices), for the solve to go on from."""
    settings = obj.fabrik
    values = effector_values.read(obj)
    # The skeleton is rebuilt (a new object) only when bones, rest pose, IK limits or stretch factors change.
    snapshot = [
        integrity.problems_of(obj, depsgraph, values),
        comparable(_world_or_none(obj, "", depsgraph)),
        settings.solver, settings.iterations, settings.tolerance, settings.start, settings.influence,
        id(rig.skeleton_of(obj)),
    ]
    for value in values:
        value.target_world = _world_or_none(value.target, value.subtarget, depsgraph)
        value.pole_world = _world_or_none(value.pole_target, value.pole_subtarget, depsgraph)
        snapshot.append((comparable(value.target_world), comparable(value.pole_world), value.solved()))
    return tuple(snapshot), values


def _world_or_none(target, subtarget: str, depsgraph):
    """World matrix of an object or of one of its bones, a copy (None when there is none)."""
    if target is None:
        return None
    try:
        return solving.world_matrix(target, subtarget, depsgraph).copy()
    except solving.EffectorError:
        return None  # a missing bone: the solve reports it


#: Live rigs our handlers checked at the last evaluation they were told of. Every change to a rig's structure
#: tags its object or armature, and the next evaluation lists what it updated; so while each evaluation is
#: seen, one that lists neither changed no structure. (Blender evaluates once more after frame_change_post
#: handlers, unseen: a later handler that edits bones there goes unnoticed until the rig is next updated.)
_watched: set[str] = set()


def _unchanged_parts(obj, updated: "_Updates | None") -> frozenset[str]:
    """The parts of obj's structure (`rig.BONES`, `rig.SETTINGS`) this evaluation left as they were when last
    checked: none unless the rig was watched and the evaluation's updates are known.

    An edit of a pose bone's IK setting tags the object's geometry, and
    Blender then tags its armature data as well (its legacy tag for object
    data); an animated rig's object is updated on every frame without that. So
    where the data was not updated and no animation or driver reaches an IK
    setting, the settings are as they were, though the object was updated
    (a 159-bone rig: 15 bulk reads, 75 us a frame).
    """
    if updated is None or obj.name not in _watched:
        return frozenset()
    parts = set()
    data_updated = updated.has(obj.data)
    if not data_updated:
        parts.add(rig.BONES)
    if not (data_updated or _ik_animated(obj)) or not updated.has(obj):
        parts.add(rig.SETTINGS)
    return frozenset(parts)


#: The pose-bone IK settings a rig's structure reads, as animation addresses them (`pose.bones["..."].<name>`).
_IK_PATHS = tuple(f".{name}" for name, _ in rig.LIMIT_SETTINGS) + (".ik_stretch",)

#: Per rig: (what its animation was, whether any of it reaches an IK setting), for `_ik_animated`.
_ik_animation: dict[str, tuple] = {}


def _ik_animated(obj) -> bool:
    """Whether the rig's animation (its action's F-curves, NLA strips) or drivers may set an IK setting: looked at
    again only when its F-curves' paths (`animdata.fcurve_paths`) or the number of drivers or NLA tracks change."""
    animation_data = obj.animation_data
    if animation_data is None:
        return False
    drivers = animation_data.drivers
    paths = animdata.fcurve_paths(obj)
    key = (paths, len(drivers), len(animation_data.nla_tracks))  # (the same paths are the same object: cheap)
    known = _ik_animation.get(obj.name)
    if known is not None and known[0] == key:
        return known[1]
    # An NLA strip's action may animate anything: treated as animating the settings.
    animated = bool(key[2]) or any(path.endswith(_IK_PATHS) for path in [*paths, *(d.data_path for d in drivers)])
    _ik_animation[obj.name] = (key, animated)
    return animated


class _Updates:
    """What an evaluation updated, asked data-block by data-block (the list of updates is read only when an
    armature was among them or an object is asked about: an animated scene updates many objects a frame)."""

    def __init__(self, depsgraph) -> None:
        self.depsgraph = depsgraph
        self.armatures = depsgraph.id_type_updated('ARMATURE')
        self.pointers: set[int] | None = None

    def has(self, id_data) -> bool:
        """Whether the evaluation updated this (original) data-block."""
        if isinstance(id_data, bpy.types.Armature) and not self.armatures:
            return False
        if self.pointers is None:
            self.pointers = {update.id.original.as_pointer() for update in self.depsgraph.updates}
        return id_data.as_pointer() in self.pointers


def solve_live(scene, depsgraph, only_if_inputs_changed: bool) -> None:
    """Solve every live rig of the scene; a rig that fails is switched off with its error shown."""
    global _busy
    if _busy:
        return
    _busy = True
    watched = set()
    try:
        rigs = live_rigs(scene, rescan=only_if_inputs_changed, objects=_forget_deleted_rigs())
        # A frame change re-reads only what the evaluation updated; any other update checks everything.
        updated = _Updates(depsgraph) if depsgraph is not None and rigs and not only_if_inputs_changed else None
        for obj in rigs:
            try:
                if updated is not None:
                    # A frame where only the targets moved solves from what the last solve read.
                    steady_inputs = steady.solve_frame(obj, depsgraph, updated, obj.name in _watched)
                    if steady_inputs is not None:
                        watched.add(obj.name)
                        _last_inputs[obj.name] = steady_inputs
                        continue
                # The rig's structure is read and checked once here; the solve uses what was read.
                with rig.frozen_structure(obj, _unchanged_parts(obj, updated)):
                    watched.add(obj.name)
                    inputs, values = _inputs_of(obj, depsgraph)
                    # Effectors follow renamed bones and let deleted targets go; read again where that changed one.
                    if integrity.untidy(obj, values) and integrity.tidy(obj, depsgraph):
                        inputs, values = _inputs_of(obj, depsgraph)
                    pose = solving.read_pose(obj)
                    # A frame change always solves: the channels are read before only where they are compared
                    # (and the solve goes on from what was read).
                    if only_if_inputs_changed and _last_inputs.get(obj.name) == (inputs, pose.snapshot()):
                        continue
                    _solve(obj, depsgraph, inputs, values, pose)
            except Exception as exc:  # never raise into Blender's event loop
                _last_inputs.pop(obj.name, None)
                steady.forget(obj.name)
                obj.fabrik.live = False
                solving.status[obj.name] = solving.RigStatus(message=f"live solving stopped: {exc}", ok=False)
                print(f"FABRIK: live solving of '{obj.name}' stopped:\n{traceback.format_exc()}")
    finally:
        _watched.clear()
        _watched.update(watched)
        _busy = False


def _solve(obj, depsgraph, inputs: tuple, values: list[EffectorValues], pose: solving.PoseRead | None = None) -> None:
    """Solve one rig from its effectors as its inputs read them (and its pose as read, where it was), and remember
    the inputs with the channels as the solve left them."""
    steady.forget(obj.name)
    pose = pose or solving.read_pose(obj)
    solving.solve_object(obj, depsgraph, checked=values, pose=pose)
    if obj.name in solving.again:  # put off to the next update: nothing on screen counts as solved yet
        solving.again.discard(obj.name)
        _last_inputs.pop(obj.name, None)
        # In the GUI nothing else may come for a while (a tag inside this handler fires no handler again): ask
        # for that update from a timer rather than wait for one.
        # Not in background mode: no event loop runs the timer there (the caller's next update solves), and a
        # timer left registered at exit crashes Blender 4.2.
        _put_off.add(obj.name)
        if not bpy.app.background and not bpy.app.timers.is_registered(tag_put_off):
            bpy.app.timers.register(tag_put_off, first_interval=0.0)
        return
    # The channels as the solve left them: what it read and wrote (what it wrote by other means read again).
    _last_inputs[obj.name] = (inputs, pose.snapshot())
    if depsgraph is not None:
        steady.remember(obj, depsgraph, inputs, values, pose)


#: Live rigs whose solve was put off to the next update (`solving.again`), for `tag_put_off`.
_put_off: set[str] = set()


def tag_put_off() -> None:
    """Tag the rigs whose solve was put off for an update, so the depsgraph handler solves them (a one-shot
    timer callback)."""
    names = list(_put_off)
    _put_off.clear()
    for name in names:
        try:
            obj = bpy.data.objects.get(name)
            if obj is not None and obj.type == 'ARMATURE' and obj.fabrik.live:
                obj.update_tag()
        except Exception:  # the add-on was disabled or the file replaced meanwhile: nothing left to solve
            pass
    return None


def solve_now(obj, depsgraph) -> None:
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
def on_frame_change(scene, depsgraph) -> None:
    """Re-solve after animation has been evaluated for the new frame."""
    solve_live(scene, depsgraph, only_if_inputs_changed=False)


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    """Re-solve when a watched target or the rig itself has moved."""
    solve_live(scene, depsgraph, only_if_inputs_changed=True)


@persistent
def on_load(_filepath) -> None:
    """References from the previous file are stale after a load."""
    global _objects_seen
    _objects_seen = -1
    _watched.clear()
    _last_inputs.clear()
    _ik_animation.clear()
    _armatures_in.clear()
    steady.forget()
    solving.forget()
    rig.clear_cache()


@persistent
def on_undo(*_args) -> None:
    """Undo and redo put back data-blocks our handlers were not told of: check every rig's structure again."""
    _watched.clear()
    _ik_animation.clear()
    _armatures_in.clear()
    steady.forget()


_handlers = (
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.load_post, on_load),
    (bpy.app.handlers.undo_post, on_undo),
    (bpy.app.handlers.redo_post, on_undo),
)


def register() -> None:
    """Install the handlers (once)."""
    for handler_list, function in _handlers:
        if function not in handler_list:
            handler_list.append(function)


def unregister() -> None:
    """Remove the handlers and the timer, and forget all state."""
    for handler_list, function in _handlers:
        while function in handler_list:
            handler_list.remove(function)
    if bpy.app.timers.is_registered(tag_put_off):
        bpy.app.timers.unregister(tag_put_off)
    _put_off.clear()
    on_load(None)
