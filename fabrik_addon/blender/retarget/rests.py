# SPDX-License-Identifier: GPL-3.0-or-later
"""What a retarget reads once from the two armatures at rest: which rig bone takes which clip bone's turn, and
the space the clip moves in for this rig.

`Layout` holds every mapped bone (`setup.mapping`) and the spans between
them (the spine from the hips to the neck, the neck to the head) on both
sides, each rig bone's alignment to its clip bone's rest direction (a T-pose
clip raises an A-pose rig's arms for the mapping only), and the space: the
clip's body turned to face and stand as the rig's, its hips' motion scaled
by the legs, each hand's reach by its arm, on the rig's floor. Also each
limb's reach and each hinged knee or elbow, which `clip_pose` keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np

from ...core.math.matrix_rows import unit_frames
from ...core.motion import retarget
from ...core.motion.naming import fingers_of
from ...core.solving.limb import hinge_axis
from ..rig import armature
from . import setup
from .setup import LIMBS

#: Bones named for a mechanism (a generated rig's helpers): never a span's bone.
_MECHANISM = ("ORG-", "DEF-", "MCH-")


def _between(obj: bpy.types.Object, top: str, bottom: str) -> list[str]:
    """The bones strictly between `bottom` and its descendant `top`, bottom first, those a constraint moves or a
    generated rig's helpers left out."""
    bones, out = obj.data.bones, []
    bone = bones[top].parent
    while bone is not None and bone.name != bottom:
        if not bone.name.startswith(_MECHANISM) and not setup.overriding(obj.pose.bones[bone.name]):
            out.append(bone.name)
        bone = bone.parent
    return out[::-1]


@dataclass
class Side:
    """One skeleton at rest: its bones' rest matrices (armature space) and tails, and the object's world matrix."""

    names: list[str]
    rest: np.ndarray  # (N, 4, 4)
    tails: np.ndarray  # (N, 3)
    world: np.ndarray  # (4, 4)

    @classmethod
    def of(cls, obj: bpy.types.Object) -> Side:
        bones = obj.data.bones
        rest, tails = np.empty(len(bones) * 16), np.empty(len(bones) * 3)
        bones.foreach_get("matrix_local", rest)
        bones.foreach_get("tail_local", tails)
        return cls(list(bones.keys()), rest.reshape(-1, 4, 4).transpose(0, 2, 1), tails.reshape(-1, 3),
                   np.array(obj.matrix_world, dtype=float))

    def __post_init__(self) -> None:
        self._at = {name: k for k, name in enumerate(self.names)}

    def head(self, name: str) -> np.ndarray:
        """A bone's rest head in world space."""
        return (self.world @ self.rest[self._at[name]][:, 3])[:3]

    def tail(self, name: str) -> np.ndarray:
        """A bone's rest tail in world space."""
        return (self.world @ np.append(self.tails[self._at[name]], 1.0))[:3]

    def rotation(self, name: str) -> np.ndarray:
        """A bone's rest rotation in world space."""
        return unit_frames(self.world @ self.rest[self._at[name]])


