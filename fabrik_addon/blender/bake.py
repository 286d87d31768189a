# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake FABRIK solutions into pose keyframes: solve frame by frame, then write every key in bulk.

Nothing is written until every frame is solved, so cancelling leaves the file
as it was. Keys go only onto the baked bones' rotation channels, replacing
keys inside the baked range and leaving every other key alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import bpy
import numpy as np

from ..core import SOLVERS, SolveReport, batch, rotation
from . import animdata, rig, solving
from .frames import FrameBatch



@dataclass
class BakeResult:
    """What a bake did."""

    frames: int = 0
    bones: int = 0
    keys: int = 0
    removed_by_cleanup: int = 0
    action: str = ""
    seconds: float = 0.0
    #: Frames on which some effector could not be solved, with the reason.
    problems: list[str] = field(default_factory=list)


def bake_bones(obj, which: str) -> list[str]:
    """Bones to bake: the effectors' chains ('CHAINS') or the selected pose bones ('SELECTED')."""
    if which == 'SELECTED':
        return [pb.name for pb in obj.pose.bones if animdata.is_selected(pb)]
    skeleton = rig.skeleton_of(obj)
    names: list[str] = []
    for effector in obj.fabrik.effectors:
        if not effector.enabled or effector.bone not in skeleton.names:
            continue
        path = skeleton.path_to_root(skeleton.index(effector.bone))
        chain = path if effector.chain_length == 0 else path[: effector.chain_length]
        names += [skeleton.names[b] for b in chain if skeleton.names[b] not in names]
    return [name for name in skeleton.names if name in names]


