# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget: a captured clip's motion onto a rig of other proportions, the clip's pose first.

The clip's bones and the rig's are mapped by their names (`core.motion.naming`);
`refusal` says why a mapping cannot be used. The clip's pose is put on the
rig bone by bone and FABRIK corrects the ends (`clip_pose`,
`job`); what this module makes for that is an effector per limb
(`LIMBS`) on the forearm or shin, whose target is an empty keyed where the
limb's end must go, in one collection per rig, which a second retarget
replaces; on a rig Rigify generated, its limbs' IK/FK switches set to FK
(`switch_to_fk`).
`take_away` and `remove` take it all away again (the keys stay).
"""

from __future__ import annotations

import math
import bpy

from ...core.motion.naming import ROLES, roles_of
from ..effectors import pins
from ..rig import animdata, editable, props

#: The parts a retarget needs in both skeletons: the hips, the two bones of each limb, and the head.
REQUIRED = ("hips", "head", *(f"{part}.{side}" for side in "LR" for part in ("upper_arm", "forearm", "thigh", "shin")))
#: The limbs: their effector's name, the two bones it pulls, the bone at its end and the bone beyond that.
LIMBS = tuple(
    (f"{limb}.{side}", f"{upper}.{side}", f"{lower}.{side}", f"{end}.{side}", f"{beyond}.{side}")
    for limb, upper, lower, end, beyond in (("hand", "upper_arm", "forearm", "hand", ""),
                                            ("foot", "thigh", "shin", "foot", "toe"))
    for side in "LR"
)
#: The constraint an earlier version put on the rig's hips to follow the clip's (`remove` takes it away).
HIPS_CONSTRAINT = "FABRIK Retarget"


def collection_name(obj: bpy.types.Object) -> str:
    """The collection that holds a rig's retarget empties."""
    return f"{obj.name} Retarget"


def map_bones(obj: bpy.types.Object) -> list[str]:
    """Fill the rig's mapping from the bones' names (the clip's and the rig's); the required parts found in
    neither or one of them."""
    settings = obj.fabrik
    source = settings.retarget_source
    found_source = roles_of([b.name for b in source.data.bones]) if source is not None else {}
    found_target = roles_of([b.name for b in obj.data.bones])
    settings.retarget_bones.clear()
    for role in ROLES:
        row = settings.retarget_bones.add()
        row.name, row.source, row.target = role, found_source.get(role, ""), found_target.get(role, "")
    return [role for role in REQUIRED if not (found_source.get(role) and found_target.get(role))]


def mapping(obj: bpy.types.Object) -> dict[str, tuple[str, str]]:
    """The rig's mapping: per part, (clip bone, rig bone), for the parts both name."""
    return {row.name: (row.source, row.target) for row in obj.fabrik.retarget_bones if row.source and row.target}


