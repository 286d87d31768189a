# SPDX-License-Identifier: GPL-3.0-or-later
"""Retarget: a captured clip's motion onto a rig of other proportions, through FABRIK effectors.

The clip's bones and the rig's are mapped by their names (`core.naming`),
and the clip is scaled by the ratio of the rigs' leg lengths about their
hips (`space_matrix`). Empties follow the clip's joints in that scaled space
(a Copy Transforms constraint from each clip bone into an empty parented to
the scaled space): the wrists, ankles and head are the effectors' targets,
the rig's hips follow the clip's hips turned from rest as the clip's turn,
and the elbow and knee poles ride with the hips where the rig's own limbs
bend at rest (with the pole angle that keeps the rest pose). Everything made
sits in one collection per rig, which a second retarget replaces. Baking
keys the hips first (`bake_hips`, with Blender's own Bake Action), then the
chains with FABRIK's bake.
"""

from __future__ import annotations

import math

import bpy
from mathutils import Matrix, Vector

from ..core.naming import ROLES, roles_of
from ..core.pole_angle import auto_pole_angle, pole_point
from . import animdata, constraints, contacts, rig

#: The parts a retarget needs in both skeletons: the hips, the two bones of each limb, and the head.
REQUIRED = ("hips", "head", *(f"{part}.{side}" for side in "LR" for part in ("upper_arm", "forearm", "thigh", "shin")))
#: The constraint that makes the rig's hips follow the clip's.
HIPS_CONSTRAINT = "FABRIK Retarget"


def collection_name(obj) -> str:
    """The collection that holds a rig's retarget empties."""
    return f"{obj.name} Retarget"


def map_bones(obj) -> list[str]:
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


def mapping(obj) -> dict[str, tuple[str, str]]:
    """The rig's mapping: per part, (clip bone, rig bone), for the parts both name."""
    return {row.name: (row.source, row.target) for row in obj.fabrik.retarget_bones if row.source and row.target}


def refusal(obj) -> str | None:
    """Why the rig cannot be retargeted as it is set up, or None."""
    source = obj.fabrik.retarget_source
    if source is None:
        return "choose the clip's armature as the Source"
    if source.type != 'ARMATURE' or source == obj:
        return "the Source must be another armature"
    if source.animation_data is None or source.animation_data.action is None:
        return f"the clip '{source.name}' has no action: import it with its animation, or assign one"
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
        head = bones[pairs["head"][side]]
        neck = _head_effector(obj, pairs)[0] if side == 1 else None
        if side == 1 and (neck is None or not _above(bones[neck], hips) or neck == hips):
            return f"the rig's head '{head.name}' does not hang by a neck from its hips '{hips}'"
    chains = {pairs[role][1] for role in REQUIRED} | {_head_effector(obj, pairs)[0]}
    for name, (_, rig_bone) in pairs.items():
        overriding = _overriding(obj.pose.bones[rig_bone])
        if overriding and rig_bone in chains:
            return (f"the rig's '{rig_bone}' ({name}) is moved by its constraint '{overriding[0]}', which would undo "
                    "the solve (a generated Rigify rig: map its FK bones instead of ORG/DEF)")
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


#: The effectors a retarget makes (a later retarget takes them over again).
MADE = ("hand.L", "hand.R", "foot.L", "foot.R", "head")
#: The custom property that marks what a retarget made.
MARK = "fabrik_retarget"
#: The rig's custom property that keeps the IK/FK switches a retarget set, with their values before.
SWITCHES = "fabrik_retarget_switches"


def _made(obj) -> bool:
    """Whether an object is one a retarget made."""
    return obj is not None and bool(obj.get(MARK))


#: Constraints that set a bone's transform outright: a solve written under them does not show.
_OVERRIDING = {'COPY_TRANSFORMS', 'COPY_ROTATION', 'CHILD_OF', 'ARMATURE', 'IK', 'DAMPED_TRACK', 'TRACK_TO',
               'LOCKED_TRACK', 'STRETCH_TO'}


def _overriding(pose_bone) -> list[str]:
    """The constraints that set the bone's pose whatever its channels say (the retarget's own on the hips aside)."""
    return [c.name for c in pose_bone.constraints if c.type in _OVERRIDING and not c.mute and c.name != HIPS_CONSTRAINT]


