# SPDX-License-Identifier: GPL-3.0-or-later
"""The bake's cheap read of many frames, and their solve through the rig's plan.

Reading a frame here is the targets' and poles' world matrices and, where
animation may change them, every pose bone's rotation and location channels
(one `foreach_get` each) and the frames of the fixed bones the chains hang
from. A per-frame bake then solves many frames at once through the plan on
numpy rows (`core.solving.many_frames`): the start poses' forward
kinematics once per distinct pose (`core.chain.local.start_rows`), FABRIK, and the
local rotations, for all frames together. A continuous bake cannot wait, as
each frame starts from the one before: each frame read is solved at once
through the plan on plain floats, from the previous frame's solution, with
what continuity mode carries. Either way the result is what a whole read of
each frame (`solve.compute`) gives; what such a read has besides (every
bone's pose, the rig's checks) is what this read leaves out.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import NamedTuple

import bpy
import numpy as np

from ...core import Goal
from ...core.chain import local
from ...core.math import matrix_rows, rotation_channels
from ...core.math.quat import Quat
from ...core.math.rotation_channels import channel_to_quaternion
from ...core.model.tree import Start
from ...core.solving import many_frames
from ...core.solving.parts import layout_of
from ...core.solving.plan import Carry, plan_for
from .. import solve
from ..effectors import effector_goals, pins
from ..effectors.effector_values import EffectorValues
from ..rig import animdata, armature
from ..rig.channels import fixed_frame
from ..rig.floor import floor_plane, moves_with_rig
from ..rig.status import RigStatus, concluded


class FrameRows:
    """The inputs of many frames of one rig, as the bake reads them, and their solve."""

    @classmethod
    def start(
        cls, obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, bake_bones: list[str], in_turn: bool = False,
        carry: Carry | None = None
    ) -> "FrameRows | None":
        """A reader for this rig, or None where a whole read of each frame must solve it (another solver, IK
        stretch, a fixed bone between moving ones, an influence below 1, a Root that moves); `in_turn`: a continuous
        bake's, each frame solved as it is read."""
        if obj.fabrik.root_mode != 'OFF':
            return None
        skeleton = armature.skeleton_of(obj)
        goals, used, problems = effector_goals.gather_goals(obj, depsgraph, skeleton)
        if not goals:
            return None
        plan = plan_for(skeleton, goals, obj.fabrik.solver)
        if plan.whole or not plan.local.placed:
            return None
        if not {skeleton.index(name) for name in bake_bones} <= set(plan.bones):
            return None
        if effector_goals.influences(obj, depsgraph, plan.tree, used) is not None:
            return None  # blended with the animator's pose: frame by frame
        return cls(obj, plan, goals, used, problems, in_turn, carry)

    def __init__(
        self, obj: bpy.types.Object, plan, goals, used, problems, in_turn: bool, carry: Carry | None = None
    ) -> None:
        skeleton = plan.skeleton
        self.obj, self.plan, self.goals, self.used, self.in_turn = obj, plan, goals, used, in_turn
        #: Whether the frames read are solved together (`solve`), else each as it is read (`solve_last`, `solve_own`).
        self.together = many_frames.on_rows(plan) and not in_turn
        #: The goals' weights (frames solved together share them).
        self.weights = [g.weight for g in goals]
        pose_bones = obj.pose.bones
        #: Pose-bone index of each skeleton bone (foreach_get reads in pose-bone order).
        self.order = armature.pose_bone_order(obj)
        self.moving = plan.bones
        self.modes = [pose_bones[skeleton.names[b]].rotation_mode for b in self.moving]
        #: The fixed parents of the chains' base bones: their evaluated pose is read every frame.
        tree = plan.tree
        self.fixed_parents = sorted({
            skeleton.parents[b] for k, b in enumerate(self.moving) if tree.parent[k] < 0 and skeleton.parents[b] >= 0
        })
        # Read only the rotation channels the moving bones' modes use.
        self.reads = [("loc", "location", 3)]
        if 'QUATERNION' in self.modes:
            self.reads.append(("quat", "rotation_quaternion", 4))
        if 'AXIS_ANGLE' in self.modes:
            self.reads.append(("axis", "rotation_axis_angle", 4))
        if any(mode not in ('QUATERNION', 'AXIS_ANGLE') for mode in self.modes):
            self.reads.append(("euler", "rotation_euler", 3))
        paths = animdata.animated_paths(obj)
        # Unanimated effector settings cannot change the goals' layout: read only where the targets are.
        self.lean = paths is not None and not any(path.startswith("fabrik.") for path in paths)
        effectors = obj.fabrik.effectors
        self.sources = [
            (effectors[i].target, effectors[i].subtarget, effectors[i].pole_target, effectors[i].pole_subtarget)
            for i in used
        ]
        #: The effectors' pins (unanimated where the read is lean).
        self.pins = [EffectorValues(effectors[i], i) for i in used]
        self.static_problems = problems
        # Channels that no animation drives keep the values they have for the whole bake.
        prefixes = tuple(f'pose.bones["{bpy.utils.escape_identifier(skeleton.names[b])}"]' for b in self.moving)
        self.static_channels = paths is not None and not any(path.startswith(prefixes) for path in paths)
        #: The rig's solve settings as the frames share them (animation may change them frame by frame).
        self.settings: tuple | None = None  # (taken at the first frame read)
        size = solve.rig_size(plan)
        self.solve_settings = solve.settings_of(obj, warm=False, size=size)
        #: A continuous bake's settings: each frame starts from the previous solution (`solve_last`).
        self.warm_settings = solve.settings_of(obj, warm=True, size=size)
        self.frames_goals: list[list[Goal]] = []
        #: Per frame read, the Floor's plane in the rig's space (None: none).
        self.floors: list = []
        self.channels: dict[str, list[np.ndarray]] = {"quat": [], "euler": [], "axis": [], "loc": []}
        self.parents: list[np.ndarray] = []
        self.problems: list[dict[int, str]] = []
        #: The frames solved one at a time as they were read (`solve_last`, `solve_own`): per frame index, the moving
        #: bones' local rotations.
        self._rotated: dict[int, list[Quat] | _Placed] = {}
        self._last_index = -1
        #: The last frame `solve_own` read whole (its channels and fixed bones' matrices, as bytes) and its start.
        self._own: tuple[bytes, Start] | None = None
        #: The fixed bones' matrices of the last frame `_fixed_now` read (as bytes) and what `_fixed` made of them.
        self._fixed_read: tuple[bytes, list | None] | None = None
        #: The start and outcome of the frame solved last, which a continuous bake's next may go on from.
        self._last: tuple | None = None
        #: What continuity mode carries from frame to frame of a continuous bake.
        self.carry = carry if carry is not None else Carry()
        #: Seconds the plan spent in this reader's solves (those that came to nothing too).
        self.solver_seconds = 0.0

    def read(self, depsgraph: bpy.types.Depsgraph) -> bool:
        """Read the current frame; False when its goals or settings differ from the reader's (the caller reads
        and solves it whole)."""
        if moves_with_rig(self.obj):
            return False  # (the whole read says why)
        try:
            plane = floor_plane(self.obj, depsgraph)  # (this frame's: the floor or the rig may move)
        except ValueError:
            return False
        settings = _solve_settings(self.obj, depsgraph)
        if self.settings is None:
            self.settings = settings
        elif settings != self.settings:
            return False  # (a frame whose settings differ from the first one's: read whole)
        if self.lean:
            goals = self._goals_now(depsgraph)
            if goals is None:
                return False
            problems = self.static_problems
        else:
            goals, _, problems = effector_goals.gather_goals(self.obj, depsgraph, self.plan.skeleton)
            if not goals or layout_of(goals) != self.plan.layout or [g.weight for g in goals] != self.weights:
                return False
        self.frames_goals.append(goals)
        self.floors.append(plane)
        pose_bones = self.obj.pose.bones
        n = len(pose_bones)
        for key, prop, width in self.reads:
            if self.static_channels and self.channels[key]:
                self.channels[key].append(self.channels[key][-1])
                continue
            values = np.empty(n * width, dtype=np.float32)
            pose_bones.foreach_get(prop, values)
            self.channels[key].append(values.reshape(n, width)[self.order])
        if self.fixed_parents:
            names = self.plan.skeleton.names
            self.parents.append(np.array([np.array(pose_bones[names[p]].matrix) for p in self.fixed_parents]))
        self.problems.append(problems)
        return True

    def _goals_now(self, depsgraph: bpy.types.Depsgraph) -> list[Goal] | None:
        """The goals this frame, read as every goal is (`effector_goals.goal_at`): their targets, rotations and
        poles moved; None when something is off (the whole read then says what)."""
        try:
            to_armature = armature.world_to_armature(self.obj.evaluated_get(depsgraph))
            out = []
            for goal, (target, subtarget, pole, pole_bone), pin in zip(self.goals, self.sources, self.pins):
                world = pins.held_world(effector_goals.world_matrix(target, subtarget, depsgraph), pin)
                pole_world = None if goal.pole is None else effector_goals.world_matrix(pole, pole_bone, depsgraph)
                out.append(effector_goals.goal_at(goal, world, pole_world, to_armature))
        except (ValueError, ReferenceError):  # (an EffectorError is a ValueError)
            return None
        return out

    def solve(self, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Solve some of the frames read together: local rotations of the moving bones (F, m, 3, 3), iterations,
        errors."""
        plan = self.plan
        skeleton = plan.skeleton
        frame_goals = self.frames_goals[rows]
        count = len(frame_goals)
        found = {key: np.asarray(values[rows], dtype=np.float64) for key, values in self.channels.items() if values}
        parent_pose = np.asarray(self.parents[rows]).reshape(count, len(self.fixed_parents), 4, 4) if self.parents else None
        parent_frames = None if parent_pose is None else matrix_rows.unit_frames(parent_pose)
        # Frames that repeat a start pose (unanimated chains: all of them) share its forward kinematics.
        keys = [values.reshape(count, -1) for values in found.values()]
        if parent_pose is not None:
            keys.append(parent_pose.reshape(count, -1))
        first, inverse = _distinct_rows(np.concatenate(keys, axis=1))
        fk = self._fk_rotations({key: values[first] for key, values in found.items()})
        translations = found["loc"][first][:, self.moving]
        fixed_rows = {}
        if parent_pose is not None:
            for j, p in enumerate(self.fixed_parents):
                fixed_rows[p] = (parent_pose[first, j, :3, 3], parent_frames[first, j])
        heads, frames = local.start_rows(skeleton, plan.tree, fk, translations, fixed_rows)
        heads, frames, fk = heads[inverse], frames[inverse], fk[inverse]
        targets = np.array([[g.target for g in goals] for goals in frame_goals], dtype=float)
        fixed = {p: parent_frames[:, j] for j, p in enumerate(self.fixed_parents)} if parent_frames is not None else {}
        hung = [None if parent_frames is None else parent_pose[:, j] for j in range(len(self.fixed_parents))]

        def start_of(f: int):
            """Frame f's start as the plan takes it (the pose itself is not needed: placed, and no whole method)."""
            rotations = [tuple(q) for q in matrix_rows.quaternions_from_matrices(fk[f]).tolist()]
            moves = [tuple(t) if any(t) else None for t in found["loc"][f][self.moving].tolist()]
            return plan.start(rotations, moves, self._fixed(lambda j: hung[j][f], nan=True), None)

        began = time.perf_counter()
        solved = many_frames.solve_rows(
            plan, frame_goals[0], targets, heads, frames, fixed, self.solve_settings, start_of, self.floors[rows]
        )
        self.solver_seconds += time.perf_counter() - began
        return solved.rotations, solved.iterations, solved.errors

    def solve_last(self, index: int, previous: dict | None) -> RigStatus | None:
        """Solve the frame read last (the bake's frame `index`) from `previous` (a continuous bake's last solution)
        or this reader's own solve of the frame before; the status, or None where the whole read must do it (it says
        why)."""
        began = time.perf_counter()
        plan = self.plan
        last, self._last = self._last, None
        fixed = self._fixed_now()
        if fixed is None:
            return None
        translations = [tuple(t) if any(t) else None for t in self.channels["loc"][-1][self.moving].tolist()]
        # Going on from its own solve of the frame before, the nodes start where that left them.
        start = plan.start_after(*last, translations, fixed) if previous is None and last is not None else None
        if start is None:
            previous = previous if previous is not None else self.last_rotations()
            if not all(b in previous for b in self.moving):
                return None
            start = plan.start([previous[b] for b in self.moving], translations, fixed, None)
        return self._solved(index, start, self.warm_settings, self.carry, began)

    def solve_own(self, index: int) -> RigStatus | None:
        """Solve the frame read last (the bake's frame `index`) from its own pose, as a per-frame bake does where
        the plan does not solve frames together; the status, or None where this read does not do (as
        `solve_last`)."""
        began = time.perf_counter()
        # A frame that reads as the one before it (unanimated chains: every frame) starts where that one started.
        read = b"".join(values[-1].tobytes() for values in (*self.channels.values(), self.parents) if values)
        if self._own is not None and self._own[0] == read:
            return self._solved(index, self._own[1], self.solve_settings, None, began)
        fixed = self._fixed_now()
        if fixed is None:
            return None
        translations = [tuple(t) if any(t) else None for t in self.channels["loc"][-1][self.moving].tolist()]
        start = self.plan.start(self._fk_now(), translations, fixed, None)
        self._own = read, start
        return self._solved(index, start, self.solve_settings, None, began)

    def _solved(self, index: int, start, settings, carry: Carry | None, began: float) -> RigStatus | None:
        """Solve the frame read last (the bake's frame `index`) from `start` and keep its rotations; the status,
        or None where the result is not a number."""
        plan = self.plan
        goals = self.frames_goals[-1]
        floor = self.floors[-1]  # (the settings made again only where the floor moved)
        settings = settings if floor == settings.floor else replace(settings, floor=floor)
        solving = time.perf_counter()
        try:
            outcome = plan.solve(goals, start, settings, carry)
        except ValueError:
            return None
        finally:
            self.solver_seconds += time.perf_counter() - solving
        if plan.goes_on(start, outcome):
            if not math.isfinite(sum(map(sum, outcome.frames))):
                return None
            # (their local rotations are worked out with the other frames', at the end: `rotations_in_turn`)
            self._rotated[index] = _Placed(start.zero, outcome.frames)
        else:
            solved = plan.rotations(start, outcome)
            if not math.isfinite(sum(map(sum, solved))):
                return None
            self._rotated[index] = solved
        self._last = start, outcome
        self._last_index = index
        result = RigStatus(effectors=dict(self.problems[-1]))
        return concluded(result, plan.tree, goals, self.used, outcome.report, settings.tolerance, [], began)

    def _fixed_now(self) -> list | None:
        """`_fixed` of the frame read last: as the frame before's where its fixed bones' matrices read the same."""
        read = self.parents[-1].tobytes() if self.parents else b""
        if self._fixed_read is None or self._fixed_read[0] != read:
            self._fixed_read = read, self._fixed(lambda j: self.parents[-1][j])
        return self._fixed_read[1]

    def _fixed(self, matrix_of, nan: bool = False) -> list | None:
        """Per node, the frame and head of the fixed bone it hangs from (`matrix_of(j)`: the j-th fixed parent's
        pose matrix), None for none; None too where one has no usable frame, or with `nan` a frame that is not a
        number (left unkeyed)."""
        plan = self.plan
        fixed = [None] * len(self.moving)
        for k, (p, b) in enumerate(zip(plan.tree.parent, plan.local.parent_bone)):
            if p < 0 and b >= 0:
                matrix = matrix_of(self.fixed_parents.index(b))
                if not (np.isfinite(matrix).all() and abs(np.linalg.det(matrix[:3, :3])) > 1e-12):
                    if not nan:
                        return None
                    fixed[k] = ((math.nan,) * 4, (math.nan,) * 3)
                    continue
                fixed[k] = fixed_frame(matrix.tolist())
        return fixed

    def last_rotations(self) -> dict[int, Quat]:
        """The moving bones' local rotations of the last frame `solve_last` (or `solve_own`) solved."""
        rotations = self._rotated.get(self._last_index, [])
        if isinstance(rotations, _Placed):
            rotations = local.rotations_from_zero(self.plan.tree, rotations.zero, rotations.frames)
        return dict(zip(self.moving, rotations))

    @property
    def solved_in_turn(self) -> bool:
        """Whether `solve_last` or `solve_own` solved any frame."""
        return bool(self._rotated)

    def rotations_in_turn(self) -> tuple[list[int], np.ndarray]:
        """The frame indices `solve_last` or `solve_own` solved and their moving bones' local rotations (frames, m,
        3, 3), worked out together."""
        indices = sorted(self._rotated)
        quaternions = np.empty((len(indices), len(self.moving), 4))
        placed = [n for n, i in enumerate(indices) if isinstance(self._rotated[i], _Placed)]
        for n in sorted(set(range(len(indices))) - set(placed)):
            quaternions[n] = self._rotated[indices[n]]
        if placed:
            zero = np.array([self._rotated[indices[n]].zero for n in placed])
            frames = np.array([self._rotated[indices[n]].frames for n in placed])
            quaternions[placed] = local.rotation_rows_from_zero(self.plan.tree, zero, frames)
        return indices, matrix_rows.quaternion_to_matrix(quaternions.reshape(-1, 4)).reshape(len(indices), -1, 3, 3)

    def _fk_rotations(self, found: dict[str, np.ndarray]) -> np.ndarray:
        """Each moving bone's animator's rotation (U, m, 3, 3) from its channels, in its rotation mode (a bake
        switches live solving off first, which gives every held channel back: the channels are the animator's)."""
        fk = np.empty((len(found["loc"]), len(self.moving), 3, 3))
        for k, (b, mode) in enumerate(zip(self.moving, self.modes)):
            fk[:, k] = rotation_channels.matrix_rows_of(mode, found[_CHANNEL_KEYS.get(mode, "euler")][:, b])
        return fk

    def _fk_now(self) -> list[Quat]:
        """`_fk_rotations` of the frame read last, as unit quaternions on plain floats (as a live read makes
        them: one frame does not pay numpy's cost per call)."""
        return [
            channel_to_quaternion(mode, self.channels[_CHANNEL_KEYS.get(mode, "euler")][-1][b].tolist())
            for b, mode in zip(self.moving, self.modes)
        ]


#: Which channels a rotation mode's values are read from (`FrameRows.reads`; any Euler order: "euler").
_CHANNEL_KEYS = {'QUATERNION': "quat", 'AXIS_ANGLE': "axis"}


class _Placed(NamedTuple):
    """A frame `solve_last` solved whose local rotations are worked out later: the zero links of its start and the
    nodes' solved frames (`local.rotations_from_zero`)."""

    zero: list
    frames: list


def _distinct_rows(rows: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The first row of each distinct value, and for every row which of those it equals."""
    index_of: dict[bytes, int] = {}
    first: list[int] = []
    inverse = np.empty(len(rows), dtype=np.intp)
    for i, row in enumerate(rows):
        k = index_of.setdefault(row.tobytes(), len(first))
        if k == len(first):
            first.append(i)
        inverse[i] = k
    return first, inverse


def _solve_settings(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph) -> tuple:
    """The rig settings the frames of a reader share: solver, iteration cap, tolerance and influences (evaluated,
    as animation sets them; a frame whose influence is below 1 is blended, so read whole)."""
    settings = (obj.evaluated_get(depsgraph) if depsgraph is not None else obj).fabrik
    influences = (settings.influence,) + tuple(e.influence for e in settings.effectors)
    return settings.solver, settings.iterations, settings.tolerance, influences
