# SPDX-License-Identifier: GPL-3.0-or-later
"""Keep effectors pointing at what the user meant: bones renamed, targets deleted, a rig's own switches.

Blender tells no one the old name of a renamed bone, so each effector keeps,
per bone it names, where that bone sat (rest head, tail, roll, parent, its
place among the armature's bones: `props.FabrikBoneRef`). A rename changes
none of these, so a name that has gone is looked up by them on the next
solve. This lives in the effector (in the file), so it works after a reload
or an undo and leaves nothing on the user's bones.

A target deleted in the viewport is only unlinked from the scenes: the
effector's pointer keeps it alive and saved with the file. Such a target
counts as missing, and the pointer is dropped (before saving, or when the
live path tidies a rig) so the object goes with the next save.
"""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent

from .. import app_handlers
from ..rig.props import FabrikEffector
from ..rig.status import DISABLED, switched_off
from . import pins

#: Effector fields that name bones, with what the user calls them.
BONE_FIELDS = (("bone", "bone"), ("subtarget", "target bone"), ("pole_subtarget", "pole bone"), ("source_bone", ""))

#: Rest places closer than this (armature units, relative to their size) count as the same.
_TOLERANCE = 1e-5


def _armature_of(obj: bpy.types.Object, effector: FabrikEffector, field: str):
    """The armature data whose bone a field names, or None (no armature target, or one in Edit Mode: its bones
    are out of date until it leaves it)."""
    if field in ("bone", "source_bone"):
        holder = obj
    else:
        holder = effector.target if field == "subtarget" else effector.pole_target
    if holder is None or holder.type != 'ARMATURE' or holder.data.is_editmode:
        return None
    return holder.data


def missing_bones(
    obj: bpy.types.Object, effector: FabrikEffector, fields=("bone", "subtarget", "pole_subtarget")
) -> list[str]:
    """The effector's bone fields (of `fields`) that name a bone its armature does not have (fields left empty, and
    armatures in Edit Mode, whose bones are out of date, are not judged)."""
    missing = []
    for field in fields:
        name = getattr(effector, field)
        armature = _armature_of(obj, effector, field) if name else None
        if armature is not None and name not in armature.bones:
            missing.append(field)
    return missing


def _close(a, b) -> bool:
    """Whether two vectors agree within the tolerance (rest values are single precision)."""
    return all(abs(x - y) <= _TOLERANCE * (1.0 + abs(x)) for x, y in zip(a, b))


def _fits(ref, bone) -> bool:
    """Whether a bone sits where the reference saw its bone."""
    return _close(ref.head, bone.head_local) and _close(ref.tail, bone.tail_local) and _close(ref.z_axis, bone.z_axis)


def _note(ref, bone, index: int) -> None:
    """Remember where a bone sits; `index` is its place among the armature's bones. Writes only what changed."""
    parent = bone.parent.name if bone.parent else ""
    if ref.bone == bone.name and ref.index == index and ref.parent == parent and _fits(ref, bone):
        return
    ref.bone, ref.index, ref.parent = bone.name, index, parent
    ref.head, ref.tail, ref.z_axis = bone.head_local, bone.tail_local, bone.z_axis


def _renamed(bones, ref):
    """(index, bone) the reference saw, under its new name, or None when no single bone fits.

    Rigs keep several bones in one place (Rigify's ORG-, DEF- and MCH- copies), so
    the bone's place among the armature's bones (a rename keeps it) and its
    parent decide between them.
    """
    candidates = [(i, b) for i, b in enumerate(bones) if _fits(ref, b)]
    if len(candidates) > 1:
        candidates = [(i, b) for i, b in candidates if i == ref.index] or candidates
    if len(candidates) > 1:
        candidates = [(i, b) for i, b in candidates if (b.parent.name if b.parent else "") == ref.parent] or candidates
    return candidates[0] if len(candidates) == 1 else None


def _follow(ref, name: str, bones, full: bool) -> str | None:
    """The bone's name now, or None when it cannot be told; `full` notes again where a found bone sits (else a
    bone found under the noted name is taken as noted: the fast path before every solve)."""
    if name in bones:
        if full or ref.bone != name:
            _note(ref, bones[name], bones.find(name))
        return name
    if ref.bone != name:
        return None  # set by hand to a name never seen in the armature: reported as missing
    found = _renamed(bones, ref)
    if found is None:
        return None
    _note(ref, found[1], found[0])
    return found[1].name


def _ref(refs, field: str):
    """The effector's note for one field, made when missing."""
    index = refs.find(field)
    if index >= 0:
        return refs[index]
    ref = refs.add()
    ref.name = field
    return ref


