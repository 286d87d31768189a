# SPDX-License-Identifier: GPL-3.0-or-later
"""What a retarget reads once from the two armatures at rest: which rig bone takes which clip bone's turn, and
the space the clip moves in for this rig.

`Layout` holds every mapped bone (`retarget.mapping`) and the spans between
them (the spine from the hips to the neck, the neck to the head) on both
sides, each rig bone's alignment to its clip bone's rest direction (a T-pose
clip raises an A-pose rig's arms for the mapping only), and the space: the
clip's body turned to face and stand as the rig's, its hips' motion scaled
by the legs, each hand's reach by its arm, on the rig's floor. Also each
limb's reach and each hinged knee or elbow, which `retarget_pose` keeps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np

from ..core import retarget as arithmetic
from ..core.naming import fingers_of
from . import retarget
from .retarget import LIMBS

#: Bones named for a mechanism (a generated rig's helpers): never a span's bone.
_MECHANISM = ("ORG-", "DEF-", "MCH-")


def _matrices(bones) -> np.ndarray:
    """The bones' rest matrices in armature space (N, 4, 4)."""
    flat = np.empty(len(bones) * 16)
    bones.foreach_get("matrix_local", flat)
    return flat.reshape(-1, 4, 4).transpose(0, 2, 1)


def _world(obj) -> np.ndarray:
    """The object's world matrix as numpy."""
    return np.array(obj.matrix_world, dtype=float)


def _between(obj, top: str, bottom: str) -> list[str]:
    """The bones strictly between `bottom` and its descendant `top`, bottom first, those a constraint moves or a
    generated rig's helpers left out."""
    bones, out = obj.data.bones, []
    bone = bones[top].parent
    while bone is not None and bone.name != bottom:
        if not bone.name.startswith(_MECHANISM) and not retarget.overriding(obj.pose.bones[bone.name]):
            out.append(bone.name)
        bone = bone.parent
    return out[::-1]


