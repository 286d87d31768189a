# SPDX-License-Identifier: GPL-3.0-or-later
"""Body parts from bone names: the roles a retarget maps between two skeletons.

Captured clips and rigs name the same bones differently: BVH's
Hips/LeftUpLeg/LeftLeg (CMU, Mixamo), MotionBuilder's LeftHip/LeftKnee/
LeftAnkle, with or without a LeftCollar (each bone named for the joint at its
head), side letters with or without a separator (hand.L, HandL),
Rigify's thigh.L/shin.L with ORG-/DEF- copies and spine.004/spine.006 for
neck and head (a rig Rigify generated is posed by its controls instead: its
FK bones, the torso that carries the body, its neck and head), Unreal's thigh_l/calf_l/upperarm_l, Rokoko's LeftThigh/
LeftShin, Character Creator's CC_Base_ prefixes and namespaces such as
mixamorig:. A name is read as a side (left, right or none) and a part;
where several bones take one role, the plainest name wins (no mechanism
prefix, then the shortest).
"""

from __future__ import annotations

import re
from typing import Sequence

__all__ = ["FINGERS", "LIMB_ROLES", "ROLES", "fingers_of", "role_of", "roles_of"]

#: The roles, side by side: the body's middle, then each side's arm and leg.
_SIDED = ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe")
ROLES = ("hips", "neck", "head", *(f"{part}.{side}" for side in "LR" for part in _SIDED))
#: The roles a limb's effector needs: its two bones.
LIMB_ROLES = {f"{limb}.{side}": (f"{upper}.{side}", f"{lower}.{side}")
              for side in "LR" for limb, upper, lower in (("arm", "upper_arm", "forearm"), ("leg", "thigh", "shin"))}

_PREFIX = re.compile(r"^(?:.*[:|])?(?:(?P<mechanism>ORG|DEF|MCH)[-_.])?(?:CC_Base_|Bip0*1[ _]|b_)?", re.IGNORECASE)
_SIDE_SUFFIX = re.compile(r"(?:[._\- ](?P<side>l|r|left|right))$", re.IGNORECASE)
#: A side letter written straight after a lowercase word ("HandL", "UpperArmR").
_SIDE_LETTER = re.compile(r"(?<=[a-z])(?P<side>L|R)$")
_SIDE_PREFIX = re.compile(r"^(?P<side>left|right)(?=[A-Z_ .\-]|$)|^(?P<short>L|R)(?=[A-Z_ .\-])", re.IGNORECASE)

#: A part by the words names use for it (lowercase, without separators), for a sided bone and for one in the
#: middle.
_SIDED_WORDS = {
    "shoulder": "shoulder", "clavicle": "shoulder", "collar": "shoulder",
    "arm": "upper_arm", "upperarm": "upper_arm", "uparm": "upper_arm", "humerus": "upper_arm",
    "forearm": "forearm", "lowerarm": "forearm", "lowarm": "forearm", "elbow": "forearm",
    "hand": "hand", "wrist": "hand",
    "upleg": "thigh", "thigh": "thigh", "upperleg": "thigh", "hip": "thigh", "femur": "thigh",
    "leg": "shin", "shin": "shin", "calf": "shin", "lowerleg": "shin", "lowleg": "shin", "knee": "shin",
    "foot": "foot", "ankle": "foot",
    "toe": "toe", "toes": "toe", "toebase": "toe", "ball": "toe",
}
_MIDDLE_WORDS = {"hips": "hips", "hip": "hips", "pelvis": "hips", "neck": "neck", "neck1": None, "head": "head"}
#: Where a skeleton names each bone for the joint at its head (it has a collar), these words move one bone on.
_JOINT_WORDS = {"collar": "shoulder", "shoulder": "upper_arm", "elbow": "forearm", "wrist": "hand",
                "hip": "thigh", "knee": "shin", "ankle": "foot"}
#: Words that name a joint, not a bone, where a skeleton names its bones for their parts (a pole, a helper).
_JOINT_ONLY = ("elbow", "knee", "wrist", "ankle")
#: Rigify's spine: its first bone is the hips, the fifth the neck, the seventh the head.
_RIGIFY_SPINE = {"spine": "hips", "spine.004": "neck", "spine.006": "head"}
#: A rig Rigify generated: the controls that pose each part (its torso carries the whole body; the limbs' FK
#: chains, which its IK/FK switch at FK hands to the deforming bones).
_RIGIFY_CONTROLS = {
    "hips": "torso", "neck": "neck", "head": "head",
    **{f"{part}.{side}": f"{bone}.{side}" for side in "LR" for part, bone in (
        ("shoulder", "shoulder"), ("upper_arm", "upper_arm_fk"), ("forearm", "forearm_fk"), ("hand", "hand_fk"),
        ("thigh", "thigh_fk"), ("shin", "shin_fk"), ("foot", "foot_fk"), ("toe", "toe_fk"),
    )},
}