@dataclass
class Layout:
    """What the retarget reads once: the driven rig bones, their clip sources and alignments, and the space."""

    clip: Side
    rig: Side
    #: The clip bones whose posed matrices each frame is read for.
    read: list[str]
    #: Per driven rig bone: its clip source, one clip bone's name, or a span (clip bones from the one below it,
    #: how many rig bones share it, this one's place among them from 1).
    sources: dict[str, tuple] = field(default_factory=dict)
    #: Per driven rig bone, its alignment (3, 3) in the retarget space.
    aligned: dict[str, np.ndarray] = field(default_factory=dict)
    turn: np.ndarray = field(default_factory=lambda: np.eye(3))
    scale: float = 1.0
    leg: dict[str, float] = field(default_factory=dict)
    #: How far each limb reaches (`_reach`), by its effector's name.
    reach: dict[str, float] = field(default_factory=dict)
    arm_scale: dict[str, float] = field(default_factory=dict)
    leg_scale: dict[str, float] = field(default_factory=dict)
    #: The rig's middle of the hip joints at rest (world); the ground under the clip's and the rig's; the rig's
    #: floor height and ankles' heights above it.
    rig_middle: np.ndarray = field(default_factory=lambda: np.zeros(3))
    clip_ground: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rig_ground: np.ndarray = field(default_factory=lambda: np.zeros(3))
    floor: float = 0.0
    ankle_height: dict[str, float] = field(default_factory=dict)
    #: The fingers carried over: per finger ("index.L") the clip's bones and the rig's, from the hand out.
    fingers: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    #: The limbs whose lower bone is a hinge: its axis and range (`_hinge`).
    hinges: dict[str, tuple] = field(default_factory=dict)
    #: How far the clip's up (the world axis nearest its hips-to-head) is from the rig's, in degrees: 0, 90 or 180.
    tipped: float = 0.0

    @classmethod
    def of(cls, obj: bpy.types.Object) -> Layout:
        source = obj.fabrik.retarget_source
        pairs = setup.mapping(obj)
        clip, rig = Side.of(source), Side.of(obj)
        layout = cls(clip, rig, [])
        layout._place(obj, source, pairs)
        layout._drive(obj, source, pairs)
        return layout

    @property
    def leg_length(self) -> float:
        """The rig's legs' mean length."""
        return float(np.mean(list(self.leg.values())))

    def _place(self, obj: bpy.types.Object, source, pairs: dict) -> None:
        """The space: the clip's body frame (left from hip to hip, up the world axis nearest hips to head, so a head
        carried forward does not tip the path) onto the rig's, the hips' middles on each other, scaled by the legs."""
        frames = []
        for side, k in ((self.clip, 0), (self.rig, 1)):
            left, right = side.head(pairs["thigh.L"][k]), side.head(pairs["thigh.R"][k])
            middle = (left + right) / 2.0
            turn = side.world[:3, :3]
            up = turn @ nearest_axis(np.linalg.inv(turn) @ (side.head(pairs["head"][k]) - middle))
            frames.append((retarget.body_frame(left - right, up), middle))
        (clip_frame, clip_middle), (rig_frame, self.rig_middle) = frames
        self.turn = rig_frame @ clip_frame.T
        # The clip's ground: under its hips on the plane through its world origin across its up; the rig's: under
        # its hips on its floor (set below).
        self.clip_ground = clip_middle - clip_frame[:, 2] * float(clip_middle @ clip_frame[:, 2])
        self.tipped = float(np.degrees(np.arccos(np.clip(clip_frame[:, 2] @ rig_frame[:, 2], -1.0, 1.0))))
        lengths = limb_lengths(obj, source, pairs, self.clip, self.rig)
        self.leg = {s: lengths["leg", s, 1] for s in "LR"}
        self.leg_scale = {s: lengths["leg", s, 1] / max(lengths["leg", s, 0], 1e-9) for s in "LR"}
        self.scale, self.arm_scale = scales(obj, lengths)
        # The floor: the rig's Floor, else the lowest point of the rig at rest (it stands there).
        rest_floor = float(min((self.rig.world[:3, :3] @ np.concatenate((self.rig.rest[:, :3, 3], self.rig.tails)).T
                                + self.rig.world[:3, 3:4])[2]))
        floor = obj.fabrik.floor
        if floor is not None:
            floor = floor.evaluated_get(bpy.context.evaluated_depsgraph_get())
        self.floor = float(floor.matrix_world.translation.z) if floor is not None else rest_floor
        self.rig_ground = np.array([self.rig_middle[0], self.rig_middle[1], self.floor])
        for s in "LR":
            self.ankle_height[s] = float(self.rig.tail(pairs[f"shin.{s}"][1])[2] - rest_floor)
        skeleton = armature.skeleton_of(obj)
        for name, upper, lower, _, _ in LIMBS:
            hinge = _hinge(skeleton.limits[skeleton.index(pairs[lower][1])])
            if hinge is not None:
                self.hinges[name] = hinge
            self.reach[name] = self._reach(pairs[upper][1], pairs[lower][1], hinge)

    def _reach(self, upper: str, lower: str, hinge: tuple | None) -> float:
        """How far a limb reaches, a hair inside: its bones end to end, or as straight as its knee's or elbow's
        hinge lets it be."""
        top, knee, end = self.rig.head(upper), self.rig.head(lower), self.rig.tail(lower)
        longest = np.linalg.norm(knee - top) + np.linalg.norm(end - knee)
        if hinge is not None:
            axis, low, high = hinge
            turns = np.linspace(low, high, 721)
            local = np.zeros((len(turns), 3))
            local[:, 1] = np.cos(turns) * np.linalg.norm(end - knee)
            local[:, 2 if axis == 0 else 0] = np.sin(turns) * np.linalg.norm(end - knee) * (1.0 if axis == 0 else -1.0)
            ends = knee + local @ self.rig.rotation(lower).T
            longest = float(np.linalg.norm(ends - top, axis=1).max())
        return float(longest) * (1.0 - 1e-5)

    def _drive(self, obj: bpy.types.Object, source, pairs: dict) -> None:
        """Each rig bone the clip turns, where its turn comes from and its alignment."""
        one = [role for role in pairs if role != "hips"]
        for role in one:
            self.sources[pairs[role][1]] = (pairs[role][0],)
        self.sources[pairs["hips"][1]] = (pairs["hips"][0],)
        trunk = [role for role in ("hips", "neck", "head") if role in pairs]
        for bottom, top in zip(trunk, trunk[1:]):
            clip_span = _between(source, pairs[top][0], pairs[bottom][0])
            rig_span = _between(obj, pairs[top][1], pairs[bottom][1])
            for i, name in enumerate(rig_span, 1):
                self.sources[name] = ((pairs[bottom][0], *clip_span), len(rig_span), i)
            self._align_span(obj, source, pairs, bottom, top, clip_span, rig_span)
        self._fingers(obj, source, pairs)
        read = {name for sourced in self.sources.values() for name in
                (sourced[0] if len(sourced) == 3 else sourced)}
        self.read = sorted(read, key=self.clip.names.index)
        # The bones along each limb and the trunk's mapped bones point to the next mapped one; those at the ends
        # (hands, feet without toes, toes, the head) keep the alignment of the bone above them.
        nexts = {"shoulder": "upper_arm", "upper_arm": "forearm", "forearm": "hand", "thigh": "shin", "shin": "foot",
                 "foot": "toe"}
        above = {"hand": "forearm", "foot": "shin", "toe": "foot", "head": "neck", "forearm": "upper_arm",
                 "shin": "thigh"}
        for role, (clip_bone, rig_bone) in pairs.items():
            part, _, s = role.partition(".")
            after = f"{nexts[part]}.{s}" if part in nexts else None
            if after in pairs:
                clip_way = self.clip.head(pairs[after][0]) - self.clip.head(clip_bone)
                rig_way = self.rig.head(pairs[after][1]) - self.rig.head(rig_bone)
                self.aligned[rig_bone] = retarget.alignment(rig_way, self.turn @ clip_way)
        for role, (clip_bone, rig_bone) in pairs.items():
            part, _, s = role.partition(".")
            if rig_bone in self.aligned:
                continue
            up = above.get(part)
            while up is not None and not ((f"{up}.{s}" if s else up) in pairs
                                          and pairs[f"{up}.{s}" if s else up][1] in self.aligned):
                up = above.get(up)
            key = (f"{up}.{s}" if s else up) if up else None
            self.aligned[rig_bone] = self.aligned[pairs[key][1]] if key else np.eye(3)
        for key, (clip_bones, rig_bones) in self.fingers.items():
            turn = self.aligned[pairs[f"hand.{key[-1]}"][1]]
            if len(clip_bones) > 1 and len(rig_bones) > 1:  # (a one-bone finger has no way to point but its tail's)
                clip_way = self.clip.head(clip_bones[-1]) - self.clip.head(clip_bones[0])
                rig_way = self.rig.head(rig_bones[-1]) - self.rig.head(rig_bones[0])
                turn = retarget.alignment(rig_way, self.turn @ clip_way)
            for name in rig_bones:
                self.aligned[name] = turn

    def _fingers(self, obj: bpy.types.Object, source: bpy.types.Object, pairs: dict) -> None:
        """The fingers both skeletons have (`core.motion.naming.fingers_of`): each finger's bones take its clip finger's
        turns, sampled along it from the hand, aligned as the whole finger (from its first joint to its last)."""
        clip_fingers = fingers_of([b.name for b in source.data.bones])
        rig_fingers = {key: [n for n in names if not n.startswith(_MECHANISM)
                             and not setup.overriding(obj.pose.bones[n])]
                       for key, names in fingers_of([b.name for b in obj.data.bones]).items()}
        for key, clip_bones in clip_fingers.items():
            hand, rig_bones = f"hand.{key[-1]}", rig_fingers.get(key)
            if hand not in pairs or not rig_bones or any(n in self.sources for n in rig_bones):
                continue
            while len(clip_bones) > len(rig_bones) and not source.data.bones[clip_bones[-1]].children:
                clip_bones = clip_bones[:-1]  # (a fingertip's end bone, as Mixamo's Index4: it never turns)
            for i, name in enumerate(rig_bones, 1):
                self.sources[name] = ((pairs[hand][0], *clip_bones), len(rig_bones), i)
            self.fingers[key] = (clip_bones, rig_bones)

    def _align_span(self, obj: bpy.types.Object, source, pairs, bottom: str, top: str, clip_span, rig_span) -> None:
        """A span's bones (and its bottom bone, but the hips) aligned as the whole span: from its first bone's head
        to the head of the bone above it."""
        def way(side, span, k):
            start = side.head(span[0]) if span else side.head(pairs[bottom][k])
            return side.head(pairs[top][k]) - start
        turn = retarget.alignment(way(self.rig, rig_span, 1), self.turn @ way(self.clip, clip_span, 0))
        for name in rig_span:
            self.aligned[name] = turn
        if bottom != "hips":
            self.aligned[pairs[bottom][1]] = turn