def _head_effector(obj, pairs: dict) -> tuple[str | None, int]:
    """The bone the head's effector pulls, and its chain's length: the bone below the head (its neck; on a rig
    Rigify generated, past the helper a constraint sets, the neck control), its chain the bones from there down to
    the hips, up to the first a constraint overrides (a neck that one overrides is refused: `refusal`)."""
    head = obj.data.bones[pairs["head"][1]]
    bone = head.parent
    # (past the helpers a constraint sets that end at the head's joint, as the neck does: Rigify's MCH-ROT-head)
    while (
        bone is not None and bone.parent is not None and _overriding(obj.pose.bones[bone.name])
        and (bone.parent.tail_local - head.head_local).length < 1e-4 * (1.0 + head.length)
    ):
        bone = bone.parent
    if bone is None:
        return None, 0
    count, current, hips = 0, bone, pairs["hips"][1]
    while current is not None and current.name != hips and not _overriding(obj.pose.bones[current.name]):
        count, current = count + 1, current.parent
    return bone.name, count


def _above(bone, name: str) -> bool:
    """Whether the bone named `name` is among the bone's parents."""
    parent = bone.parent
    while parent is not None:
        if parent.name == name:
            return True
        parent = parent.parent
    return False


def _rest(obj, bone: str) -> Matrix:
    """A bone's rest matrix in world space."""
    return obj.matrix_world @ obj.data.bones[bone].matrix_local


def _leg_length(obj, pairs: dict, side: int) -> float:
    """The world length of a skeleton's two leg bones (`side`: 0 the clip's, 1 the rig's), both legs averaged."""
    scale = rig.mean_scale(obj)
    bones = obj.data.bones
    return scale * sum(bones[pairs[f"{p}.{s}"][side]].length for p in ("thigh", "shin") for s in "LR") / 2.0


def _facing(obj, pairs: dict, side: int) -> float:
    """The angle about world Z of a skeleton's left side at rest (from its right thigh's head to its left's)."""
    left = _rest(obj, pairs["thigh.L"][side]).translation
    right = _rest(obj, pairs["thigh.R"][side]).translation
    return math.atan2(left.y - right.y, left.x - right.x)


def space_matrix(obj) -> Matrix:
    """The space the clip moves in for this rig: the clip's floor (world Z = 0) on the rig's, the ground under
    the clip's hips onto the ground under the rig's, turned to face the way the rig faces, scaled by the legs."""
    pairs, source = mapping(obj), obj.fabrik.retarget_source
    scale = _leg_length(obj, pairs, 1) / _leg_length(source, pairs, 0)
    clip_hips = _rest(source, pairs["hips"][0]).translation
    rig_hips = _rest(obj, pairs["hips"][1]).translation
    turn = _facing(obj, pairs, 1) - _facing(source, pairs, 0)
    return (
        Matrix.Translation((rig_hips.x, rig_hips.y, 0.0)) @ Matrix.Rotation(turn, 4, 'Z') @ Matrix.Scale(scale, 4)
        @ Matrix.Translation((-clip_hips.x, -clip_hips.y, 0.0))
    )


def _empty(name: str, collection, parent=None, local: Matrix | None = None, size: float = 0.05):
    """An empty in the collection, parented (no parent inverse) at `local` in its parent's space."""
    empty = bpy.data.objects.new(name, None)
    empty.empty_display_size = size
    empty[MARK] = True
    collection.objects.link(empty)
    if parent is not None:
        empty.parent = parent
        empty.matrix_parent_inverse = Matrix.Identity(4)
    if local is not None:
        empty.matrix_basis = local
    return empty


def _follower(name: str, collection, space, source, bone: str, head_tail: float = 0.0):
    """An empty that follows a clip bone (its head, or its tail with head_tail 1) in the scaled space."""
    empty = _empty(name, collection, space)
    follow = empty.constraints.new('COPY_TRANSFORMS')
    follow.target, follow.subtarget, follow.head_tail = source, bone, head_tail
    follow.target_space, follow.owner_space = 'WORLD', 'LOCAL'
    return empty


def _collection(obj, scene):
    """The rig's retarget collection, emptied (a retarget replaces the last one's)."""
    name = collection_name(obj)
    collection = bpy.data.collections.get(name)
    if collection is None:
        collection = bpy.data.collections.new(name)
        scene.collection.children.link(collection)
    for old in list(collection.objects):
        if _made(old):  # (what the animator put there stays)
            bpy.data.objects.remove(old)
    return collection


def _effector(obj, name: str, bone: str, chain_length: int, target, pole=None, pole_angle: float = 0.0):
    """The rig's effector of that name (made, or the last retarget's reused), set to pull `bone`."""
    settings = obj.fabrik
    index = settings.effectors.find(name)
    effector = settings.effectors[index] if index >= 0 else settings.effectors.add()
    if index < 0:
        effector.name = constraints.unique_name(settings, name)
    effector.enabled = True
    effector.bone, effector.chain_length, effector.target = bone, chain_length, target
    effector.pole_target, effector.pole_angle = pole, pole_angle
    return effector