class Baker:
    """One bake, a frame at a time (so a modal operator can show progress and cancel).

    Continuous bakes solve each frame as they go, starting from the previous
    frame's solution. Per-frame bakes only read each frame's goals and start
    pose as they go and solve at the end, all frames together where they can
    (`core.batch`): the frames do not depend on each other.
    """

    def __init__(self, scene, obj, frames: list[int], bones: list[str], warm_start: bool = True) -> None:
        if not frames:
            raise ValueError("the frame range is empty")
        if not bones:
            raise ValueError("no bones to bake: add effectors, or select bones and bake the selected ones")
        self.scene, self.obj = scene, obj
        self.frames, self.bones = frames, bones
        self.warm_start = warm_start
        self.index = 0
        #: Per frame: local rotations of every bone (n, 3, 3), or None where nothing could be solved.
        self.locals: list[np.ndarray | None] = []
        #: Per frame: the baked bones' channel values as they were, for frames without a solution.
        self.as_was: list[dict[str, tuple[float, ...]] | None] = []
        self.pending: dict[int, solving.Problem] = {}
        #: Frames read into a FrameBatch (per-frame bakes of free connected trees), solved together at the end.
        self._batch = None
        self._batched: list[int] = []
        self.problems: list[str] = []
        self._previous = None
        self._frame_before = scene.frame_current
        self._live_before = obj.fabrik.live
        self._began = time.perf_counter()
        # The rig's structure cannot change during the bake: read its skeleton once.
        self._frozen = rig.frozen_structure(obj)
        self._frozen.__enter__()
        # The handler must not pose the rig while we read this frame's FK pose.
        obj.fabrik.live = False

    @property
    def done(self) -> bool:
        """True when every frame has been read (and, for continuous bakes, solved)."""
        return self.index >= len(self.frames)

    def step(self) -> None:
        """Go to the next frame and solve it (continuous) or read what its solve needs (per frame)."""
        frame = self.frames[self.index]
        self.scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        if self.warm_start:
            status, solution = solving.compute(self.obj, depsgraph, self._previous)
            self._record(frame, status, solution)
            if solution is not None:
                self._previous = {b: solution.local[b] for b in solution.bones}
        else:
            if self.index == 0:
                self._batch = FrameBatch.start(self.obj, depsgraph, self.bones)
            if self._batch is not None and self._batch.read(depsgraph):
                self._batched.append(self.index)
                self.locals.append(None)
                self.as_was.append(None)
                self.index += 1
                return
            status, problem = solving.prepare(self.obj, depsgraph)
            if problem is None:
                self._record(frame, status, None)
            else:
                self.pending[self.index] = problem
                self.locals.append(None)
                self.as_was.append(None)  # read again only if this frame fails to solve
        self.index += 1

    def _record(self, frame: int, status, solution, index: int | None = None) -> None:
        """Keep one frame's result (at `index`, or appended), noting what went wrong."""
        if solution is None:
            self.problems.append(f"frame {frame}: {status.message}")
        else:
            bad = [f"{k}: {m}" for k, m in status.effectors.items() if not m.startswith("error")]
            if bad:
                self.problems.append(f"frame {frame}: " + "; ".join(bad))
        local = None if solution is None else solution.local
        as_was = None if solution is not None else {name: rig.rotation_value(self.obj.pose.bones[name]) for name in self.bones}
        if index is None:
            self.locals.append(local)
            self.as_was.append(as_was)
        else:
            self.locals[index], self.as_was[index] = local, as_was

    def solve_pending(self) -> None:
        """Solve the frames read by a per-frame bake: together where the goals allow, one by one otherwise."""
        if self._batched:
            local, _, _ = self._batch.solve()
            for j, i in enumerate(self._batched):
                self.locals[i] = local[j]
                bad = [f"{k}: {m}" for k, m in self._batch.problems[j].items()]
                if bad:
                    self.problems.append(f"frame {self.frames[i]}: " + "; ".join(bad))
            self._batched.clear()
        groups: dict[tuple, list[int]] = {}
        for index, problem in self.pending.items():
            layout = tuple((g.bone, g.chain_length, g.weight, g.rotation is None, g.pole is None) for g in problem.goals)
            groups.setdefault((problem.solver, layout, problem.settings), []).append(index)
        for (solver, _, settings), indices in groups.items():
            first = self.pending[indices[0]]
            if solver == "FABRIK" and batch.supports(first.skeleton, first.goals):
                targets = np.array([[g.target for g in self.pending[i].goals] for i in indices])
                poses, iterations, errors = batch.solve_frames(
                    first.skeleton, first.goals, targets, [self.pending[i].start for i in indices], settings
                )
                for i, pose, count, error in zip(indices, poses, iterations, errors):
                    converged = bool(error.max() <= settings.tolerance)
                    report = SolveReport(int(count), list(map(float, error)), converged, "converged" if converged else "stalled")
                    self._record(self.frames[i], *solving.conclude(self.pending[i], pose, report), index=i)
                continue
            for i in indices:
                problem = self.pending[i]
                try:
                    pose, report = SOLVERS[solver](problem.skeleton, problem.goals, problem.start, problem.settings)
                except ValueError as exc:
                    problem.result.ok, problem.result.message = False, str(exc)
                    self.scene.frame_set(self.frames[i])  # the frame keeps the values it has
                    self._record(self.frames[i], problem.result, None, index=i)
                    continue
                self._record(self.frames[i], *solving.conclude(problem, pose, report), index=i)
        self.pending.clear()

    def cancel(self) -> None:
        """Leave everything as it was before the bake."""
        self._frozen.__exit__(None, None, None)
        self.obj.fabrik.live = self._live_before
        self.scene.frame_set(self._frame_before)

    def finish(self, new_action: bool, cleanup: float | None, keep_live: bool) -> BakeResult:
        """Solve what is left, write all keys in bulk; switch live solving off unless asked to keep it."""
        try:
            self.solve_pending()
        finally:
            self._frozen.__exit__(None, None, None)
        skeleton = rig.skeleton_of(self.obj)
        values = {name: _channel_values(self.obj.pose.bones[name], skeleton.index(name), self.locals, self.as_was)
                  for name in self.bones}
        action = animdata.ensure_action(self.obj, new_action, f"{self.obj.name}_FABRIK")
        collection = animdata.fcurves(self.obj, create=True)
        result = BakeResult(frames=len(self.frames), bones=len(self.bones), action=action.name, problems=self.problems)
        frames = np.asarray(self.frames, dtype=np.float64)
        for name in self.bones:
            pose_bone = self.obj.pose.bones[name]
            data_path, size = rig.rotation_channel(pose_bone.rotation_mode)
            channel = np.asarray(values[name], dtype=np.float64).reshape(len(frames), size)
            path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].{data_path}'
            for index in range(size):
                fcurve = animdata.ensure_fcurve(collection, path, index, name)
                column = channel[:, index]
                keep = _needed_keys(frames, column, cleanup) if cleanup is not None else np.ones(len(frames), bool)
                result.removed_by_cleanup += int((~keep).sum())
                write_keys(fcurve, frames[keep], column[keep], (frames[0], frames[-1]))
                result.keys += int(keep.sum())
        self.obj.fabrik.live = self._live_before and keep_live
        self.scene.frame_set(self._frame_before)
        result.seconds = time.perf_counter() - self._began
        return result