def refusal(obj: bpy.types.Object) -> str | None:
    """Why the rig cannot be retargeted as it is set up, or None."""
    source = obj.fabrik.retarget_source
    if source is None:
        return "choose the clip's armature as the Source"
    if source.type != 'ARMATURE' or source == obj:
        return "the Source must be another armature"
    if source.animation_data is None or source.animation_data.action is None:
        return f"the clip '{source.name}' has no action: import it with its animation, or assign one"
    if not _played(source):
        return (f"the clip '{source.name}' is disabled in viewports or its collection is excluded, so Blender does "
                "not play it: enable it (hiding it with the eye is fine)")
    if obj.fabrik.root_mode != 'OFF':
        return "the rig's Root moves: set it to Off for a retarget (the clip moves the hips)"
    if _moving(obj):
        return (f"the rig '{obj.name}' itself is animated: retarget onto a rig that stands still (its hips carry "
                "the clip)")
    pairs = mapping(obj)
    missing = [role for role in REQUIRED if role not in pairs]
    if missing:
        return f"no bones for {', '.join(missing)}: map them in the list"
    for role, (clip_bone, rig_bone) in pairs.items():
        if clip_bone not in source.data.bones:
            return f"the clip has no bone '{clip_bone}' ({role})"
        if rig_bone not in obj.data.bones:
            return f"the rig has no bone '{rig_bone}' ({role})"
    for side, bones in ((0, source.data.bones), (1, obj.data.bones)):
        which = "clip" if side == 0 else "rig"
        named = [pair[side] for pair in pairs.values()]
        twice = sorted({name for name in named if named.count(name) > 1})
        if twice:
            return f"the {which}'s bone '{twice[0]}' is mapped to two parts"
        hips = pairs["hips"][side]
        for upper, lower in (("upper_arm", "forearm"), ("thigh", "shin")):
            for s in "LR":
                top, bottom = pairs[f"{upper}.{s}"][side], pairs[f"{lower}.{s}"][side]
                if bones[bottom].parent is None or bones[bottom].parent.name != top:
                    return f"the {which}'s {lower}.{s} '{bottom}' does not hang from its {upper}.{s} '{top}'"
                if not _above(bones[top], hips):
                    return f"the {which}'s {upper}.{s} '{top}' does not hang from its hips '{hips}'"
        if not _above(bones[pairs["head"][side]], hips):
            return f"the {which}'s head '{pairs['head'][side]}' does not hang from its hips '{hips}'"
        if "neck" in pairs and not _above(bones[pairs["head"][side]], pairs["neck"][side]) \
                and pairs["head"][side] != pairs["neck"][side]:
            return f"the {which}'s head '{pairs['head'][side]}' does not hang from its neck '{pairs['neck'][side]}'"
    shape = _shape_refusal(obj, source, pairs)
    if shape:
        return shape
    hips = obj.data.bones[pairs["hips"][1]]
    if hips.use_connect:
        return f"the rig's hips '{hips.name}' are connected to their parent, so they cannot move: disconnect them"
    keyed = _keyed_above(obj, hips)
    if keyed:
        return (f"the rig's '{keyed}' above its hips is animated, which would move the whole body the clip moves: "
                "clear its keys first")
    chains = {pairs[role][1] for role in REQUIRED}
    for name, (_, rig_bone) in pairs.items():
        moved_by = overriding(obj.pose.bones[rig_bone])
        if moved_by:
            return (f"the rig's '{rig_bone}' ({name}) is moved by its constraint '{moved_by[0]}', which would undo "
                    "the clip's pose (a generated Rigify rig: map its FK bones instead of ORG/DEF)")
    for switch in _switches(obj, pairs):
        path = f'pose.bones["{switch}"]["IK_FK"]'
        animated = animdata.animated_paths(obj)
        if animated is None or path in animated:  # (NLA tracks may animate anything)
            return (f"the rig's IK/FK switch on '{switch}' is keyed or driven, which would undo the switch to FK the "
                    "retarget needs: delete its keys or driver first")
    for effector in obj.fabrik.effectors:
        ours = _made(effector.target)
        if effector.name in MADE and not ours:
            return f"an effector of yours is named '{effector.name}': rename it (Retarget makes one of that name)"
        if effector.enabled and not ours and effector.bone in chains:
            return (f"the effector '{effector.name}' already pulls '{effector.bone}': switch it off or remove it "
                    "first")
    return None


def _shape_refusal(obj: bpy.types.Object, source: bpy.types.Object, pairs: dict) -> str | None:
    """Why the two rests cannot be scaled onto each other (an armature of no size, a limb of no length at rest),
    or put side to side (arms mapped the other way round from the legs), or None."""
    for k, armature in enumerate((source, obj)):
        which = "clip" if k == 0 else "rig"
        world = armature.matrix_world
        bones = armature.data.bones
        head = {name: world @ bones[name].head_local for name in {pair[k] for pair in pairs.values()}}
        spread = max((head[a] - head[b]).length for a in head for b in head)
        if not math.isfinite(spread) or spread < 1e-9:
            return (f"the {which} '{armature.name}' has no size at rest (scaled to zero?): give its object a scale, "
                    "or apply one")
        for limb, upper, lower, end in (("leg", "thigh", "shin", "foot"), ("arm", "upper_arm", "forearm", "hand")):
            for s in "LR":
                top, knee = head[pairs[f"{upper}.{s}"][k]], head[pairs[f"{lower}.{s}"][k]]
                tip_bone = pairs[f"{end}.{s}"][k] if f"{end}.{s}" in pairs else pairs[f"{lower}.{s}"][k]
                tip = head[tip_bone] if f"{end}.{s}" in pairs else world @ bones[tip_bone].tail_local
                if (knee - top).length + (tip - knee).length < 1e-3 * spread:
                    return (f"the {which}'s {limb} .{s} ('{pairs[f'{upper}.{s}'][k]}' to '{tip_bone}') has no length "
                            "at rest, so nothing can be scaled by it: map bones that have one")
        arms = head[pairs["upper_arm.L"][k]] - head[pairs["upper_arm.R"][k]]
        legs = head[pairs["thigh.L"][k]] - head[pairs["thigh.R"][k]]
        if arms.dot(legs) < 0.0:
            return (f"the {which}'s arms are mapped the other way round from its legs (its upper_arm.L "
                    f"'{pairs['upper_arm.L'][k]}' is on the side of its thigh.R): swap the arms' .L and .R bones")
    return None


