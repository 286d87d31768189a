# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn a rig's Blender IK constraints into FABRIK effectors, and back.

Each converted constraint is recorded on the armature object
(`obj.fabrik.converted`), apart from its effector, so Restore finds it even
when the constraint or its bone was renamed or the effector removed. The
record also keeps the constraint's targets, which Convert takes off it: a
muted constraint still ties the armature to its targets in Blender's
dependency graph, so every move of a target would make Blender evaluate the
rig once more, which a rig built fresh does not pay. A rig's
own switches (Rigify's pole switch drives which of a limb's two IK
constraints is muted) keep working: the drivers of a converted constraint's
mute and influence are moved onto its effector while converted, and back.
"""

from __future__ import annotations

from types import SimpleNamespace

import bpy

from ..rig import channels, props
from ..rig.props import FabrikEffector
from . import integrity

#: Constraint properties whose drivers move onto the effector (as `switch_<name>`) while converted.
SWITCHES = ("mute", "influence")


def _drivers(obj: bpy.types.Object):
    """The object's driver F-curves, or None when it has no animation data."""
    return obj.animation_data.drivers if obj.animation_data is not None else None


def _switch_path(key: str, prop: str) -> str:
    """The data path of an effector's switch property, by the effector's name (which, unlike its index, stays)."""
    return f'fabrik.effectors["{bpy.utils.escape_identifier(key)}"].switch_{prop}'


#: Prefixes of rig generators' mechanism bones (Rigify), left out of an effector's name.
_MECHANISM_PREFIXES = ("MCH-", "ORG-", "DEF-")


#: A rig generator's IK mechanism bone (Rigify's MCH-forearm_ik.L) by the limb it ends, for the effector's name.
_LIMB_OF_TIP = {"forearm": "arm", "shin": "leg"}


def effector_name(bone: str, pole: bool) -> str:
    """A short name for the effector made from a constraint on `bone`, and "pole" where the constraint has one:
    short enough that Rigify's two versions of each limb's IK tell apart in the sidebar's list at its default
    width (a mechanism bone, MCH-forearm_ik.L, names its limb: arm.L). The panel names the constraint."""
    for prefix in _MECHANISM_PREFIXES:
        if bone.startswith(prefix) and len(bone) > len(prefix):
            stem, dot, side = bone[len(prefix):].rpartition(".")
            if not dot:
                stem, side = side, ""
            stem = stem.removesuffix("_ik")
            bone = _LIMB_OF_TIP.get(stem, stem) + (f".{side}" if dot else "")
            break
    return f"{bone} pole" if pole else bone


def convert_ik_constraints(obj: bpy.types.Object) -> tuple[list[str], list[str]]:
    """Add an effector for each IK constraint of the armature, mute the constraint and set its targets aside; what
    was converted and what was skipped, and why.

    A driven mute or influence (a rig's switch) moves onto the effector; nothing else on the rig changes, and
    `restore_ik_constraints` undoes it."""
    converted, skipped = [], []
    settings = obj.fabrik
    effectors = settings.effectors
    done = {(e.source_bone, e.source_constraint) for e in effectors if e.source_constraint}
    done |= {(r.bone, r.constraint) for r in settings.converted}
    drivers = _drivers(obj)
    for pose_bone in obj.pose.bones:
        for index, constraint in enumerate(pose_bone.constraints):
            if constraint.type != 'IK' or (pose_bone.name, constraint.name) in done:
                continue
            label = f"'{constraint.name}' on '{pose_bone.name}'"
            driven = {}
            for prop in SWITCHES:
                fcurve = drivers.find(constraint.path_from_id(prop)) if drivers is not None else None
                if fcurve is not None and not fcurve.mute:
                    driven[prop] = fcurve
            if constraint.mute and "mute" not in driven:
                skipped.append(f"{label} is muted (left as it is)")
                continue
            if constraint.target is None:
                skipped.append(f"{label} has no target (targetless IK is not converted)")
                continue
            # Without "Use Tail" Blender's chain ends at the bone's head, i.e. at its parent's tail,
            # and counts its length from the parent.
            tip = pose_bone if constraint.use_tail else pose_bone.parent
            if tip is None:
                skipped.append(f"{label} does not use the tail of a bone without parent: nothing to move")
                continue
            effector = effectors.add()
            key = props.unique_name(settings, effector_name(pose_bone.name, constraint.pole_target is not None))
            effector.name = key
            effector.bone = tip.name
            effector.target, effector.subtarget = constraint.target, constraint.subtarget
            effector.chain_length = constraint.chain_count
            effector.weight = constraint.weight
            effector.use_rotation = constraint.use_rotation
            effector.rotation_weight = constraint.orient_weight
            effector.pole_target, effector.pole_subtarget = constraint.pole_target, constraint.pole_subtarget
            effector.pole_angle = constraint.pole_angle
            effector.use_stretch = constraint.use_stretch
            effector.source_bone, effector.source_constraint = pose_bone.name, constraint.name
            integrity.remember_bones(obj, effector)
            record = _record(settings, key, pose_bone, index, constraint)
            notes = []
            if driven:
                # The switch's current state carries over; from now on its drivers set it on the effector.
                effector.switch_mute, effector.switch_influence = constraint.mute, constraint.influence
                effector.switched = True
                for prop, fcurve in driven.items():
                    fcurve.data_path = _switch_path(key, prop)
                    moved = record.drivers.add()
                    moved.name, moved.path = prop, fcurve.data_path
                state = "off" if constraint.mute or constraint.influence <= 0.0 else "on"
                switch = " and ".join(driven)
                notes.append(f"its {switch} driver (the rig's switch) now switches the effector, {state} now")
            elif constraint.influence < 1.0:
                notes.append(f"its influence {constraint.influence:.2g} is not blended: the effector solves fully")
            stretchy = _stretchy_bones(tip, constraint.chain_count) if constraint.use_stretch else []
            if stretchy:
                notes.append(f"{STRETCH_NOTE} ({', '.join(stretchy)})")
            constraint.mute = True
            constraint.target = constraint.pole_target = None  # kept in the record
            record.set_aside = True
            converted.append(label + (f" ({'; '.join(notes)})" if notes else ""))
    if converted:
        settings.live = True
        settings.active_effector = len(effectors) - 1
    return converted, skipped