def follow_renames(obj: bpy.types.Object, full: bool = False) -> list[str]:
    """Make the effectors and the converted constraints' records follow their bones' renames; what changed. Cheap
    when nothing did, so the live path calls it before every solve; `full` also notes again where each bone sits."""
    if obj.type != 'ARMATURE' or obj.data.is_editmode:
        return []
    if not full and _all_there(obj):
        return []  # (names set by hand are noted as they are set: `props` calls `remember_bones`)
    changes = []
    for number, effector in enumerate(obj.fabrik.effectors, start=1):
        refs = effector.bone_refs
        for field, label in BONE_FIELDS:
            name = getattr(effector, field)
            armature = _armature_of(obj, effector, field) if name else None
            if armature is None:
                continue
            now = _follow(_ref(refs, field), name, armature.bones, full)
            if now is not None and now != name:
                setattr(effector, field, now)
                if label:
                    changes.append(f"effector {number}: {label} '{name}' is now '{now}'")
    for record in obj.fabrik.converted:
        if record.bone:
            now = _follow(record.bone_ref, record.bone, obj.data.bones, full)
            if now is not None and now != record.bone:
                record.bone = now
    settings = obj.fabrik
    if settings.root_bone:
        now = _follow(settings.root_bone_ref, settings.root_bone, obj.data.bones, full)
        if now is not None and now != settings.root_bone:
            changes.append(f"the Root bone '{settings.root_bone}' is now '{now}'")
            settings.root_bone = now
    return changes


def _all_there(obj: bpy.types.Object) -> bool:
    """Whether every bone the effectors and records name is in its armature (then nothing was renamed)."""
    bones = obj.data.bones
    for effector in obj.fabrik.effectors:
        for field, _ in BONE_FIELDS:
            name = getattr(effector, field)
            if name:
                armature = bones.id_data if field in ("bone", "source_bone") else _armature_of(obj, effector, field)
                if armature is not None and name not in armature.bones:
                    return False
    return _records_there(obj, bones)


def _records_there(obj: bpy.types.Object, bones) -> bool:
    """Whether every bone the records of converted constraints and the Root name is among these bones."""
    root = obj.fabrik.root_bone
    return (not root or root in bones) and all(not record.bone or record.bone in bones for record in obj.fabrik.converted)


def remember_root(obj: bpy.types.Object) -> None:
    """Note where the Root bone sits now (so a rename is followed)."""
    name = obj.fabrik.root_bone
    if name and name in obj.data.bones:
        _note(obj.fabrik.root_bone_ref, obj.data.bones[name], obj.data.bones.find(name))


def remember_bones(obj: bpy.types.Object, effector: FabrikEffector) -> None:
    """Note where the bones an effector names sit now (when it is made, so a rename before its first solve is
    followed too)."""
    for field, _ in BONE_FIELDS:
        name = getattr(effector, field)
        armature = _armature_of(obj, effector, field) if name else None
        if armature is not None and name in armature.bones:
            _note(_ref(effector.bone_refs, field), armature.bones[name], armature.bones.find(name))


def _deleted(target) -> bool:
    """Whether an object was deleted in the viewport: unlinked from every collection (and so every scene), kept
    alive only by pointers such as ours."""
    return not target.users_collection and not target.users_scene


def drop_deleted(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None) -> list[str]:
    """Clear the effectors' pointers to deleted targets and poles (so the file no longer keeps them), noting
    their names for the status; what was dropped. With the depsgraph, targets in its view layer pass quickly."""
    dropped = []
    layer = _layer_objects(depsgraph)
    for number, effector in enumerate(obj.fabrik.effectors, start=1):
        for attr, lost, label in (("target", "lost_target", "target"), ("pole_target", "lost_pole", "pole target")):
            target = getattr(effector, attr)
            if target is None or _in_view_layer(target, layer):
                continue
            if _deleted(target):
                name = target.name
                setattr(effector, attr, None)
                setattr(effector, lost, name)
                dropped.append(f"effector {number}: {label} '{name}' was deleted")
    return dropped


def tidy(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None) -> list[str]:
    """Everything to do to a rig before a solve: follow bone renames and renamed effectors' pins, drop deleted
    targets; what changed."""
    return follow_renames(obj) + pins.follow_renames(obj) + drop_deleted(obj, depsgraph)


def _layer_objects(depsgraph: bpy.types.Depsgraph):
    """The objects of the depsgraph's view layer (None without a depsgraph), for `_in_view_layer`."""
    return depsgraph.view_layer.objects if depsgraph is not None else None


def untidy(obj: bpy.types.Object, values) -> bool:
    """Whether `tidy` may have something to do, judged from the effectors as read and checked (`values`): a renamed
    bone or a deleted target is its effector's problem, and a converted record or a source bone may name a renamed
    bone (so every frame of playback checks once)."""
    if any(value.problem is not None and not switched_off(value.problem) for value in values):
        return True
    if any(value.pin_key and value.pin_key != value.name for value in values):
        return True  # (a renamed effector: its pin keys follow it)
    bones = obj.data.bones
    return any(value.source_bone and value.source_bone not in bones for value in values) or not _records_there(
        obj, bones
    )