@dataclass
class Side:
    """One skeleton at rest: its bones' names (parents first) and rest matrices."""

    names: list[str]
    rest: np.ndarray  # (N, 4, 4) armature space
    world: np.ndarray  # (4, 4) the object's

    @classmethod
    def of(cls, obj) -> Side:
        bones = obj.data.bones
        depth = {}
        for bone in bones:
            depth[bone.name] = len(bone.parent_recursive)
        names = sorted((b.name for b in bones), key=lambda n: depth[n])
        order = [bones.find(n) for n in names]
        return cls(names, _matrices(bones)[order], _world(obj))

    def index(self, name: str) -> int:
        return self.names.index(name)

    def head(self, name: str) -> np.ndarray:
        """A bone's rest head in world space."""
        return (self.world @ self.rest[self.index(name)][:, 3])[:3]

    def tail(self, obj, name: str) -> np.ndarray:
        """A bone's rest tail in world space."""
        return (self.world @ np.append(np.array(obj.data.bones[name].tail_local), 1.0))[:3]

    def rotation(self, name: str) -> np.ndarray:
        """A bone's rest rotation in world space."""
        return arithmetic.rotations(self.world @ self.rest[self.index(name)])


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
    leg_length: float = 1.0
    leg: dict[str, float] = field(default_factory=dict)
    #: How far each limb reaches (`_reach`), by its effector's name.
    reach: dict[str, float] = field(default_factory=dict)
    arm_scale: dict[str, float] = field(default_factory=dict)
    leg_scale: dict[str, float] = field(default_factory=dict)
    #: The rig's and the clip's middle of the hips at rest (world), the rig's floor height and ankles' heights.
    rig_middle: np.ndarray = field(default_factory=lambda: np.zeros(3))
    clip_middle: np.ndarray = field(default_factory=lambda: np.zeros(3))
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
    def of(cls, obj) -> Layout:
        source = obj.fabrik.retarget_source
        pairs = retarget.mapping(obj)
        clip, rig = Side.of(source), Side.of(obj)
        layout = cls(clip, rig, [])
        layout._place(obj, source, pairs)
        layout._drive(obj, source, pairs)
        return layout

    def _place(self, obj, source, pairs: dict) -> None:
        """The space: the clip's body frame (its left from the right hip to the left, its up the world axis nearest
        the way from its hips to its head) onto the rig's, the hips' middles on each other, scaled by the legs.
        (The nearest axis, not the way itself: a head carried a little forward must not tip the clip's path.)"""
        frames = []
        for side, k in ((self.clip, 0), (self.rig, 1)):
            left, right = side.head(pairs["thigh.L"][k]), side.head(pairs["thigh.R"][k])
            middle = (left + right) / 2.0
            turn = side.world[:3, :3]
            up = turn @ nearest_axis(np.linalg.inv(turn) @ (side.head(pairs["head"][k]) - middle))
            frames.append((arithmetic.body_frame(left - right, up), middle))
        (clip_frame, self.clip_middle), (rig_frame, self.rig_middle) = frames
        self.turn = rig_frame @ clip_frame.T
        # The clip's ground: under its hips on the plane through its world origin across its up; the rig's: under
        # its hips on its floor (set below).
        self.clip_ground = self.clip_middle - clip_frame[:, 2] * float(self.clip_middle @ clip_frame[:, 2])
        self.tipped = float(np.degrees(np.arccos(np.clip(clip_frame[:, 2] @ rig_frame[:, 2], -1.0, 1.0))))
        lengths = limb_lengths(obj, source, pairs, self.clip, self.rig)
        settings = obj.fabrik
        self.leg = {s: float(lengths["leg", s, 1]) for s in "LR"}
        self.leg_length = float(np.mean(list(self.leg.values())))
        self.scale, self.arm_scale = scales(obj)
        for s in "LR":
            self.leg_scale[s] = float(lengths["leg", s, 1] / max(lengths["leg", s, 0], 1e-9))
        # The floor: the rig's Floor, else the lowest point of the rig at rest (it stands there).
        points = [self.rig.head(n) for n in self.rig.names] + [self.rig.tail(obj, n) for n in self.rig.names]
        floor = settings.floor
        if floor is not None:
            floor = floor.evaluated_get(bpy.context.evaluated_depsgraph_get())
        self.floor = float(floor.matrix_world.translation.z) if floor is not None else float(min(p[2] for p in points))
        rest_floor = float(min(p[2] for p in points))
        for name, upper, lower, _, _ in LIMBS:
            hinge = self._hinge(obj, pairs[lower][1])
            if hinge is not None:
                self.hinges[name] = hinge
        for name, upper, lower, _, _ in LIMBS:
            self.reach[name] = self._reach(obj, pairs[upper][1], pairs[lower][1], self.hinges.get(name))
        self.rig_ground = np.array([self.rig_middle[0], self.rig_middle[1], self.floor])
        for s in "LR":
            self.ankle_height[s] = float(self.rig.tail(obj, pairs[f"shin.{s}"][1])[2] - rest_floor)

    def _reach(self, obj, upper: str, lower: str, hinge: tuple | None) -> float:
        """How far a limb reaches, a hair inside: its bones end to end, or as straight as its knee's or elbow's
        hinge lets it be."""
        top, knee, end = self.rig.head(upper), self.rig.head(lower), self.rig.tail(obj, lower)
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

    @staticmethod
    def _hinge(obj, lower: str) -> tuple[int, float, float] | None:
        """Where a limb's lower bone is a hinge (two of its IK axes locked, Y among them): its axis (0 for X, 2 for
        Z) and range; else None."""
        pose_bone = obj.pose.bones[lower]
        if not pose_bone.lock_ik_y or pose_bone.lock_ik_x == pose_bone.lock_ik_z:
            return None
        axis = 2 if pose_bone.lock_ik_x else 0
        letter = "xz"[axis // 2]
        if getattr(pose_bone, f"use_ik_limit_{letter}"):
            return axis, getattr(pose_bone, f"ik_min_{letter}"), getattr(pose_bone, f"ik_max_{letter}")
        return axis, -np.pi, np.pi

    def _drive(self, obj, source, pairs: dict) -> None:
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
        self.read = sorted(read, key=self.clip.index)
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
                self.aligned[rig_bone] = arithmetic.alignment(rig_way, self.turn @ clip_way)
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
                turn = arithmetic.alignment(rig_way, self.turn @ clip_way)
            for name in rig_bones:
                self.aligned[name] = turn

    def _fingers(self, obj, source, pairs: dict) -> None:
        """The fingers both skeletons have (`core.naming.fingers_of`): each finger's bones take its clip finger's
        turns, sampled along it from the hand, aligned as the whole finger (from its first joint to its last)."""
        clip_fingers = fingers_of([b.name for b in source.data.bones])
        rig_fingers = {key: [n for n in names if not n.startswith(_MECHANISM)
                             and not retarget.overriding(obj.pose.bones[n])]
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

    def _align_span(self, obj, source, pairs, bottom: str, top: str, clip_span, rig_span) -> None:
        """A span's bones (and its bottom bone, but the hips) aligned as the whole span: from its first bone's head
        to the head of the bone above it."""
        def way(side, span, k):
            start = side.head(span[0]) if span else side.head(pairs[bottom][k])
            return side.head(pairs[top][k]) - start
        turn = arithmetic.alignment(way(self.rig, rig_span, 1), self.turn @ way(self.clip, clip_span, 0))
        for name in rig_span:
            self.aligned[name] = turn
        if bottom != "hips":
            self.aligned[pairs[bottom][1]] = turn


def nearest_axis(direction: np.ndarray) -> np.ndarray:
    """The axis (+-X, +-Y or +-Z) nearest a direction."""
    axis = np.zeros(3)
    k = int(np.argmax(np.abs(direction)))
    axis[k] = np.sign(direction[k])
    return axis


def limb_lengths(obj, source, pairs: dict, clip: Side | None = None, rig: Side | None = None) -> dict:
    """Each limb's length at rest, its two bones end to end in world units: per ("leg" or "arm", side, 0 for the
    clip or 1 for the rig)."""
    clip, rig = clip or Side.of(source), rig or Side.of(obj)
    lengths = {}
    for s in "LR":
        for limb, upper, lower, ending in (("leg", "thigh", "shin", "foot"), ("arm", "upper_arm", "forearm", "hand")):
            for side, k, obj_ in ((clip, 0, source), (rig, 1, obj)):
                top = side.head(pairs[f"{upper}.{s}"][k])
                knee = side.head(pairs[f"{lower}.{s}"][k])
                # (a limb ends where its hand or foot begins: its bones' tails may point anywhere)
                end = side.head(pairs[f"{ending}.{s}"][k]) if f"{ending}.{s}" in pairs else \
                    side.tail(obj_, pairs[f"{lower}.{s}"][k])
                lengths[limb, s, k] = float(np.linalg.norm(knee - top) + np.linalg.norm(end - knee))
    return lengths


def scales(obj) -> tuple[float, dict[str, float]]:
    """The scale of the clip's hips motion on the rig (its legs' ratio) and of each hand's reach (its arm's), from
    the bones; the rig's Body Scale and Arm Scale where set."""
    lengths = limb_lengths(obj, obj.fabrik.retarget_source, retarget.mapping(obj))
    settings = obj.fabrik
    body = float(np.mean([lengths["leg", s, 1] / max(lengths["leg", s, 0], 1e-9) for s in "LR"]))
    arms = {s: lengths["arm", s, 1] / max(lengths["arm", s, 0], 1e-9) for s in "LR"}
    return (settings.retarget_scale or body), {s: settings.retarget_arm_scale or arms[s] for s in "LR"}