#: Why a converted chain with stretchy bones may sit a little apart from where Blender's IK put it.
STRETCH_NOTE = ("IK Stretch: FABRIK lengthens these bones only for a target out of reach, where Blender's IK also "
                "shortens them a little within reach, so a joint may sit a few millimetres apart")


def _stretchy_bones(tip, chain_count: int) -> list[str]:
    """The bones of the chain from `tip` up (`chain_count` of them, 0: to the root) with an IK Stretch factor."""
    chain = [tip, *tip.parent_recursive]
    if chain_count > 0:
        chain = chain[:chain_count]
    return [bone.name for bone in chain if bone.ik_stretch > 0.0]


def _record(settings, key: str, pose_bone: bpy.types.PoseBone, index: int, constraint: bpy.types.Constraint):
    """Note a converted constraint on the armature object, with where its bone sits (to follow a rename)."""
    record = settings.converted.add()
    record.name = key
    record.bone, record.constraint, record.index = pose_bone.name, constraint.name, index
    record.target = constraint.target.name if constraint.target else ""
    record.subtarget = constraint.subtarget
    record.pole = constraint.pole_target.name if constraint.pole_target else ""
    record.pole_subtarget = constraint.pole_subtarget
    record.chain_count = constraint.chain_count
    bone = pose_bone.bone
    ref = record.bone_ref
    ref.name, ref.bone, ref.index = "source_bone", bone.name, pose_bone.id_data.data.bones.find(bone.name)
    ref.parent = bone.parent.name if bone.parent else ""
    ref.head, ref.tail, ref.z_axis = bone.head_local, bone.tail_local, bone.z_axis
    return record


def _fits(constraint: bpy.types.Constraint, record) -> bool:
    """Whether an IK constraint is set up as the recorded one was (for finding it renamed or on a renamed bone)."""
    if constraint.chain_count != record.chain_count:
        return False
    if getattr(record, "set_aside", False):
        return constraint.target is None and constraint.pole_target is None
    target = constraint.target.name if constraint.target else ""
    pole = constraint.pole_target.name if constraint.pole_target else ""
    return target == record.target and pole == record.pole


def _give_targets_back(constraint: bpy.types.Constraint, record, effector: FabrikEffector) -> list[str]:
    """Put the targets Convert set aside back on the constraint; what could not be found, in words."""
    if not getattr(record, "set_aside", False) or constraint.target is not None:
        return []
    problems = []
    for name, bone, kind, attr in (
        (record.target, record.subtarget, "target", "target"),
        (record.pole, record.pole_subtarget, "pole", "pole_target"),
    ):
        if not name:
            continue
        # By its name, or (renamed since) as the effector made from the constraint holds it.
        found = bpy.data.objects.get(name)
        if found is None and effector is not None:
            found = getattr(effector, attr)
        if found is None:
            problems.append(f"its {kind} '{name}' is gone; the constraint stays without it")
            continue
        setattr(constraint, attr, found)
        if attr == "target":
            constraint.subtarget = bone
        else:
            constraint.pole_subtarget = bone
    return problems


