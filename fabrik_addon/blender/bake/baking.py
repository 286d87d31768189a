# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake FABRIK solutions into pose keyframes: solve frame by frame, then write every key in bulk.

Nothing is written until every frame is solved, so cancelling leaves the file
as it was. Keys go only onto the baked bones' rotation channels (and, for
bones an effector's IK stretch may scale, their scale channels), replacing
keys inside the baked range and leaving every other key alone.
"""

from __future__ import annotations

import math
import time

import bpy
import numpy as np

from ...core.math import quat
from ...core.solving.plan import Carry, plan_for
from .. import long_work, solve
from ..effectors import effector_goals, integrity
from ..rig import animdata, armature, moving_root
from ..rig.editable import action_editable, editable
from ..rig.floor import floor_problem
from ..rig.props import effector_label, tolerance_problem
from ..rig.status import switched_off
from . import keys
from .reading import FrameRows
from .writing import BakeResult, KeyWriter


def bake_bones(obj: bpy.types.Object, which: str) -> list[str]:
    """Bones to bake: the effectors' chains and a Root that moves ('CHAINS') or the selected pose bones
    ('SELECTED'). The effectors first follow bones renamed since (as live solving makes them do before every
    solve)."""
    if editable(obj) is None:
        integrity.tidy(obj)
    if which == 'SELECTED':
        return [pb.name for pb in obj.pose.bones if animdata.is_selected(pb)]
    skeleton = armature.skeleton_of(obj)
    names: list[str] = []
    for effector in obj.fabrik.effectors:
        if not effector.enabled or effector.bone not in skeleton.names:
            continue
        path = skeleton.path_to_root(skeleton.index(effector.bone))
        chain = path if effector.chain_length == 0 else path[: effector.chain_length]
        names += [skeleton.names[b] for b in chain if skeleton.names[b] not in names]
    if obj.fabrik.root_mode != 'OFF':  # (the Root's channels, where a frame moves it)
        names.append(obj.fabrik.root_bone or moving_root.top_bone(obj) or "")
    return [name for name in skeleton.names if name in names]


#: Frames x moving bones solved together in one step of a per-frame bake: large enough for numpy to pay,
#: small enough that a step takes well under a second and Esc is heard between steps.
CHUNK = 100_000

class Baker(long_work.SceneWork):
    """One bake, in steps, so a modal operator can show progress and cancel between them; nothing is written to the
    file before `finish`.

    A continuous bake solves each frame as it reads it, from the one before; a per-frame bake solves its frames
    together after reading them where the plan allows (`many_frames`)."""

    noun = "the bake"

    def __init__(
        self, scene: bpy.types.Scene, obj: bpy.types.Object, frames: list[int], bones: list[str],
        warm_start: bool = True, cleanup: float | None = None
    ) -> None:
        refused = refusal(obj)
        if refused:
            raise ValueError(refused)
        if not frames:
            raise ValueError("the frame range is empty")
        if not bones:
            raise ValueError("no bones to bake: add effectors, or select bones and bake the selected ones")
        if cleanup is not None:
            keys.check_cleanup(cleanup)
        self.scene, self.obj = scene, obj
        self.frames, self.bones = frames, bones
        self.warm_start = warm_start
        #: The key clean-up's tolerance, worked out in the steps after the conversion (None: keep every key).
        self.cleanup = cleanup
        #: Frames read so far (continuous bakes: read and solved).
        self.index = 0
        # The rig's structure cannot change during the bake: its skeleton is read once, here, and each step
        # runs frozen. Only a step: between steps (a modal bake waits for its timer there) nothing is frozen,
        # so a bake that never ends (a file load drops it) leaves nothing behind.
        self._frozen = armature.frozen_structure(obj)
        with self._frozen:
            skeleton = armature.skeleton_of(obj)
            missing = [name for name in bones if name not in skeleton.names]
            if missing:
                raise ValueError(f"no bone {', '.join(map(repr, missing))} in '{obj.name}'")
            #: The root that moves, where the rig's Root is on and it is among the bones to bake (`bake_bones`
            #: adds it to the chains'): its location and rotation are keyed where some frame moved it.
            goals = effector_goals.gather_goals(obj, bpy.context.evaluated_depsgraph_get(), skeleton)[0]
            root = moving_root.usable(obj, plan_for(skeleton, goals, obj.fabrik.solver), goals)[0] if goals else None
            self.root = root if root in bones else None
            if self.root is not None:
                self.bones = bones = [name for name in bones if name != self.root]
                if not bones:
                    raise ValueError("no bones to bake but the Root: add effectors, or select other bones")
            self._columns = [skeleton.index(name) for name in bones]
        #: Per frame, the root's location and rotation channel values (None: not read yet), and whether a frame
        #: moved it.
        self.root_values: list[tuple | None] = [None] * len(frames)
        self.root_moved = False
        #: Per frame, the baked bones' solved local rotations (F, bones, 3, 3), where `solved` says so.
        self.locals = np.zeros((len(frames), len(bones), 3, 3))
        self.solved = np.zeros(len(frames), dtype=bool)
        #: Per unsolved frame: the baked bones' channel values as they were (the keys keep them).
        self.as_was: dict[int, dict[str, tuple[float, ...]]] = {}
        #: IK stretch: per frame, each baked bone's uniform scale (F, bones), for the bones in `scaled`: those
        #: an effector's stretch may scale on some frame; per unsolved frame, their scale as it was.
        self.scales = np.ones((len(frames), len(bones)))
        self.scaled: set[int] = set()
        self.scale_as_was: dict[int, dict[int, tuple[float, ...]]] = {}
        self._problems: list[tuple[int, str]] = []
        #: A continuous bake's last solution by a whole read (`solve.compute`): each moving bone's local rotation;
        #: or, where `_batch_went_on`, the FrameRows solved the frame before and goes on from what it left.
        self._previous = None
        self._batch_went_on = False
        #: The frames' cheap reader, where the rig allows one, and the frames it read to solve together.
        self._batch = None
        self._batched: list[int] = []
        #: What continuity mode carries between a continuous bake's frames (read whole or by the FrameRows).
        self._carry = Carry()
        #: Work left once every frame is read, a unit a step, each returning how many frames' worth it did: the
        #: frames solved together, then the channels converted, then the keys the clean-up keeps chosen; each
        #: phase leaves its units when the one before is done (`_phases`: the KeyWriter's).
        self._queue: list = []
        self._keys = KeyWriter(self)
        self._phases = [self._keys.conversion, self._keys.cleanup]
        #: Frames' worth of queued work done, and of the frames solved alone as they were read.
        self._units_done = 0
        self._began = time.perf_counter()
        #: Seconds the rig's plan spent solving the frames read whole (`BakeResult.solver_seconds`, with the
        #: FrameRows' own).
        self.solver_seconds = 0.0
        # The handler must not pose the rig while we read this frame's FK pose.
        self.hold(scene, obj, live_off=True)

    @property
    def done(self) -> bool:
        """True when every frame has been read, solved, converted to channel values and (with a clean-up) its
        keys chosen."""
        return self.index >= len(self.frames) and not self._queue and not self._phases

    @property
    def keys_root(self) -> bool:
        """Whether the bake keys the Root's channels: a frame moved it, and every frame has its values."""
        return self.root_moved and self.root in self.obj.pose.bones and all(v is not None for v in self.root_values)

    @property
    def progress(self) -> tuple[int, int]:
        """(work done, all the work): reading a frame, solving it, converting it and (with a clean-up) choosing
        its keys count one unit each."""
        solved_in_turn = self.index if self.warm_start else 0  # (a continuous bake solves each frame as it reads it)
        phases = 3 if self.cleanup is None else 4
        return self.index + solved_in_turn + self._units_done, phases * len(self.frames)

    @property
    def problems(self) -> list[str]:
        """What went wrong, frame by frame."""
        return [message for _, message in sorted(self._problems, key=lambda item: item[0])]

    def step(self) -> None:
        """One unit of work: read (and, continuous, solve) the next frame, or solve the next batch of frames."""
        self.check()
        with self._frozen:
            self._step()

    def _step(self) -> None:
        """`step` with the rig's structure frozen."""
        if self.index < len(self.frames):
            self._read()
            self.index += 1
            if self.index == len(self.frames):
                self._keep_in_turn()
                if not self.warm_start:
                    self._queue_batched()
        elif self._queue:
            self._units_done += self._queue.pop(0)()
        elif self._phases:
            done, later = self._phases.pop(0)()
            self._queue += later
            self._units_done += done

    def _read(self) -> None:
        """Go to the next frame; solve it (continuous) or read what its solve needs (per frame)."""
        i = self.index
        self.scene.frame_set(self.frames[i])
        depsgraph = bpy.context.evaluated_depsgraph_get()
        if i == 0:
            self._batch = FrameRows.start(self.obj, depsgraph, self.bones, in_turn=self.warm_start, carry=self._carry)
        if self.warm_start:
            self._solve_in_turn(i, depsgraph)
            return
        if self._batch is not None and self._batch.read(depsgraph):
            if self._batch.together:
                self._batched.append(i)
                return
            status = self._batch.solve_own(i)  # (a plan that does not solve frames together: this one alone)
            if status is not None:
                self.solved[i] = True
                self._note(i, {k: m for k, m in status.effectors.items() if not status.reached.get(k, False)})
                self._units_done += 1
                return
        self._record(i, *solve.compute(self.obj, depsgraph))
        self._units_done += 1  # (read and solved in one step)

    def _solve_in_turn(self, i: int, depsgraph: bpy.types.Depsgraph) -> None:
        """Solve frame i of a continuous bake from the previous frame's solution: read and solved by the FrameRows
        where it can (the first frame, and any it cannot, by a whole read: `solve.compute`)."""
        batch_read = self._batch is not None and self._batch.read(depsgraph)
        if batch_read and (self._previous is not None or self._batch_went_on):
            # (after the batch's own solve of the frame before, it goes on from what that left)
            status = self._batch.solve_last(i, None if self._batch_went_on else self._previous)
            if status is not None:
                self._batch_went_on = True
                self.solved[i] = True
                self._note(i, {k: m for k, m in status.effectors.items() if not status.reached.get(k, False)})
                return
        previous = self._previous
        if self._batch_went_on:
            previous = self._batch.last_rotations()
            self._batch_went_on = False
        status, read, solved = solve.compute(self.obj, depsgraph, previous, self._carry)
        self._record(i, status, read, solved)
        if solved is not None:
            # A rotation that is not finite (a parent scaled to zero) must not seed the next frames.
            # (a continuous bake goes on from the solve itself, not from its blend with FK under an influence)
            self._previous = {
                b: q for b, q in zip(read.plan.bones, solved.rotations) if math.isfinite(sum(q))
            }

    def _keep_in_turn(self) -> None:
        """Give the frames the FrameRows solved one at a time their local rotations, all at once."""
        if self._batch is None or not self._batch.solved_in_turn:
            return
        indices, matrices = self._batch.rotations_in_turn()
        moving = {b: k for k, b in enumerate(self._batch.moving)}
        self.locals[indices] = matrices[:, [moving[b] for b in self._columns]]

    def _queue_batched(self) -> None:
        """Queue the solving of the frames the FrameRows read, many together at a time."""
        if self._batched:
            size = max(1, CHUNK // len(self._batch.moving))
            for first in range(0, len(self._batched), size):
                self._queue.append(lambda rows=slice(first, first + size): self._solve_batched(rows))

    def _solve_batched(self, rows: slice) -> int:
        """Solve some frames the FrameRows read, together."""
        local, _, errors = self._batch.solve(rows)
        indices = self._batched[rows]
        moving = {b: k for k, b in enumerate(self._batch.moving)}
        self.locals[indices] = local[:, [moving[b] for b in self._columns]]
        self.solved[indices] = True
        tolerance = self._batch.solve_settings.tolerance
        for i, problems, error in zip(indices, self._batch.problems[rows], errors):
            missed = {
                index: f"misses by {e:.2g}" for index, e in zip(self._batch.used, error.tolist()) if e > tolerance
            }
            self._note(i, {**problems, **missed})
        return len(indices)

    def _note(self, i: int, problems: dict[int, str]) -> None:
        """Remember the effectors that could not be solved, or missed their targets, on frame i."""
        bad = [f"{effector_label(self.obj.fabrik, k)!r}: {m}" for k, m in problems.items() if not switched_off(m)]
        if bad:
            self._problems.append((i, f"frame {self.frames[i]}: " + "; ".join(bad)))

    def _record(self, i: int, status, read, solved) -> None:
        """Keep frame i's result (`solve.compute`'s), or (none) the channel values it has now and what went
        wrong. Baked bones the solve does not move keep their pose of this frame."""
        self.solver_seconds += status.solver_seconds
        if self.root is not None and self.root in self.obj.pose.bones:
            pose_bone = self.obj.pose.bones[self.root]
            moved = solved is not None and solved.root is not None and read.root == self.root
            self.root_values[i] = solved.root if moved else (tuple(pose_bone.location), armature.rotation_value(pose_bone))
            self.root_moved |= moved
        if solved is None:
            reasons = "; ".join(f"{effector_label(self.obj.fabrik, k)!r}: {m}"
                                for k, m in status.effectors.items() if not switched_off(m))
            why = f" ({reasons})" if reasons and reasons not in status.message else ""
            self._problems.append((i, f"frame {self.frames[i]}: {status.message}{why}"))
            self.as_was[i] = {name: armature.rotation_value(self.obj.pose.bones[name]) for name in self.bones}
            self.scale_as_was[i] = {j: tuple(self.obj.pose.bones[name].scale) for j, name in enumerate(self.bones)}
            return
        node_of = {b: k for k, b in enumerate(read.plan.bones)}
        shown = solve.shown(read, solved)
        posed = None
        for j, b in enumerate(self._columns):
            if b in node_of:
                self.locals[i, j] = quat.to_matrix(shown[node_of[b]])
                continue
            if posed is None:
                skeleton = read.plan.skeleton
                posed = skeleton.local_rotations(armature.current_pose(self.obj, skeleton))
            self.locals[i, j] = posed[b]
        if np.isfinite(self.locals[i]).all():  # else its misses read "nan": the bones left unkeyed say why
            self._note(i, {k: m for k, m in status.effectors.items() if not status.reached.get(k, False)})
        self.solved[i] = True
        for j, b in enumerate(self._columns):
            if b in solved.scales:
                self.scales[i, j] = solved.scales[b]
                self.scaled.add(j)

    def cancel(self) -> None:
        """Leave everything as it was before the bake (a dropped bake: its file is gone, nothing to put back)."""
        self.let_go()

    def finish(self, new_action: bool, keep_live: bool) -> BakeResult:
        """Solve what is left, write all keys in bulk, and switch live solving off unless asked to keep it; a key
        that would not be finite is not written (the result says which bone and why), and whatever goes wrong, live
        solving and the frame are put back."""
        live = self._live_before
        try:
            action = None if new_action or self.obj.animation_data is None else self.obj.animation_data.action
            refused = action_editable(action)
            if refused:
                raise ValueError(refused)
            while not self.done:
                self.step()
            result = self._keys.write(new_action)
            live = self._live_before and keep_live
        finally:
            self.let_go(live)
        result.seconds = time.perf_counter() - self._began
        result.solver_seconds = self.solver_seconds + (self._batch.solver_seconds if self._batch is not None else 0.0)
        return result


def refusal(obj: bpy.types.Object) -> str | None:
    """Why this rig cannot be baked now (Edit Mode, linked from a library, a Tolerance that is no number), or None."""
    if obj.mode == 'EDIT':
        # Bone edits reach the armature only when Edit Mode ends; until then the bones we would read are stale.
        return f"'{obj.name}' is in Edit Mode: switch to Pose or Object Mode to bake"
    tolerance = tolerance_problem(obj)
    if tolerance:
        return f"{tolerance}: set it in the FABRIK panel's Solver"
    floor = floor_problem(obj, bpy.context.evaluated_depsgraph_get())
    if floor:  # (as live solving refuses it: a bake would key poses under the floor, or none)
        return f"{floor}: clear the Floor in the FABRIK panel's Solver, or pick a plane of its own"
    return editable(obj)


def warm_start_of(obj: bpy.types.Object, start: str) -> bool:
    """Whether a bake with this start ('RIG', 'FK' or 'PREVIOUS') starts each frame from the previous solution;
    'RIG' follows the rig's live solving, so the keys replay what scrubbing showed."""
    return obj.fabrik.start == 'PREVIOUS' if start == 'RIG' else start == 'PREVIOUS'


def bake_object(
    obj: bpy.types.Object,
    frames: list[int] | range | None = None,
    bones: str | list[str] = 'CHAINS',
    new_action: bool = False,
    cleanup: float | None = None,
    keep_live: bool = False,
    warm_start: bool | None = None,
) -> BakeResult:
    """Bake an armature's FABRIK solution without any UI (scripts, the command line, render farms); `warm_start`
    None starts as the rig's live solving does. ValueError, before any work, for frames or a clean-up tolerance it
    cannot take."""
    # Checked here, not deep in the bake: a bad value would otherwise be clamped after the whole bake had run
    # (the clean-up tolerance: the Baker, before it sets anything up).
    if isinstance(bones, str) and bones not in ('CHAINS', 'SELECTED'):
        raise ValueError(f"bones must be 'CHAINS', 'SELECTED' or a list of bone names, not {bones!r}")
    if isinstance(frames, range) and frames.step < 1:
        raise ValueError(f"the frame step must be 1 or more, not {frames.step}")
    scene = bpy.context.scene
    frames = list(frames) if frames is not None else list(range(scene.frame_start, scene.frame_end + 1, scene.frame_step))
    if not all(isinstance(frame, (int, np.integer)) and not isinstance(frame, bool) for frame in frames):
        raise ValueError("frames must be whole numbers")
    if any(later <= earlier for earlier, later in zip(frames, frames[1:])):
        raise ValueError("frames must increase, each frame once (a step of 1 or more)")
    limits = bpy.types.Scene.bl_rna.properties["frame_current"]
    if frames and not limits.hard_min <= frames[0] <= frames[-1] <= limits.hard_max:
        # Blender would clamp such frames, so their keys would land on the wrong frame.
        raise ValueError(f"frames must lie within Blender's {limits.hard_min}..{limits.hard_max}")
    names = bake_bones(obj, bones) if isinstance(bones, str) else list(bones)
    if warm_start is None:
        warm_start = warm_start_of(obj, 'RIG')
    baker = Baker(scene, obj, frames, names, warm_start, cleanup)
    try:
        while not baker.done:
            baker.step()
    except BaseException:
        baker.cancel()
        raise
    return baker.finish(new_action, keep_live)