#: The effectors a retarget makes (a later retarget takes them over again).
MADE = tuple(limb[0] for limb in LIMBS)
#: The custom property that marks what a retarget made.
MARK = "fabrik_retarget"
#: The rig's custom property that keeps the IK/FK switches a retarget set, with their values before.
SWITCHES = "fabrik_retarget_switches"


def _made(obj: bpy.types.Object) -> bool:
    """Whether an object is one a retarget made."""
    return obj is not None and bool(obj.get(MARK))


#: Constraints that set a bone's transform outright: a solve written under them does not show.
_OVERRIDING = {'COPY_TRANSFORMS', 'COPY_ROTATION', 'COPY_LOCATION', 'CHILD_OF', 'ARMATURE', 'IK', 'DAMPED_TRACK',
               'TRACK_TO', 'LOCKED_TRACK', 'STRETCH_TO', 'TRANSFORM', 'ACTION', 'SPLINE_IK'}


def overriding(pose_bone: bpy.types.PoseBone) -> list[str]:
    """The constraints that set the bone's pose whatever its channels say (the retarget's own on the hips aside)."""
    return [c.name for c in pose_bone.constraints if c.type in _OVERRIDING and not c.mute and c.name != HIPS_CONSTRAINT]


def _played(obj: bpy.types.Object) -> bool:
    """Whether Blender evaluates the object as the frames go by: in the view layer, not disabled in viewports
    itself or by its collection (hidden with the eye it still is)."""
    if obj.hide_viewport or obj.name not in bpy.context.view_layer.objects:
        return False
    if obj.hide_get():
        return not any(c.hide_viewport for c in obj.users_collection)
    return obj.name in {o.name for o in bpy.context.evaluated_depsgraph_get().objects}


def _moving(obj: bpy.types.Object) -> bool:
    """Whether the rig object's own transform is animated (keyed or driven; NLA tracks cannot be told)."""
    paths = animdata.animated_paths(obj) or []
    return any(p.split("[")[0].removeprefix("delta_") in (
        "location", "rotation_euler", "rotation_quaternion", "rotation_axis_angle", "scale") for p in paths)


def _keyed_above(obj: bpy.types.Object, bone) -> str | None:
    """The first bone above `bone` whose transform is animated, or None."""
    paths = animdata.animated_paths(obj) or []
    for parent in bone.parent_recursive:
        prefix = f'pose.bones["{bpy.utils.escape_identifier(parent.name)}"].'
        if any(path.startswith(prefix) and path[len(prefix):].startswith(("location", "rotation", "scale"))
               for path in paths):
            return parent.name
    return None


def _above(bone, name: str) -> bool:
    """Whether the bone named `name` is among the bone's parents."""
    parent = bone.parent
    while parent is not None:
        if parent.name == name:
            return True
        parent = parent.parent
    return False


def _empty(name: str, collection, size: float = 0.05):
    """An empty in the collection, marked as the retarget's."""
    empty = bpy.data.objects.new(name, None)
    empty.empty_display_size = size
    empty[MARK] = True
    collection.objects.link(empty)
    return empty


def _delete(empty) -> None:
    """Delete an empty a retarget made, with its keys' action where nothing else uses it."""
    action = empty.animation_data.action if empty.animation_data is not None else None
    bpy.data.objects.remove(empty)
    if action is not None and action.users == 0:
        bpy.data.actions.remove(action)


def _collection(obj: bpy.types.Object, scene: bpy.types.Scene):
    """The rig's retarget collection, emptied (a retarget replaces the last one's)."""
    name = collection_name(obj)
    collection = bpy.data.collections.get(name)
    if collection is None:
        collection = bpy.data.collections.new(name)
        scene.collection.children.link(collection)
    for old in list(collection.objects):
        if _made(old):  # (what the animator put there stays)
            _delete(old)
    return collection


def _effector(obj: bpy.types.Object, name: str, bone: str, chain_length: int, target):
    """The rig's effector of that name (made, or the last retarget's reused), set to pull `bone`."""
    settings = obj.fabrik
    index = settings.effectors.find(name)
    effector = settings.effectors[index] if index >= 0 else settings.effectors.add()
    if index < 0:
        effector.name = props.unique_name(settings, name)
    else:  # (the last retarget's, or an earlier version's with its pins: a retarget starts again from the clip)
        pins.clear(obj, effector)
        effector.pin = 0.0
    effector.enabled = True
    effector.bone, effector.chain_length, effector.target = bone, chain_length, target
    effector.pole_target, effector.use_rotation = None, False
    effector.influence, effector.weight, effector.use_stretch = 1.0, 1.0, False
    return effector