def _hinge(limit) -> tuple[int, float, float] | None:
    """Where a joint's limit makes it a hinge (`core.solving.limb.hinge_axis`): its axis (0 for X, 2 for Z) and range."""
    axis = hinge_axis(limit)
    if axis is None:
        return None
    return (0, *limit.x_range) if axis[0] else (2, *limit.z_range)


def nearest_axis(direction: np.ndarray) -> np.ndarray:
    """The axis (+-X, +-Y or +-Z) nearest a direction."""
    axis = np.zeros(3)
    k = int(np.argmax(np.abs(direction)))
    axis[k] = np.sign(direction[k])
    return axis


def limb_lengths(
    obj: bpy.types.Object, source, pairs: dict, clip: Side | None = None, rig_side: Side | None = None
) -> dict:
    """Each limb's length at rest, its two bones end to end in world units: per ("leg" or "arm", side, 0 for the
    clip or 1 for the rig)."""
    clip, rig_side = clip or Side.of(source), rig_side or Side.of(obj)
    lengths = {}
    for s in "LR":
        for limb, upper, lower, ending in (("leg", "thigh", "shin", "foot"), ("arm", "upper_arm", "forearm", "hand")):
            for side, k in ((clip, 0), (rig_side, 1)):
                top = side.head(pairs[f"{upper}.{s}"][k])
                knee = side.head(pairs[f"{lower}.{s}"][k])
                # (a limb ends where its hand or foot begins: its bones' tails may point anywhere)
                end = side.head(pairs[f"{ending}.{s}"][k]) if f"{ending}.{s}" in pairs else \
                    side.tail(pairs[f"{lower}.{s}"][k])
                lengths[limb, s, k] = float(np.linalg.norm(knee - top) + np.linalg.norm(end - knee))
    return lengths


def scales(obj: bpy.types.Object, lengths: dict | None = None) -> tuple[float, dict[str, float]]:
    """The scale of the clip's hips motion on the rig (its legs' ratio) and of each hand's reach (its arm's), from
    the bones (`limb_lengths`, read where not given); the rig's Scale and Arm Scale where set."""
    lengths = lengths or limb_lengths(obj, obj.fabrik.retarget_source, setup.mapping(obj))
    settings = obj.fabrik
    body = float(np.mean([lengths["leg", s, 1] / max(lengths["leg", s, 0], 1e-9) for s in "LR"]))
    arms = {s: lengths["arm", s, 1] / max(lengths["arm", s, 0], 1e-9) for s in "LR"}
    return (settings.retarget_scale or body), {s: settings.retarget_arm_scale or arms[s] for s in "LR"}
