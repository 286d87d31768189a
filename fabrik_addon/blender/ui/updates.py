# SPDX-License-Identifier: GPL-3.0-or-later
"""What a changed setting sets off: the properties' update callbacks that reach the live handler, the overlay and
the effectors' records (`props.UPDATES`), kept above the properties they watch."""

from __future__ import annotations

import bpy

from ..effectors import integrity
from ..live import handlers
from ..rig import animdata, armature, channels, held_bones, props, status
from ..rig.props import FabrikEffector
from . import overlay, setup_ops


def stretch_changed(effector: FabrikEffector, context: bpy.types.Context) -> None:
    """Stretch switched: a live rig solves again at once (setting changes are no depsgraph update), else the
    bones stretched before get scale 1 back once no effector stretches."""
    obj = effector.id_data
    try:
        if obj.fabrik.live:
            handlers.solve_now(obj, context.evaluated_depsgraph_get())
        elif not any(e.use_stretch for e in obj.fabrik.effectors):
            held_bones.write_stretch(obj, armature.skeleton_of(obj), {})
    except Exception as exc:  # never raise into Blender's UI; the panel shows why
        status.show(obj.name, status.RigStatus(message=f"solve after a stretch change failed: {exc}", ok=False))


def live_changed(settings, _context: bpy.types.Context) -> None:
    """Live solving switched: off gives the chains back the animator's pose, on solves at the next update."""
    obj = settings.id_data
    handlers.forget_inputs(obj.name)  # on: the next update solves even if nothing moved since the last solve
    if settings.live:
        obj.update_tag()
        return
    try:
        channels.give_back(obj)
    except Exception as exc:  # never raise into Blender's UI; the panel shows why
        status.show(obj.name, status.RigStatus(message=f"giving the pose back failed: {exc}", ok=False))
        return
    status.show(obj.name, None)  # the last solve's status no longer describes the pose on screen


def bone_changed(effector: FabrikEffector, context: bpy.types.Context) -> None:
    """A bone name set: note where that bone sits, so its renames are followed."""
    integrity.remember_bones(effector.id_data, effector)
    props.setting_changed(effector, context)


def root_bone_changed(settings, context: bpy.types.Context) -> None:
    """The Root bone set: note where it sits, so its renames are followed."""
    integrity.remember_root(settings.id_data)
    props.setting_changed(settings, context)


def target_changed(effector: FabrikEffector, context: bpy.types.Context) -> None:
    """A new target replaces one that was deleted: the note of the deleted one goes."""
    if effector.target is not None and effector.lost_target:
        effector.lost_target = ""
    bone_changed(effector, context)


def pole_changed(effector: FabrikEffector, context: bpy.types.Context) -> None:
    """A new pole target replaces one that was deleted: the note of the deleted one goes."""
    if effector.pole_target is not None and effector.lost_pole:
        effector.lost_pole = ""
    bone_changed(effector, context)


def active_effector_changed(settings, _context: bpy.types.Context) -> None:
    """An effector picked in the list: its tip bone becomes the armature's active bone, and selected; nothing
    changes where that bone leads to this effector already or to another, so the list and the selection handler
    never bounce."""
    overlay.redraw_viewports(None, _context)  # the overlay draws the active chain's limits
    obj = settings.id_data
    index = settings.active_effector
    if obj is None or obj.type != 'ARMATURE' or obj.mode == 'EDIT' or not 0 <= index < len(settings.effectors):
        return
    bones = obj.data.bones
    bone = bones.get(settings.effectors[index].bone)
    active = bones.active
    if bone is None or (active is not None and setup_ops.effector_for_bone(obj, active.name) == index):
        return
    if setup_ops.effector_for_bone(obj, bone.name) != index:
        return  # (another effector shares the tip bone: selecting it would pick that one)
    animdata.set_selected(obj.pose.bones[bone.name], True)
    bones.active = bone


def register() -> None:
    """Hand the callbacks to the properties."""
    props.UPDATES.update(
        stretch=stretch_changed,
        live=live_changed,
        bone=bone_changed,
        root_bone=root_bone_changed,
        target=target_changed,
        pole=pole_changed,
        active_effector=active_effector_changed,
    )


def unregister() -> None:
    """Take them back: the properties go quiet."""
    props.UPDATES.clear()
