# SPDX-License-Identifier: GPL-3.0-or-later
"""The clip's pose on the rig: which rig bone takes which clip bone's turn, and the goals that correct the ends.

`Layout` is read once from the two armatures at rest: every mapped bone
(`retarget.mapping`) and the spans between them (the spine from the hips to
the neck, the neck to the head) on both sides, each rig bone's alignment to
its clip bone's rest direction, and the space the clip moves in for this
rig: turned so the clip's body faces and stands as the rig's, scaled by the
legs. `Copy.make` then takes the clip's posed bones over all frames (read by
`retarget_work`) to the rig's local rotations and hips locations
(`core.retarget`), and the ends' goals: each wrist from its shoulder scaled
by the arms' lengths, each ankle from its hip by the legs', the feet held
where they stand, heel and toe, grounded on the floor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np
from mathutils import Matrix, Vector

from ..core import retarget as arithmetic
from . import retarget
from .retarget import LIMBS

#: How far (a share of the leg's reach) a held foot may be out of the leg's reach before the hips come down: a
#: foot the clip's own slide takes that little further is taken in to the leg instead.
SLACK = 0.005
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
    """One skeleton at rest: its bones' names, parents and rest matrices in world space."""

    names: list[str]
    parents: list[int]
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
        index = {n: i for i, n in enumerate(names)}
        parents = [index[bones[n].parent.name] if bones[n].parent else -1 for n in names]
        return cls(names, parents, _matrices(bones)[order], _world(obj))

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
    #: The limbs whose lower bone is a hinge: its axis and range (`_hinge`).
    hinges: dict[str, tuple] = field(default_factory=dict)
    #: How far the clip's rest stands tipped from the rig's up, in degrees.
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
        """The space: the clip's body frame (its left from the right hip to the left, its up from the hips to the
        head) onto the rig's, the hips' middles on each other, scaled by the legs."""
        frames = []
        for side, k in ((self.clip, 0), (self.rig, 1)):
            left, right = side.head(pairs["thigh.L"][k]), side.head(pairs["thigh.R"][k])
            middle = (left + right) / 2.0
            frames.append((arithmetic.body_frame(left - right, side.head(pairs["head"][k]) - middle), middle))
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
        read = {name for sourced in self.sources.values() for name in
                (sourced[0] if len(sourced) == 3 else sourced)}
        self.read = sorted(read, key=self.clip.index)
        # The bones along each limb and the trunk's mapped bones point to the next mapped one; those at the ends
        # (hands, feet without toes, toes, the head) keep the alignment of the bone above them.
        nexts = {"shoulder": "upper_arm", "upper_arm": "forearm", "forearm": "hand", "thigh": "shin", "shin": "foot",
                 "foot": "toe"}
        above = {"hand": "forearm", "foot": "shin", "toe": "foot", "head": "neck"}
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
                # (the clip's limb ends where its hand or foot begins: its bones' tails may point anywhere)
                end = side.head(pairs[f"{ending}.{s}"][0]) if k == 0 and f"{ending}.{s}" in pairs else \
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


def hold_of(obj, names: list[str]) -> arithmetic.Hold:
    """How the driven bones (`names`, parents first) hang on each other in this rig, found by turning each in turn
    and seeing which bones turn with it and which it carries (Blender evaluates the rig, constraints and all);
    their channels are as they were after."""
    pose_bones = [obj.pose.bones[n] for n in names]
    kept = [(pb.rotation_quaternion.copy(), pb.rotation_euler.copy(), tuple(pb.rotation_axis_angle), pb.location.copy())
            for pb in pose_bones]
    count = len(names)
    depth = [len(obj.data.bones[n].parent_recursive) for n in names]
    turns_with, moves_with = [-1] * count, [-1] * count
    test = Matrix.Translation((0.1, 0.2, 0.3)) @ Matrix.Rotation(1.0, 4, Vector((1.0, 2.0, 3.0)).normalized())
    try:
        for pb in pose_bones:
            pb.matrix_basis = Matrix.Identity(4)
        rest = _evaluated(obj, names)
        rest_turns = arithmetic.rotations(rest)
        for a, pb in enumerate(pose_bones):
            pb.matrix_basis = test
            probe = _evaluated(obj, names)
            pb.matrix_basis = Matrix.Identity(4)
            turn = arithmetic.rotations(probe[a]) @ rest_turns[a].T
            move = probe[a] @ np.linalg.inv(rest[a])
            for k in range(count):
                if k == a:
                    continue
                turned = arithmetic.rotations(probe[k])
                if (np.abs(turned - rest_turns[k]).max() > 1e-3 and np.abs(turned - turn @ rest_turns[k]).max() < 1e-4
                        and (turns_with[k] < 0 or depth[a] > depth[turns_with[k]])):
                    turns_with[k] = a
                moved = probe[k][:3, 3]
                if (np.abs(moved - rest[k][:3, 3]).max() > 1e-4 and np.abs(moved - (move @ rest[k][:, 3])[:3]).max() < 1e-4
                        and (moves_with[k] < 0 or depth[a] > depth[moves_with[k]])):
                    moves_with[k] = a
    finally:
        for pb, (quaternion, euler, axis_angle, location) in zip(pose_bones, kept):
            pb.rotation_quaternion, pb.rotation_euler = quaternion, euler
            pb.rotation_axis_angle, pb.location = axis_angle, location
        bpy.context.view_layer.update()
    return arithmetic.Hold(rest, turns_with, moves_with)


