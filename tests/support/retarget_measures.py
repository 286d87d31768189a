# SPDX-License-Identifier: GPL-3.0-or-later
"""What a retarget keeps of the clip, measured frame by frame as Blender evaluates both armatures.

Per limb (an arm or a leg: its top joint, its elbow or knee, its end) the bend (degrees from straight) and the
bend plane's normal; per bone the world turn from its rest; the ankles' and toes' places while the clip's feet
stand. Shared by the retarget tests and `benchmarks/retarget.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

#: A limb's three joints by role: its top bone, the bone at its bend, and the bone whose head is its end.
LIMBS = {f"{limb}.{s}": (f"{upper}.{s}", f"{lower}.{s}", f"{end}.{s}")
         for s in "LR" for limb, upper, lower, end in (("arm", "upper_arm", "forearm", "hand"),
                                                        ("leg", "thigh", "shin", "foot"))}
#: The ends whose orientation the retarget keeps.
ENDS = ("hand.L", "hand.R", "foot.L", "foot.R", "head")


def _rotation(m: np.ndarray) -> np.ndarray:
    return m[..., :3, :3] / np.linalg.norm(m[..., :3, :3], axis=-2, keepdims=True)


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The angle in degrees between rotations (..., 3, 3)."""
    trace = np.einsum("...ij,...ij->...", a, b)
    return np.degrees(np.arccos(np.clip((trace - 1.0) / 2.0, -1.0, 1.0)))


def _between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The angle in degrees between vectors (..., 3)."""
    cos = np.einsum("...i,...i->...", a, b) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


@dataclass
class Track:
    """One armature over the frames: each bone's world matrix (F, 4, 4) and tail (F, 3), and its rests."""

    matrices: dict
    tails: dict
    rests: dict

    @classmethod
    def read(cls, obj, names: list[str], frames: list[int]) -> Track:
        scene = bpy.context.scene
        matrices = {n: np.empty((len(frames), 4, 4)) for n in names}
        tails = {n: np.empty((len(frames), 3)) for n in names}
        for i, frame in enumerate(frames):
            scene.frame_set(frame)
            evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
            world = evaluated.matrix_world
            for n in names:
                bone = evaluated.pose.bones[n]
                matrices[n][i] = np.array(world @ bone.matrix)
                tails[n][i] = np.array(world @ bone.tail)
        rests = {n: np.array(obj.matrix_world @ obj.data.bones[n].matrix_local) for n in names}
        return cls(matrices, tails, rests)

    def head(self, name: str) -> np.ndarray:
        return self.matrices[name][:, :3, 3]

    def turn(self, name: str) -> np.ndarray:
        """The bone's world turn from its rest, per frame."""
        return _rotation(self.matrices[name]) @ _rotation(self.rests[name]).T

    def limb(self, top: str, middle: str, end: str) -> tuple[np.ndarray, np.ndarray]:
        """Per frame the limb's bend in degrees (0: straight) and its bend plane's normal (unit)."""
        a, b, c = self.head(top), self.head(middle), self.head(end)
        bend = _between(b - a, c - b)
        normal = np.cross(b - a, c - b)
        return bend, normal / np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)


@dataclass
class Measures:
    """What a retarget kept of the clip (see `measure`)."""

    #: Per limb: the worst bend-plane difference where both bend more than 20 degrees, and how many such frames
    #: were flipped (over 90 degrees).
    plane: dict
    flipped: dict
    #: Per limb: the largest change of its bend in one frame, the rig's and the clip's.
    jump: dict
    clip_jump: dict
    #: Per limb: frames where the rig's limb is straight (under 5 degrees) while the clip's bends over 20.
    straightened: dict
    #: Per end: the worst difference of its turn from where it was on the first frame, rig against clip (degrees;
    #: measured from the first frame, so a rig whose rest stands otherwise, an A pose, is measured as well); and of
    #: its turn from its rest, where both rests stand alike.
    turned: dict
    turned_from_rest: dict
    #: The rig's lowest ankle and toe (foot tail) above the floor.
    lowest: float


def measure(clip, rig, pairs: dict, frames: list[int], floor: float = 0.0, turn=None) -> tuple[Measures, Track, Track]:
    """Measure the retarget of `clip` onto `rig` over the frames (`pairs`: role -> (clip bone, rig bone)); `turn`
    takes the clip's world directions to the rig's (the clip faces another way; None: the same way)."""
    turn = np.eye(3) if turn is None else turn
    roles = sorted({role for limb in LIMBS.values() for role in limb} | set(ENDS) | {"hips", "toe.L", "toe.R"})
    roles = [r for r in roles if r in pairs]
    clip_track = Track.read(clip, [pairs[r][0] for r in roles], frames)
    rig_track = Track.read(rig, [pairs[r][1] for r in roles], frames)
    plane, flipped, jump, clip_jump, straightened, turned, from_rest = {}, {}, {}, {}, {}, {}, {}
    for limb, joints in LIMBS.items():
        clip_bend, clip_normal = clip_track.limb(*(pairs[r][0] for r in joints))
        rig_bend, rig_normal = rig_track.limb(*(pairs[r][1] for r in joints))
        both = (clip_bend > 20.0) & (rig_bend > 20.0)
        difference = _between(clip_normal @ turn.T, rig_normal)
        plane[limb] = float(difference[both].max()) if both.any() else 0.0
        flipped[limb] = int((difference[both] > 90.0).sum())
        jump[limb] = float(np.abs(np.diff(rig_bend)).max())
        clip_jump[limb] = float(np.abs(np.diff(clip_bend)).max())
        straightened[limb] = int(((rig_bend < 5.0) & (clip_bend > 20.0)).sum())
    for end in ENDS:
        if end in pairs:
            clip_turn = clip_track.turn(pairs[end][0])
            rig_turn = rig_track.turn(pairs[end][1])
            from_rest[end] = float(_angle(turn @ clip_turn @ turn.T, rig_turn).max())
            clip_turn = turn @ clip_turn @ np.swapaxes(clip_turn[:1], 1, 2) @ turn.T
            rig_turn = rig_turn @ np.swapaxes(rig_turn[:1], 1, 2)
            turned[end] = float(_angle(clip_turn, rig_turn).max())
    lowest = min(float(rig_track.tails[pairs[f"{p}.{s}"][1]][:, 2].min())
                 for p in ("shin", "foot", "toe") for s in "LR" if f"{p}.{s}" in pairs)
    measures = Measures(plane, flipped, jump, clip_jump, straightened, turned, from_rest, lowest - floor)
    return measures, clip_track, rig_track


def slides(track: Track, bone: str, runs: list, point: str = "tail") -> float:
    """The farthest a bone's tail (or head) moves within any of the runs of frames (first, last indices)."""
    where = track.tails[bone] if point == "tail" else track.head(bone)
    worst = 0.0
    for first, last in runs:
        stretch = where[first:last + 1]
        worst = max(worst, float(np.linalg.norm(stretch - stretch[0], axis=1).max()))
    return worst