def setup(obj, scene) -> list:
    """Make the rig follow its clip (see the module); the effectors made, hands and feet first. Where it fails
    half way, what it made goes again."""
    refused = refusal(obj)
    if refused:
        raise ValueError(refused)
    try:
        return _set_up(obj, scene)
    except Exception:
        remove(obj)
        raise


def _set_up(obj, scene) -> list:
    """`setup`, checked."""
    pairs, source = mapping(obj), obj.fabrik.retarget_source
    collection = _collection(obj, scene)
    space = space_matrix(obj)
    scaled = _empty("Retarget Space", collection, local=space, size=0.2)
    hips = _follower("Retarget hips (clip)", collection, scaled, source, pairs["hips"][0])
    rig_hips = _rest(obj, pairs["hips"][1])
    # The rig's hips turned from their rest as the clip's turn from its, placed so that the middle of the rig's hip
    # joints is where the clip's is in the scaled space (the hips bones themselves may sit higher or lower).
    clip_hips = _rest(source, pairs["hips"][0])
    turn = (space @ clip_hips).inverted_safe() @ rig_hips
    turn.translation = (0.0, 0.0, 0.0)
    clip_middle = clip_hips.inverted_safe() @ _middle(source, pairs, 0)
    rig_middle = rig_hips.inverted_safe() @ _middle(obj, pairs, 1)
    turn.translation = clip_middle - turn @ rig_middle
    held = _empty("Retarget hips", collection, hips, turn, size=0.15)
    pose_hips = obj.pose.bones[pairs["hips"][1]]
    follow = pose_hips.constraints.get(HIPS_CONSTRAINT) or pose_hips.constraints.new('COPY_TRANSFORMS')
    follow.name, follow.target, follow.subtarget = HIPS_CONSTRAINT, held, ""
    follow.target_space = follow.owner_space = 'WORLD'
    made = []
    for limb, upper, lower in (("hand", "upper_arm", "forearm"), ("foot", "thigh", "shin")):
        for side in "LR":
            clip_lower, rig_lower = pairs[f"{lower}.{side}"]
            clip_upper, rig_upper = pairs[f"{upper}.{side}"]
            target = _follower(f"Retarget {limb}.{side}", collection, scaled, source, clip_lower, head_tail=1.0)
            riding = _follower(f"Retarget {upper}.{side} (clip)", collection, scaled, source, clip_upper)
            pole, angle = _pole(obj, collection, riding, (clip_upper, clip_lower), (rig_upper, rig_lower), space,
                                f"{limb}.{side}")
            made.append(_effector(obj, f"{limb}.{side}", rig_lower, 2, target, pole, angle))
    head_target = _follower("Retarget head", collection, scaled, source, pairs["head"][0])
    # (the head's chain runs down the spine to the hips: the clip's head is reached by bending it)
    made.append(_effector(obj, "head", *_head_effector(obj, pairs), head_target))
    _switch_to_fk(obj, pairs)
    return made


def _switches(obj, pairs: dict) -> list[str]:
    """On a rig Rigify generated, the bones that hold its limbs' IK/FK switches (none on other rigs)."""
    out = []
    for role in ("upper_arm.L", "upper_arm.R", "thigh.L", "thigh.R"):
        name = pairs[role][1]
        switch = obj.pose.bones.get(name.replace("_fk", "_parent")) if "_fk" in name else None
        if switch is not None and "IK_FK" in switch.keys():
            out.append(switch.name)
    return out


def _switch_to_fk(obj, pairs: dict) -> None:
    """On a rig Rigify generated, its limbs' IK/FK switches at FK, so that the FK chains the effectors pull pose
    the deforming bones; each switch's value before is kept on the rig (`remove` puts it back)."""
    kept = {}
    for name in _switches(obj, pairs):
        switch = obj.pose.bones[name]
        kept.setdefault(name, float(switch["IK_FK"]))
        switch["IK_FK"] = 1.0
    if kept:
        obj[SWITCHES] = {**dict(obj.get(SWITCHES, {})), **{k: v for k, v in kept.items() if k not in obj.get(SWITCHES, {})}}


def _middle(obj, pairs: dict, side: int) -> Vector:
    """The middle of a skeleton's hip joints (its thighs' heads) at rest, in world space."""
    return (_rest(obj, pairs["thigh.L"][side]).translation + _rest(obj, pairs["thigh.R"][side]).translation) / 2.0


def _limb(obj, upper: str, lower: str) -> tuple[list[Vector], Vector, Vector]:
    """A limb's joints at rest in world space (its base, its knee or elbow, its tip) and its first bone's X and Z."""
    top = _rest(obj, upper)
    joints = [top.translation, _rest(obj, lower).translation, obj.matrix_world @ obj.data.bones[lower].tail_local]
    return joints, top.col[0].xyz, top.col[2].xyz