def _evaluated(obj, names: list[str]) -> np.ndarray:
    """The bones' posed matrices (N, 4, 4, armature space) as Blender evaluates the rig now."""
    bpy.context.view_layer.update()
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    flat = np.empty(len(evaluated.pose.bones) * 16)
    evaluated.pose.bones.foreach_get("matrix", flat)
    order = {b.name: i for i, b in enumerate(evaluated.pose.bones)}
    return flat.reshape(-1, 4, 4).transpose(0, 2, 1)[[order[n] for n in names]]


@dataclass
class Copy:
    """The clip's pose on the rig over every frame, and the goals that correct its ends."""

    #: The driven rig bones, parents first; each one's armature-space rotation (F, 3, 3) and local rotation.
    names: list[str]
    turned: dict[int, np.ndarray]
    local: dict[int, np.ndarray]
    hold: arithmetic.Hold
    hips: str
    hips_location: np.ndarray
    #: Per limb effector ("hand.L"...): its goal (F, 3) in world space; the feet's contacts (ankle, toe).
    goals: dict[str, np.ndarray]
    contacts: dict[str, tuple[list, list]]
    #: The driven bones' posed matrices (F, N, 4, 4) in armature space, as the copy poses them.
    posed: np.ndarray
    #: How far the clip was moved up to stand on the rig's floor (world units).
    grounded: float
    #: Per hand, the frames where the clip's hand is further from its shoulder than the rig's arm reaches, scaled
    #: (a bone stretched in the clip): the arm goes straight towards it.
    beyond: dict[str, int]

    @classmethod
    def make(cls, obj, layout: Layout, hold: arithmetic.Hold, names: list[str], clip_posed: np.ndarray,
             clip_world: np.ndarray, hold_feet: bool = True) -> Copy:
        """The copy from the clip's posed bones (F, len(layout.read), 4, 4) in its armature space and its world
        matrices (F, 4, 4); `names`: the driven rig bones as `hold` has them."""
        pairs = retarget.mapping(obj)
        clip, rig = layout.clip, layout.rig
        frames = len(clip_posed)
        world = clip_world[:, None] @ clip_posed
        rest = np.stack([clip.rotation(name) for name in layout.read])
        turns = arithmetic.turns(arithmetic.rotations(world), rest)
        turns = layout.turn @ turns @ layout.turn.T
        at = {name: k for k, name in enumerate(layout.read)}
        index = {name: k for k, name in enumerate(names)}
        rig_turn = arithmetic.rotations(rig.world)
        rest_turns = rig_turn @ arithmetic.rotations(hold.frames)
        wanted: dict[int, np.ndarray] = {}
        spans: dict[tuple, np.ndarray] = {}
        for name, sourced in layout.sources.items():
            if len(sourced) == 1:
                turn = turns[:, at[sourced[0]]]
            else:
                span, count, place = sourced
                if (span, count) not in spans:
                    spans[span, count] = arithmetic.sampled(turns[:, [at[n] for n in span]], count)
                turn = spans[span, count][:, place - 1]
            k = index[name]
            wanted[k] = rig_turn.T @ (turn @ layout.aligned.get(name, np.eye(3)) @ rest_turns[k])
        # A hinged knee or elbow bends about its hinge alone, in the plane the clip's bends in.
        for name, upper, lower, _, _ in LIMBS:
            if name in layout.hinges:
                u, l = index[pairs[upper][1]], index[pairs[lower][1]]
                relative = rest_turns[u].T @ rest_turns[l]
                wanted[u], wanted[l] = arithmetic.hinged(wanted[u], wanted[l], relative, *layout.hinges[name])
        # The hips: the middle of the hip joints where the clip's is in the rig's space.
        k = [at[pairs[f"thigh.{s}"][0]] for s in "LR"]
        clip_middle = (world[:, k[0], :3, 3] + world[:, k[1], :3, 3]) / 2.0
        middle = (clip_middle - layout.clip_ground) @ layout.turn.T * layout.scale + layout.rig_ground
        hips = pairs["hips"][1]
        h = index[hips]
        rig_middle = (rig.head(pairs["thigh.L"][1]) + rig.head(pairs["thigh.R"][1])) / 2.0
        offset = rest_turns[h].T @ (rig_middle - rig.head(hips))
        heads = middle - (rig_turn @ wanted[h]) @ offset
        inverse = np.linalg.inv(rig.world)

        def pose(shift: np.ndarray) -> tuple:
            """The rig posed with its hips moved by `shift` (F, 3, world), and the ends' goals there."""
            armature = (np.concatenate((heads + shift, np.ones((frames, 1))), axis=1) @ inverse.T)[:, :3]
            posed, local, locations = hold.pose(wanted, heads={h: armature})
            return posed, local, locations, *cls._goals(obj, layout, pairs, index, posed, world, at)

        up = np.zeros((frames, 3))
        # The clip grounded: its lowest standing ankle at the rig's own ankle height above the floor.
        _, _, _, goals, _ = pose(up)
        lift = layout.floor - min(goals[f"foot.{s}"][:, 2].min() - layout.ankle_height[s] for s in "LR")
        up[:, 2] = lift
        posed, local, locations, goals, toes = pose(up)
        contacts, feet = {}, {}
        for s in "LR":
            feet[s], ankle_runs, toe_runs = arithmetic.held(
                goals[f"foot.{s}"], toes[s], layout.leg[s], layout.floor, layout.ankle_height[s], hold=hold_feet)
            contacts[f"foot.{s}"] = (ankle_runs, toe_runs)
        # The hips lowered where a leg cannot reach its ankle's goal (a rig of other proportions, a held foot);
        # a held foot that the leg misses by a hair (the clip's own foot slid there) is taken in to the leg instead.
        def hip_joints() -> dict:
            return {s: np.einsum("ij,fj->fi", rig.world, posed[:, index[pairs[f"thigh.{s}"][1]], :, 3])[:, :3]
                    for s in "LR"}

        joints = hip_joints()
        drop = np.zeros(frames)
        for s in "LR":
            drop = np.maximum(drop, arithmetic.lowered(feet[s] - joints[s], (1.0 + SLACK) * layout.reach[f"foot.{s}"]))
        if drop.any():
            up[:, 2] -= drop
            posed, local, locations, goals, toes = pose(up)
            joints = hip_joints()
        # A clip's limb held straight is the rig's held as straight as it goes (a hinge may stop short of it); a
        # clip's hand or foot further than that (a bone stretched in the clip) is counted.
        beyond = {}
        for name, upper, _, _, _ in LIMBS:
            top = np.einsum("ij,fj->fi", rig.world, posed[:, index[pairs[upper][1]], :, 3])[:, :3]
            goal = feet[name[-1]] if name.startswith("foot") else goals[name]
            goals[name] = arithmetic.within(top, goal, layout.reach[name])
            far = np.linalg.norm(goal - goals[name], axis=1) > 0.01 * layout.reach[name]
            if name.startswith("hand"):  # (a held foot the hips came down for is not beyond its leg)
                beyond[name] = int(far.sum())
        return cls(names, wanted, local, hold, hips, locations[h], goals, contacts, posed, float(lift), beyond)

    @staticmethod
    def _goals(obj, layout: Layout, pairs, index, posed, clip_world, at) -> tuple[dict, dict]:
        """Each limb's goal in world space: the rig's joint at the limb's top (as the copy poses it) plus the
        clip's reach from its own, turned into the rig's space and scaled by the limbs' lengths; and each foot's
        toe (its tail) where the copy puts it beside its ankle."""
        world = layout.rig.world
        source = obj.fabrik.retarget_source.data.bones
        goals, toes = {}, {}

        def tail(name: str) -> np.ndarray:
            """A driven rig bone's tail over the frames, in world space."""
            point = posed[:, index[name]] @ np.array([0.0, obj.data.bones[name].length, 0.0, 1.0])
            return np.einsum("ij,fj->fi", world, point)[:, :3]

        for name, upper, lower, end, _ in LIMBS:
            s = name[-1]
            scale = layout.arm_scale[s] if name.startswith("hand") else layout.leg_scale[s]
            clip_top = clip_world[:, at[pairs[upper][0]], :3, 3]
            if end in pairs:  # (where the clip's hand or foot begins: its bones' tails may point anywhere)
                clip_end = clip_world[:, at[pairs[end][0]], :3, 3]
            else:
                length = source[pairs[lower][0]].length
                clip_end = (clip_world[:, at[pairs[lower][0]]] @ np.array([0.0, length, 0.0, 1.0]))[:, :3]
            top = np.einsum("ij,fj->fi", world, posed[:, index[pairs[upper][1]], :, 3])[:, :3]
            goals[name] = top + (clip_end - clip_top) @ layout.turn.T * scale
            if name.startswith("foot"):
                ankle = tail(pairs[lower][1])
                foot = pairs.get(f"foot.{s}")
                toes[s] = goals[name] + ((tail(foot[1]) if foot else ankle) - ankle)
        return goals, toes

    def turned_ends(self, solved: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every driven bone's local rotation once some bones' local rotations are `solved` (F, 3, 3): the others
        keep their turns in the world (a hand on a solved forearm turns as the clip's)."""
        index = {name: k for k, name in enumerate(self.names)}
        _, local, _ = self.hold.pose(self.turned, local={index[n]: m for n, m in solved.items()})
        return {self.names[k]: m for k, m in local.items()}