#: The fingers a retarget carries over where both skeletons have them, and a finger bone's name as read.
FINGERS = ("thumb", "index", "middle", "ring", "pinky")
_FINGER = re.compile(r"^(?:hand|f|finger)?(?P<finger>thumb|index|middle|ring|pinky|pinkie|little)(?:finger)?(?P<number>\d*)$")


def fingers_of(names: Sequence[str]) -> dict[str, list[str]]:
    """Per finger and side ("index.L"), its bones from the hand outwards, by their names: a side, a finger's word
    and a number (Mixamo's LeftHandIndex1, Rigify's f_index.01.L, Unreal's index_01_l, CMU's LThumb); of several
    bones with one place the plainest (no mechanism prefix)."""
    found: dict[str, dict[int, tuple[int, str]]] = {}
    for name in names:
        side, word, rank = _read(name)
        whole = re.sub(r"[._\- ]", "", name[_PREFIX.match(name).end():]).lower()
        match = _FINGER.match(word) or _FINGER.match(re.sub(r"^(left|right|[lr])|(left|right|[lr])$", "", whole))
        if side is None or match is None:
            continue
        finger = {"pinkie": "pinky", "little": "pinky"}.get(match.group("finger"), match.group("finger"))
        number = int(match.group("number") or 1)
        places = found.setdefault(f"{finger}.{side}", {})
        if number not in places or rank < places[number][0]:
            places[number] = (rank, name)
    return {key: [name for _, (_, name) in sorted(places.items())] for key, places in found.items()}


def _read(name: str) -> tuple[str | None, str, int]:
    """A bone name as (side "L", "R" or None, the part's word lowercased without separators, how mechanical its
    prefix is: 0 none, 1 ORG, 2 DEF, 3 MCH)."""
    match = _PREFIX.match(name)
    mechanism = (match.group("mechanism") or "").upper()
    rank = {"": 0, "ORG": 1, "DEF": 2, "MCH": 3}[mechanism]
    stem = name[match.end():]
    side = None
    suffix = _SIDE_SUFFIX.search(stem) or _SIDE_LETTER.search(stem)
    if suffix:
        side = suffix.group("side")[0].upper()
        stem = stem[: suffix.start()]
    else:
        prefix = _SIDE_PREFIX.match(stem)
        if prefix:
            side = (prefix.group("side") or prefix.group("short"))[0].upper()
            stem = stem[prefix.end():]
    word = re.sub(r"[._\- ]", "", stem).lower()
    if side is None and stem.lower() in _RIGIFY_SPINE:
        return None, stem.lower(), rank
    return side, word if word == "neck1" else re.sub(r"0*1$", "", word), rank


def role_of(name: str, joint_named: bool = False, rigify: bool = False) -> str | None:
    """The role of one bone name (`ROLES`), or None; `joint_named`: the skeleton names bones for their head
    joints (MotionBuilder's BVH: a LeftCollar, LeftShoulder is the upper arm); `rigify`: its spine is Rigify's."""
    side, word, _ = _read(name)
    if side is None:
        if word in _RIGIFY_SPINE:
            return _RIGIFY_SPINE[word] if rigify else None
        return None if rigify and word in ("hips", "neck", "head") else _MIDDLE_WORDS.get(word)
    part = _JOINT_WORDS.get(word) if joint_named and word in _JOINT_WORDS else _SIDED_WORDS.get(word)
    return f"{part}.{side}" if part else None


def roles_of(names: Sequence[str]) -> dict[str, str]:
    """Each role's bone among the names (roles no name takes are left out)."""
    present = set(names)
    if {"torso", "upper_arm_fk.L", "thigh_fk.L"} <= present:  # (a rig Rigify generated: its controls)
        return {role: bone for role, bone in _RIGIFY_CONTROLS.items() if bone in present}
    words = {_read(name)[1] for name in names}
    # (joint-named: a collar, or an elbow and a knee where no name says forearm or shin: a rig's pole bones named
    # knee.L do not make its upper_arm.L a shoulder)
    joint_named = "collar" in words or (
        {"elbow", "knee"} <= words and not words & {w for w, part in _SIDED_WORDS.items() if part in ("forearm", "shin")}
        - {"elbow", "knee"}
    )
    rigify = any(_read(name)[1] == "spine.006" for name in names)
    found: dict[str, tuple[tuple, str]] = {}
    for order, name in enumerate(names):
        role = role_of(name, joint_named, rigify)
        if role is None:
            continue
        _, word, mechanism = _read(name)
        # (a bone named for its part before one named for a joint: forearm.L before an elbow.L pole)
        rank = (mechanism, word in _JOINT_ONLY and not joint_named, len(name), order)
        if role not in found or rank < found[role][0]:
            found[role] = (rank, name)
    return {role: name for role, (_, name) in found.items()}