def _find_constraint(obj: bpy.types.Object, record, claimed: set[int]):
    """(pose bone, constraint) a record speaks of, renamed or on a renamed bone, or (None, None)."""
    pose_bone = obj.pose.bones.get(record.bone)
    searched = [pose_bone] if pose_bone is not None else list(obj.pose.bones)
    for pb in searched:
        constraint = pb.constraints.get(record.constraint)
        if constraint is not None and constraint.type == 'IK' and constraint.as_pointer() not in claimed:
            if pose_bone is not None or _fits(constraint, record):
                return pb, constraint
    # Renamed: an IK constraint set up as recorded and muted (by us), not claimed by another record.
    candidates = [
        (pb, c) for pb in searched for i, c in enumerate(pb.constraints)
        if c.type == 'IK' and c.mute and c.as_pointer() not in claimed and _fits(c, record)
    ]
    if len(candidates) > 1:
        candidates = [(pb, c) for pb, c in candidates if list(pb.constraints).index(c) == record.index] or candidates
    return candidates[0] if len(candidates) == 1 else (None, None)


def _records(settings) -> list:
    """The records of converted constraints, and stand-ins for effectors converted before records were kept."""
    records = list(settings.converted)
    for effector in settings.effectors:
        if effector.source_constraint and effector.name not in settings.converted:
            records.append(SimpleNamespace(
                name="", effector=effector, bone=effector.source_bone, constraint=effector.source_constraint, index=-1,
                target=effector.target.name if effector.target else "",
                pole=effector.pole_target.name if effector.pole_target else "",
                chain_count=effector.chain_length, drivers=(),
            ))
    return records


def restore_ik_constraints(obj: bpy.types.Object) -> tuple[list[str], list[str]]:
    """Switch the converted IK constraints back on (their targets and drivers back onto them) and remove their
    effectors; what was restored and what could not be, whose effector stays as an ordinary one."""
    restored, problems = [], []
    settings = obj.fabrik
    integrity.follow_renames(obj)  # records follow their bones' renames
    drivers = _drivers(obj)
    claimed: set[int] = set()
    kept: set[int] = set()  # effectors whose constraint is gone: they stay, as ordinary effectors
    for record in _records(settings):
        label = f"'{record.constraint}' on '{record.bone}'"
        effector = settings.effectors.get(record.name) if record.name else getattr(record, "effector", None)
        pose_bone, constraint = _find_constraint(obj, record, claimed)
        if constraint is None:
            why = "its bone is gone" if record.bone not in obj.pose.bones else "the constraint is gone"
            stays = " (the effector made from it stays)" if effector is not None else ""
            problems.append(f"{label} could not be restored: {why}{stays}")
            if effector is not None:
                kept.add(effector.as_pointer())
            continue
        claimed.add(constraint.as_pointer())
        problems.extend(f"{label}: {problem}" for problem in _give_targets_back(constraint, record, effector))
        mute = False
        for moved in record.drivers:
            fcurve = drivers.find(moved.path) if drivers is not None else None
            if fcurve is None:
                problems.append(f"{label}: its driver of '{moved.name}' is gone; the constraint stays undriven")
                continue
            fcurve.data_path = constraint.path_from_id(moved.name)
            if moved.name == "mute" and effector is not None:
                mute = effector.switch_mute  # as its switch says now (the driver keeps it so from the next update)
        constraint.mute = mute
        now = f"'{constraint.name}' on '{pose_bone.name}'"
        restored.append(now if now == label else f"{now} (was {label})")
    effectors = settings.effectors
    for index in reversed(range(len(effectors))):
        effector = effectors[index]
        if not effector.source_constraint:
            continue  # made by hand
        if effector.as_pointer() in kept:
            effector.source_bone = effector.source_constraint = ""
            effector.switched = False
        else:
            effectors.remove(index)
    settings.converted.clear()
    settings.active_effector = max(0, min(settings.active_effector, len(effectors) - 1))
    if not len(effectors):
        settings.live = False  # (which gives the chains back the animator's pose)
    elif restored and settings.live:
        # Blender's IK takes its chains back from the animator's pose; the effectors left solve again from theirs.
        channels.give_back(obj)
        obj.update_tag()
    return restored, problems
