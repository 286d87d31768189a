# SPDX-License-Identifier: GPL-3.0-or-later
"""A bake's solved frames turned into keys: channel values, the keys a clean-up keeps, and the bulk write."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import bpy
import numpy as np
from mathutils import Matrix

from ...core.math import matrix_rows
from ..rig import animdata, armature
from . import keys

if TYPE_CHECKING:  # (for the type hints alone: the Baker makes its KeyWriter)
    from .baking import Baker

#: Bone-frames of rotation channels converted in one step: few enough that Esc is heard between steps.
CONVERT_CHUNK = 5_000


@dataclass
class BakeResult:
    """What a bake did."""

    frames: int = 0
    bones: int = 0
    keys: int = 0
    removed_by_cleanup: int = 0
    action: str = ""
    seconds: float = 0.0
    #: The part of `seconds` the rig's plan spent solving (the rest: going to each frame, reading it, writing keys).
    solver_seconds: float = 0.0
    #: Frames on which some effector could not be solved or missed its target, and bones left unkeyed on some
    #: frames, with the reason.
    problems: list[str] = field(default_factory=list)
    #: Per bone: the frames it got no key on because its pose there is not finite (a parent scaled to zero...).
    skipped: dict[str, list[int]] = field(default_factory=dict)


#: A phase's answer: the frames' worth of work it did at once, and the units of work it leaves for later steps,
#: each returning the frames' worth it did.
Phase = tuple[int, list[Callable[[], int]]]


class KeyWriter:
    """The keys of one bake, from its solved frames: converted to channel values, chosen by the clean-up and
    written in bulk, each phase in steps so progress and Esc work through it."""

    def __init__(self, baker: Baker) -> None:
        self.baker = baker
        #: The rotation channels' values per baked bone (F, size), and the mode each was converted in.
        self.values: list[np.ndarray] = []
        self.modes: list[str] = []
        #: Per channel column (bone, data path, size, values, good frames); per column and index the keys the
        #: clean-up keeps.
        self.channels: list = []
        self.keeps: dict[tuple[int, int], np.ndarray] = {}

    def conversion(self) -> Phase:
        """Convert the quaternion bones' channels at once where every frame is solved; leave the others' frame by
        frame conversion to later steps."""
        b = self.baker
        pose_bones = [b.obj.pose.bones[name] for name in b.bones]
        count = len(b.frames)
        values: list[np.ndarray | None] = [None] * len(b.bones)
        quaternion = [j for j, pb in enumerate(pose_bones) if pb.rotation_mode == 'QUATERNION']
        if quaternion and b.solved.all() and np.isfinite(b.locals[:, quaternion]).all():
            # All frames solved: convert at once and keep the signs continuous (q and -q are the same turn).
            q = matrix_rows.continuous_quaternions(b.locals[:, quaternion])
            for column, j in enumerate(quaternion):
                values[j] = q[:, column]
        left = [j for j in range(len(b.bones)) if values[j] is None]
        previous = {}
        for j in left:
            mode = pose_bones[j].rotation_mode
            values[j] = np.empty((count, armature.rotation_channel(mode)[1]))
            previous[j] = (mode, armature.rotation_value(pose_bones[j]))
        self.values = values
        self.modes = [pb.rotation_mode for pb in pose_bones]
        if not left:
            return count, []
        size = max(1, CONVERT_CHUNK // len(left))
        return 0, [
            lambda rows=range(first, min(count, first + size)): self._convert(rows, left, previous)
            for first in range(0, count, size)
        ]

    def _convert(self, rows: range, bones: list[int], previous: dict) -> int:
        """Convert some frames of the given bones' channels, each continuous with the bone's value on the frame
        before (`previous`, updated); return how many frames."""
        b = self.baker
        for j in bones:
            mode, value_before = previous[j]
            channel = self.values[j]
            size = channel.shape[1]
            name = b.bones[j]
            for i in rows:
                value = b.as_was[i][name] if not b.solved[i] else armature.channel_value(
                    mode, b.locals[i, j], value_before
                )
                if len(value) != size:  # the mode changed since the frame was read: that value is no use
                    value = (np.nan,) * size
                if all(np.isfinite(value)):
                    value_before = value  # continuity skips the frames that will not be keyed
                channel[i] = value
            previous[j] = mode, value_before
        return len(rows)

    def cleanup(self) -> Phase:
        """The channel columns to key, each with the frames it has a finite value for; with a clean-up, the choice
        of each column's keys left to later steps (the choice runs along the keys one by one)."""
        b = self.baker
        # (the mode each channel was converted in: the mode may have changed during a modal bake's steps)
        columns = [(name, *armature.rotation_channel(mode), channel)
                   for name, mode, channel in zip(b.bones, self.modes, self.values)]
        for j in sorted(b.scaled):
            # Blender's IK stretch scales a bone uniformly: all three channels.
            scale = np.array([
                (b.scales[i, j],) * 3 if b.solved[i] else b.scale_as_was[i][j] for i in range(len(b.frames))
            ], dtype=np.float64)
            columns.append((b.bones[j], "scale", 3, scale))
        if b.keys_root:
            turn, size = armature.rotation_channel(b.obj.pose.bones[b.root].rotation_mode)
            turns = [value if len(value) == size else (np.nan,) * size for _, value in b.root_values]
            columns.append((b.root, "location", 3, np.array([loc for loc, _ in b.root_values], dtype=np.float64)))
            columns.append((b.root, turn, size, np.array(turns, dtype=np.float64)))
        bad = {}
        for name, _, _, channel in columns:
            finite = np.isfinite(channel).all(axis=1)
            bad[name] = bad.get(name, np.zeros(len(b.frames), dtype=bool)) | ~finite
        self.channels = [(name, data_path, size, channel, ~bad[name]) for name, data_path, size, channel in columns]
        if b.cleanup is None:
            return 0, []
        count = sum(size for _, _, size, _, _ in self.channels)
        share = [len(b.frames) * (k + 1) // count - len(b.frames) * k // count for k in range(count)]
        units = [(c, index) for c, (_, _, size, _, _) in enumerate(self.channels) for index in range(size)]
        return 0, [
            lambda c=c, index=index, frames=frames: self._clean(c, index, frames)
            for (c, index), frames in zip(units, share)
        ]

    def _clean(self, c: int, index: int, frames: int) -> int:
        """Choose the keys of one column's channel that the clean-up keeps; return its share of the frames."""
        _, _, _, channel, good = self.channels[c]
        if good.any():
            self.keeps[c, index] = keys.needed_keys(np.asarray(self.baker.frames, dtype=np.float64)[good],
                                                    channel[good, index], self.baker.cleanup)
        return frames

    def write(self, new_action: bool) -> BakeResult:
        """Write every finite key in bulk (an action is made only when there is a key to write)."""
        b = self.baker
        result = BakeResult(frames=len(b.frames), bones=len(b.bones) + b.keys_root)
        frames = np.asarray(b.frames, dtype=np.float64)
        for name, _, _, _, good in self.channels:
            if not good.all() and name not in result.skipped:
                result.skipped[name] = [b.frames[i] for i in np.flatnonzero(~good).tolist()]
        collection = None
        if any(good.any() for *_, good in self.channels):
            action = animdata.ensure_action(b.obj, new_action, f"{b.obj.name}_FABRIK")
            result.action = action.name
            collection = animdata.fcurves(b.obj, create=True)
        for c, (name, data_path, size, channel, good) in enumerate(self.channels):
            if not good.any():
                continue
            path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].{data_path}'
            for index in range(size):
                fcurve = animdata.ensure_fcurve(collection, path, index, name)
                column = channel[good, index]
                keep = self.keeps[c, index] if b.cleanup is not None else np.ones(len(column), bool)
                result.removed_by_cleanup += int((~keep).sum())
                keys.write_keys(fcurve, frames[good][keep], column[keep], (frames[0], frames[-1]), frames[~good])
                result.keys += int(keep.sum())
        # Bones left unkeyed first: there are few such lines, and they say what the per-frame lines cannot.
        result.problems = [
            f"'{name}': no finite pose at frames {_frame_ranges(frames)} ({self._why_not_finite(name, frames[0])}); "
            "those frames keep the keys they had"
            for name, frames in result.skipped.items()
        ] + b.problems
        return result

    def _why_not_finite(self, name: str, frame: int) -> str:
        """Why a bone has no finite pose on a frame: the rig, the bone or one of its parents scaled to zero, or a
        bone's rotation that is not a number (the bone's own first, else the first such bone of the rig: a chain's
        solve takes every bone of it)."""
        obj = self.baker.obj
        self.baker.scene.frame_set(frame)
        if not _invertible(obj.matrix_world):
            return "the rig is scaled to zero"
        pose_bone = obj.pose.bones[name]
        for bone in reversed([pose_bone, *pose_bone.parent_recursive]):  # the topmost cause first
            if not _invertible(bone.matrix):
                return "it is scaled to zero" if bone == pose_bone else f"its parent '{bone.name}' is scaled to zero"
        for bone in [pose_bone, *obj.pose.bones]:
            if not all(math.isfinite(c) for c in armature.rotation_value(bone)):
                where = "its rotation" if bone == pose_bone else f"bone '{bone.name}' has a rotation that"
                return f"{where} is not a number there"
        return "its rotation there is not finite"


def _frame_ranges(frames: list[int]) -> str:
    """Frames as runs: '3-10, 14'."""
    runs: list[list[int]] = []
    for frame in frames:
        if runs and frame == runs[-1][-1] + 1:
            runs[-1].append(frame)
        else:
            runs.append([frame])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}" for run in runs)


def _invertible(matrix: Matrix) -> bool:
    """Whether a Blender matrix is finite with a 3x3 part that is not flat (no axis scaled to zero)."""
    m = np.array(matrix, dtype=np.float64)[:3, :3]
    return bool(np.isfinite(m).all() and abs(np.linalg.det(m)) > 1e-12)