def _channel_values(pose_bone, bone: int, locals_: list, as_was: list) -> np.ndarray:
    """One bone's rotation channel for every frame: from the solved local rotations, or as it was."""
    name = pose_bone.name
    if pose_bone.rotation_mode == "QUATERNION" and all(local is not None for local in locals_):
        # All frames solved: convert at once and keep the signs continuous (q and -q are the same turn).
        q = rotation.quaternions_from_matrices(np.asarray([local[bone] for local in locals_]))
        same_side = np.sign(np.einsum("ij,ij->i", q[1:], q[:-1]))
        same_side[same_side == 0] = 1.0
        return q * np.concatenate(([1.0], np.cumprod(same_side)))[:, None]
    values: list[tuple[float, ...]] = []
    for local, was in zip(locals_, as_was):
        if local is None:
            values.append(was[name])
        else:
            previous = values[-1] if values else rig.rotation_value(pose_bone)
            values.append(rig.channel_value(pose_bone.rotation_mode, local[bone], previous))
    return np.asarray(values)


def write_keys(fcurve, frames: np.ndarray, values: np.ndarray, span: tuple[float, float]) -> None:
    """Replace the F-curve's keys within span by (frames, values), in bulk; keys outside keep every byte."""
    points = fcurve.keyframe_points
    count = len(points)
    co = np.empty(2 * count, dtype=np.float32)
    points.foreach_get("co", co)
    inside = (co[0::2] >= span[0] - 1e-4) & (co[0::2] <= span[1] + 1e-4)
    # Blender recomputes automatic handles of neighbours when keys change; put the kept keys' handles back after.
    kept = {}
    for i in np.flatnonzero(~inside):
        point = points[int(i)]
        kept[round(float(co[2 * i]), 4)] = (tuple(point.handle_left), tuple(point.handle_right))
    for i in reversed(np.flatnonzero(inside)):
        points.remove(points[int(i)], fast=True)
    before = len(points)
    points.add(len(frames))
    new = np.empty(2 * len(frames), dtype=np.float32)
    new[0::2], new[1::2] = frames, values
    all_co = np.empty(2 * len(points), dtype=np.float32)
    points.foreach_get("co", all_co)
    all_co[2 * before:] = new
    points.foreach_set("co", all_co)
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    interpolation = np.empty(len(points), dtype=np.int32)
    points.foreach_get("interpolation", interpolation)
    interpolation[before:] = linear
    points.foreach_set("interpolation", interpolation)
    fcurve.update()
    if kept:
        for point in points:
            handles = kept.get(round(point.co[0], 4))
            if handles is not None:
                point.handle_left, point.handle_right = handles


def _needed_keys(frames: np.ndarray, values: np.ndarray, tolerance: float) -> np.ndarray:
    """Which keys linear interpolation between the kept ones cannot reproduce within tolerance (first and last stay)."""
    keep = np.zeros(len(frames), dtype=bool)
    keep[0] = keep[-1] = True
    anchor = 0
    for i in range(1, len(frames) - 1):
        # Could a straight line from the anchor to the next key stand in for every key since the anchor?
        t = (frames[anchor + 1:i + 1] - frames[anchor]) / (frames[i + 1] - frames[anchor])
        line = values[anchor] + t * (values[i + 1] - values[anchor])
        if np.abs(line - values[anchor + 1:i + 1]).max() > tolerance:
            keep[i] = True
            anchor = i
    return keep


def bake_object(
    obj,
    frames: list[int] | range | None = None,
    bones: str | list[str] = 'CHAINS',
    new_action: bool = False,
    cleanup: float | None = None,
    keep_live: bool = False,
    warm_start: bool = True,
) -> BakeResult:
    """Bake an armature's FABRIK solution without any UI (scripts, the command line, render farms)."""
    scene = bpy.context.scene
    frames = list(frames) if frames is not None else list(range(scene.frame_start, scene.frame_end + 1, scene.frame_step))
    names = bake_bones(obj, bones) if isinstance(bones, str) else list(bones)
    baker = Baker(scene, obj, frames, names, warm_start)
    try:
        while not baker.done:
            baker.step()
    except BaseException:
        baker.cancel()
        raise
    return baker.finish(new_action, cleanup, keep_live)