def _pole(obj, collection, riding, clip: tuple[str, str], rig: tuple[str, str], space: Matrix, name: str):
    """A limb's pole, taken from the capture: an empty riding on the clip's upper bone (`riding` follows it), off
    the clip's knee or elbow on the side the rig's limb bends at rest; and the pole angle that keeps the rig's
    rest pose with it."""
    joints, x_axis, z_axis = _limb(obj, *rig)
    reach = (joints[1] - joints[0]).length + (joints[2] - joints[1]).length
    where = pole_point(joints, x_axis, z_axis, 0.5 * reach)
    if where is None:
        return None, 0.0
    where = Vector(where.tolist())
    angle = auto_pole_angle(joints[0], joints[2], x_axis, z_axis, where)
    # The same side of the clip's own limb, seen in the clip's space: from its knee, the way the rig's bends.
    source = obj.fabrik.retarget_source
    clip_joints = _limb(source, *clip)[0]
    bend = (space.to_3x3().inverted_safe() @ (where - joints[1])).normalized()
    clip_pole = clip_joints[1] + bend * 0.5 * ((clip_joints[1] - clip_joints[0]).length
                                               + (clip_joints[2] - clip_joints[1]).length)
    local = _rest(source, clip[0]).inverted_safe() @ Matrix.Translation(clip_pole)
    pole = _empty(f"Retarget {name} pole", collection, riding, local)
    return pole, 0.0 if angle is None else angle


def pin_feet(obj, scene, span: tuple[int, int]) -> tuple[dict, dict[str, str]]:
    """Find where the retargeted feet stand over the frames `span` and pin them (`contacts`, its defaults): per
    foot its pinned spans, and the feet left out with why."""
    feet = [i for i, e in enumerate(obj.fabrik.effectors) if e.name in ("foot.L", "foot.R")]
    finder = contacts.ContactFinder(scene, obj, feet, range(span[0], span[1] + 1))
    keyed, _ = finder.run()
    return keyed, finder.skipped


def frame_range(obj) -> tuple[int, int] | None:
    """The frames the clip's action spans, or None."""
    source = obj.fabrik.retarget_source
    action = source.animation_data.action if source is not None and source.animation_data else None
    if action is None:
        return None
    first, last = action.frame_range
    return int(round(first)), int(round(last))


def bake_hips(obj, first: int, last: int) -> None:
    """Key the rig's hips where the clip moves them (Blender's Bake Action, visual keying, only that bone), then
    take away the constraint that moved them: the keys stand alone."""
    hips = mapping(obj)["hips"][1]
    view_layer = bpy.context.view_layer
    active, mode, live = view_layer.objects.active, obj.mode, obj.fabrik.live
    selected = {b.name: animdata.is_selected(b) for b in obj.pose.bones}
    obj.fabrik.live = False  # (the chains are keyed by FABRIK's own bake after this)
    try:
        view_layer.objects.active = obj
        if obj.mode != 'POSE':
            bpy.ops.object.mode_set(mode='POSE')
        for bone in obj.pose.bones:
            animdata.set_selected(bone, bone.name == hips)
        options = dict(frame_start=first, frame_end=last, only_selected=True, visual_keying=True,
                       clear_constraints=False, use_current_action=True, bake_types={'POSE'})
        if "channel_types" in bpy.ops.nla.bake.get_rna_type().properties:  # (3.4 keys every channel)
            options["channel_types"] = {'LOCATION', 'ROTATION'}
        bpy.ops.nla.bake(**options)
        follow = obj.pose.bones[hips].constraints.get(HIPS_CONSTRAINT)
        if follow is not None:
            obj.pose.bones[hips].constraints.remove(follow)
    finally:
        for bone in obj.pose.bones:
            animdata.set_selected(bone, selected[bone.name])
        if obj.mode != mode:
            bpy.ops.object.mode_set(mode=mode)
        view_layer.objects.active = active
        obj.fabrik.live = live


def made_here(obj) -> bool:
    """Whether the rig has a retarget to take away: its effectors, empties or switches."""
    return (
        any(_made(e.target) for e in obj.fabrik.effectors) or bpy.data.collections.get(collection_name(obj)) is not None
        or SWITCHES in obj.keys()
    )


def take_away(obj) -> int:
    """Take the retarget away whole: the effectors it made with their pins (the rig's keys otherwise stay), then
    what `remove` takes; how many effectors went."""
    from . import editable, pins  # (pins read the effectors this module makes)

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


def remove(obj) -> None:
    """Take the retarget away: its collection and empties, and the constraint on the rig's hips."""
    collection = bpy.data.collections.get(collection_name(obj))
    if collection is not None:
        for old in list(collection.objects):
            if _made(old):
                bpy.data.objects.remove(old)
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