def _in_view_layer(target, layer_objects) -> bool:
    """Whether the target is among a view layer's objects (`_layer_objects`): the quick answer (a lookup by name),
    on every solve.

    (An object deleted in the viewport may keep an evaluated copy in the
    depsgraph, so `evaluated_get` cannot tell.)
    """
    return layer_objects is not None and layer_objects.get(target.name) == target


def _gone(target, layer_objects) -> str | None:
    """How a target is missing ("was deleted", "is in no scene"), or None when it is in a scene (`layer_objects`:
    `_layer_objects`)."""
    if _in_view_layer(target, layer_objects):
        return None
    if target.users_scene:
        return None
    return "was deleted" if _deleted(target) else "is in no scene"


def effector_problem(
    obj: bpy.types.Object, index: int, depsgraph: bpy.types.Depsgraph | None = None, evaluated=None,
    effector: FabrikEffector | None = None
) -> str | None:
    """Why effector `index` cannot be solved as it stands, in the user's words, or None (a switched-off effector's
    reason starts with "disabled": it is no fault).

    `evaluated`: the evaluated rig's effectors; `effector`: its values as read, where the caller has them."""
    if effector is None:
        effector = obj.fabrik.effectors[index]
    layer = _layer_objects(depsgraph)
    for attr, lost, label in (("target", "lost_target", "target"), ("pole_target", "lost_pole", "pole target")):
        target = getattr(effector, attr)
        if target is None:
            if getattr(effector, lost):
                return f"{label} '{getattr(effector, lost)}' was deleted"
            continue
        how = _gone(target, layer)
        if how is not None:
            return f"{label} '{target.name}' {how}"
    missing = missing_bones(obj, effector)
    if missing:
        field = missing[0]
        label, name = dict(BONE_FIELDS)[field], getattr(effector, field)
        holder = obj if field == "bone" else (effector.target if field == "subtarget" else effector.pole_target)
        ref = obj.fabrik.effectors[index].bone_refs.get(field)
        if ref is not None and ref.bone == name:  # it was there: renamed past following, or deleted
            return f"{label} '{name}' is not in the armature '{holder.name}' (renamed or deleted?)"
        return f"no {label} '{name}' in '{holder.name}'"  # never was (a typo)
    if effector.switched:
        switched = effector
        if depsgraph is not None:
            # The drivers write the evaluated copy; the original has them only when that depsgraph is the active one.
            if evaluated is None:
                evaluated = obj.evaluated_get(depsgraph).fabrik.effectors
            switched = evaluated[index] if index < len(evaluated) else effector
        if switched.switch_mute:
            return f"{DISABLED} by the rig's switch (its converted constraint is muted)"
        if switched.switch_influence <= 0.0:
            return f"{DISABLED} by the rig's switch (its converted constraint has no influence)"
    return None


def problems_of(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None, values=None) -> tuple:
    """`effector_problem` of every effector, as one comparable value (a rig's switch flipped: solve again);
    `values`, the effectors as `effector_values.read` read them, get theirs."""
    evaluated = obj.evaluated_get(depsgraph).fabrik.effectors if depsgraph is not None else None
    if values is None:
        return tuple(effector_problem(obj, index, depsgraph, evaluated) for index in range(len(obj.fabrik.effectors)))
    for value in values:
        value.problem = effector_problem(obj, value.index, depsgraph, evaluated, value)
    return tuple(value.problem for value in values)


@persistent
def on_save(_filepath: str) -> None:
    """Before saving: targets deleted in the viewport are no longer held, so the file does not keep them; where
    each named bone sits is noted afresh."""
    for obj in bpy.data.objects:
        if obj.type == 'ARMATURE' and obj.library is None and (len(obj.fabrik.effectors) or len(obj.fabrik.converted)):
            drop_deleted(obj)
            follow_renames(obj, full=True)  # the file notes where each bone sits now


@persistent
def on_load(_filepath: str) -> None:
    """A file loaded: note where the named bones sit where that is not noted yet (files from before the notes)."""
    for obj in bpy.data.objects:
        if obj.type == 'ARMATURE' and obj.library is None and (len(obj.fabrik.effectors) or len(obj.fabrik.converted)):
            follow_renames(obj, full=True)


_handlers = ((bpy.app.handlers.save_pre, on_save), (bpy.app.handlers.load_post, on_load))


def register() -> None:
    """Install the handlers (once)."""
    app_handlers.install(_handlers)


def unregister() -> None:
    """Remove the handlers."""
    app_handlers.remove(_handlers)