def set_up(obj: bpy.types.Object, scene: bpy.types.Scene) -> list[str]:
    """Make the rig's effectors for its clip (see the module), their targets not yet keyed: the effectors' names
    (adding an effector moves the others in memory: look them up again). Where it fails half way, what it made
    goes again."""
    try:
        pairs = mapping(obj)
        effectors = obj.fabrik.effectors
        for index in reversed(range(len(effectors))):  # (an earlier version's head effector, before its empty goes)
            if effectors[index].name not in MADE and _made(effectors[index].target):
                effectors.remove(index)
        collection = _collection(obj, scene)
        made = []
        for name, _, lower, _, _ in LIMBS:
            target = _empty(f"Retarget {name}", collection)
            made.append(_effector(obj, name, pairs[lower][1], 2, target).name)
        return made
    except Exception:
        remove(obj)
        raise


def _switches(obj: bpy.types.Object, pairs: dict) -> list[str]:
    """On a rig Rigify generated, the bones that hold its limbs' IK/FK switches (none on other rigs)."""
    out = []
    for role in ("upper_arm.L", "upper_arm.R", "thigh.L", "thigh.R"):
        name = pairs[role][1]
        switch = obj.pose.bones.get(name.replace("_fk", "_parent")) if "_fk" in name else None
        if switch is not None and "IK_FK" in switch.keys():
            out.append(switch.name)
    return out


def switch_to_fk(obj: bpy.types.Object) -> tuple[dict, object]:
    """On a rig Rigify generated, its limbs' IK/FK switches at FK, so that the FK chains the clip's pose and the
    effectors pose move the deforming bones; each switch's value before is kept on the rig (`remove` puts it
    back). What was there before, for `switches_back`."""
    values = {name: float(obj.pose.bones[name]["IK_FK"]) for name in _switches(obj, mapping(obj))}
    record = dict(obj[SWITCHES]) if SWITCHES in obj.keys() else None
    for name in values:
        obj.pose.bones[name]["IK_FK"] = 1.0
    if values:  # (an earlier retarget's record keeps the values from before it)
        obj[SWITCHES] = {**values, **(record or {})}
    return values, record


def switches_back(obj: bpy.types.Object, before: tuple[dict, object]) -> None:
    """The IK/FK switches and their record as they were before `switch_to_fk` (a retarget that failed)."""
    values, record = before
    for name, value in values.items():
        obj.pose.bones[name]["IK_FK"] = value
    if record is None:
        if SWITCHES in obj.keys():
            del obj[SWITCHES]
    else:
        obj[SWITCHES] = record


def frame_range(obj: bpy.types.Object) -> tuple[int, int] | None:
    """The frames the clip's action spans, or None."""
    source = obj.fabrik.retarget_source
    action = source.animation_data.action if source is not None and source.animation_data else None
    if action is None:
        return None
    first, last = action.frame_range
    return int(round(first)), int(round(last))


def made_here(obj: bpy.types.Object) -> bool:
    """Whether the rig has a retarget to take away: its effectors, empties or switches."""
    return (
        any(_made(e.target) for e in obj.fabrik.effectors) or bpy.data.collections.get(collection_name(obj)) is not None
        or SWITCHES in obj.keys()
    )


def take_away(obj: bpy.types.Object) -> int:
    """Take the retarget away whole: the effectors it made with their pins (the rig's keys otherwise stay), then
    what `remove` takes; how many effectors went."""
    settings = obj.fabrik
    made = [i for i, e in enumerate(settings.effectors) if _made(e.target)]
    for index in reversed(made):
        if editable.keys_editable(obj) is None:  # (a linked action keeps its keys)
            pins.clear(obj, settings.effectors[index])
        settings.effectors.remove(index)
    settings.active_effector = max(0, min(settings.active_effector, len(settings.effectors) - 1))
    remove(obj)
    obj.update_tag()
    return len(made)


def remove(obj: bpy.types.Object) -> None:
    """Take the retarget away: its collection and empties, and the constraint on the rig's hips."""
    collection = bpy.data.collections.get(collection_name(obj))
    if collection is not None:
        for old in list(collection.objects):
            if _made(old):
                _delete(old)
        if not collection.objects:
            bpy.data.collections.remove(collection)
    for bone in obj.pose.bones:
        constraint = bone.constraints.get(HIPS_CONSTRAINT)
        if constraint is not None:
            bone.constraints.remove(constraint)
    for name, value in dict(obj.get(SWITCHES, {})).items():
        if name in obj.pose.bones:
            obj.pose.bones[name]["IK_FK"] = value
    if SWITCHES in obj.keys():
        del obj[SWITCHES]
