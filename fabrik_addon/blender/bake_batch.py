# SPDX-License-Identifier: GPL-3.0-or-later
"""Bakes of unlimited trees: read each frame cheaply, then solve many frames at once, or each in turn.

Reading a frame here is the targets' world positions and, where animation
may change them, every pose bone's rotation and location channels (one
`foreach_get` each). In a per-frame bake the forward kinematics of the start
poses (once per distinct pose), the FABRIK solve (`core.batch`) and the local
rotations then run in numpy over many frames together. The result is the same
as solving each frame with `solving.compute` from this frame's FK pose.

One chain in open cones is solved so too, as `fabrik.solve` starts on it: the
free chain's passes for all frames at once, the limits checked on their
result in bulk (`limits.allows_rows`), and the frames where a cone binds (or
the passes crawl) solved again alone, limits and all.

A continuous bake cannot wait: each frame starts from the one before. There
each frame read is solved at once on plain floats (`core.local_solve`), from
the previous frame's local rotations, as `solving.compute` solves it with that
previous solution; what `compute` reads besides (every bone's pose, the rig's
checks) is what the read here leaves out.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import bpy
import numpy as np

from ..core import batch, channels, fabrik, local_solve, matrix_rows, quat, refine, stretch
from ..core import limits as joint_limits
from ..core.fabrik import moving_tree, open_cones_as_free
from ..core.quat import Quat
from . import animdata, rig, solving


class FrameBatch:
    """The inputs of many frames of one rig's per-frame solve, and their joint solve."""

    @classmethod
    def start(cls, obj, depsgraph, bake_bones: list[str], in_turn: bool = False) -> "FrameBatch | None":
        """A batch for this rig, or None when its solve cannot be batched (another solver, limits, goal rotations...).
        Where frames are solved in turn (`solve_last`: a continuous bake), only free trees."""
        if obj.fabrik.solver != 'FABRIK':
            return None
        skeleton = rig.skeleton_of(obj)
        goals, used, problems = solving.gather_goals(obj, depsgraph, skeleton)
        if not goals:
            return None
        tree = moving_tree(skeleton, goals)
        free = None
        limited = False
        if in_turn and not batch.supports(skeleton, goals):
            # A limited tree followed frame by frame from the rig its last solve left (`fabrik.follow_limited`);
            # position goals only, as the read here takes only the targets' positions.
            limited = fabrik.follows_limited(skeleton, tree, goals) and all(g.rotation is None for g in goals)
            if not limited or rig.limit_problems(obj):
                return None
        elif not batch.supports(skeleton, goals):
            # One chain in open cones, solved from this frame's pose: the free chain's passes first, as
            # `fabrik.solve` runs them there (`solve` checks the limits on what they give).
            free = open_cones_as_free(tree)
            if free is None or not local_solve.applies_open(free, goals) or stretch.applies(skeleton, goals):
                return None
        if not {skeleton.index(name) for name in bake_bones} <= set(tree.bones):
            return None
        if any(p >= 0 and skeleton.parents[b] != tree.bones[p] for b, p in zip(tree.bones, tree.parent)):
            return None  # a fixed bone between two moving ones: its pose would need following too
        if solving.influences(obj, depsgraph, tree, used) is not None:
            return None  # blended with FK: frame by frame (`solving.conclude` blends)
        return cls(obj, skeleton, goals, used, problems, tree, free, limited)

    def __init__(self, obj, skeleton, goals, used, problems, tree, free=None, limited: bool = False) -> None:
        self.obj, self.skeleton, self.goals, self.tree = obj, skeleton, goals, tree
        #: The tree without its open cones, where they are solved as the free chain first (else None).
        self.free = free
        #: A limited tree a continuous bake follows from the rig its last solve left (`_follow`).
        self.limited = limited
        #: That rig, with what it was made for (the moving bones' locations and the fixed parents' pose).
        self._kept: tuple[bytes, refine.AngleRig] | None = None
        #: The effector index of each goal.
        self.used = used
        self.layout = goal_layout(goals)
        pose_bones = obj.pose.bones
        #: Pose-bone index of each skeleton bone (foreach_get reads in pose-bone order).
        self.order = rig.pose_bone_order(obj)
        self.moving = list(tree.bones)
        self.modes = [pose_bones[skeleton.names[b]].rotation_mode for b in self.moving]
        #: The fixed parents of the chains' base bones: their evaluated pose is read every frame.
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
        paths = _animated_paths(obj)
        # Unanimated effector settings cannot change the goals' layout: read only where the targets are.
        self.lean = paths is not None and not any(path.startswith("fabrik.") for path in paths)
        self.sources = [(obj.fabrik.effectors[i].target, obj.fabrik.effectors[i].subtarget) for i in used]
        self.static_problems = problems
        # Channels that no animation drives keep the values they have for the whole bake.
        prefixes = tuple(f'pose.bones["{bpy.utils.escape_identifier(skeleton.names[b])}"]' for b in self.moving)
        self.static_channels = paths is not None and not any(path.startswith(prefixes) for path in paths)
        #: The rig's solve settings as the batch solves them (animation may change them frame by frame).
        self.settings: tuple | None = None  # (taken at the first frame read)
        size = solving.rig_size(skeleton, tree)
        self.solve_settings = solving.solve_settings_of(obj.fabrik, warm=False, size=size)
        #: A continuous bake's settings: each frame starts from the previous solution (`solve_last`).
        self.warm_settings = solving.solve_settings_of(obj.fabrik, warm=True, size=size)
        self.targets: list[list[tuple]] = []
        self.channels: dict[str, list[np.ndarray]] = {"quat": [], "euler": [], "axis": [], "loc": []}
        self.parents: list[np.ndarray] = []
        self.problems: list[dict[int, str]] = []
        #: A continuous bake's frames solved by `solve_last`, per frame index: the moving bones' frames (armature
        #: space) and the row of the frame read, where the solve went on from joints (`solve_on`); the moving
        #: bones' local rotations, where it started from them.
        self._swung: dict[int, tuple[list[Quat], int]] = {}
        self._rotated: dict[int, list[Quat]] = {}
        self._last_index = -1
        #: What the last frame's solve left to go on from: ((translations, fixed), (frames, heads, tails)), or None.
        self._left: tuple | None = None

    def read(self, depsgraph) -> bool:
        """Read the current frame; False when its goals or settings differ from the batch's (the caller
        solves it alone)."""
        settings = _solve_settings(self.obj, depsgraph)
        if self.settings is None:
            self.settings = settings
        elif settings != self.settings:
            return False
        if self.lean:
            points = self._targets_now(depsgraph)
            if points is None:
                return False
            problems = self.static_problems
        else:
            goals, _, problems = solving.gather_goals(self.obj, depsgraph, self.skeleton)
            if goal_layout(goals) != self.layout:
                return False
            points = [g.target for g in goals]
        self.targets.append(points)
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
            self.parents.append(np.array([np.array(pose_bones[self.skeleton.names[p]].matrix) for p in self.fixed_parents]))
        self.problems.append(problems)
        return True

    def _targets_now(self, depsgraph) -> list[tuple] | None:
        """The goals' targets this frame, as `solving.gather_goals` reads them; None when something is off
        (the full read then says what)."""
        try:
            to_armature = rig.world_to_armature(self.obj.evaluated_get(depsgraph))
            points = [tuple(to_armature @ solving.world_matrix(t, s, depsgraph).translation) for t, s in self.sources]
        except ValueError:
            return None
        if not all(math.isfinite(c) for point in points for c in point):
            return None
        return points

    def solve(self, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Solve some of the frames read: local rotations of the moving bones (F, m, 3, 3), iterations, errors."""
        skeleton = self.skeleton
        count = len(self.targets[rows])
        channels = {key: np.asarray(values[rows], dtype=np.float64) for key, values in self.channels.items() if values}
        parent_pose = np.asarray(self.parents[rows]).reshape(count, len(self.fixed_parents), 4, 4) if self.parents else None
        parent_frames = None if parent_pose is None else _unit_frames(parent_pose)

        # Frames that repeat a start pose (unanimated chains: all of them) share its forward kinematics.
        keys = [values.reshape(count, -1) for values in channels.values()]
        if parent_pose is not None:
            keys.append(parent_pose.reshape(count, -1))
        first, inverse = _distinct_rows(np.concatenate(keys, axis=1))
        heads, frames = self._start_poses(
            {key: values[first] for key, values in channels.items()},
            None if parent_pose is None else (parent_pose[first, :, :3, 3], parent_frames[first]),
        )
        targets = np.asarray(self.targets[rows], dtype=float)
        heads, frames = heads[inverse], frames[inverse]

        def start_pose(f: int):
            """Frame f's start pose as far as the solve reads it: the moving bones and the fixed parents."""
            pose = skeleton.rest_pose()
            pose.heads[self.moving], pose.frames[self.moving] = heads[f], frames[f]
            if parent_pose is not None:
                pose.heads[self.fixed_parents] = parent_pose[f, :, :3, 3]
                pose.frames[self.fixed_parents] = parent_frames[f]
            return pose

        solved, iterations, errors = batch.solve_moving(
            skeleton, self.goals, targets, heads, frames, self.solve_settings, start_pose, self.free
        )
        local = self._local_rotations(solved, parent_frames)
        if self.free is not None:
            start = self._local_rotations(frames, parent_frames)
            self._inside_cones(local, start, targets, iterations, errors, start_pose)
        return local, iterations, errors

    def _inside_cones(self, local, start, targets, iterations, errors, start_pose) -> None:
        """What `fabrik.solve` makes of the free chain's passes on a chain in open cones, for the frames solved
        together (local and start rotations (F, m, 3, 3), changed in place with the iterations and errors): a
        frame that converged with every joint inside its limit keeps that pose, its leaf's twist (which moves no
        goal) back at the start's; every other frame is solved again alone, limits and all, from its start."""
        skeleton, tree = self.skeleton, self.tree
        count = len(local)
        good = errors.max(axis=1) <= self.solve_settings.tolerance
        quaternions = matrix_rows.quaternions_from_matrices(local.reshape(-1, 3, 3)).reshape(count, -1, 4)
        for k, limit in enumerate(tree.limits):
            if limit is not None:
                good &= joint_limits.allows_rows(limit, quaternions[:, k])
        leaves = [k for k, limit in enumerate(tree.limits) if limit is not None and not tree.children[k]]
        if leaves and good.any():
            begun = matrix_rows.quaternions_from_matrices(start[:, leaves].reshape(-1, 3, 3)).reshape(count, -1, 4)
            for f in np.flatnonzero(good).tolist():
                for j, k in enumerate(leaves):
                    twisted = local_solve.with_start_twist(
                        tree.limits[k], tuple(quaternions[f, k].tolist()), tuple(begun[f, j].tolist())
                    )
                    local[f, k] = quat.to_matrix(twisted)
        for f in np.flatnonzero(~good).tolist():
            goals = [replace(g, target=tuple(map(float, targets[f, i]))) for i, g in enumerate(self.goals)]
            pose, report = fabrik.solve(skeleton, goals, start_pose(f), self.solve_settings)
            local[f] = skeleton.local_rotations(pose)[self.moving]
            iterations[f], errors[f] = report.iterations, report.errors

    def solve_last(self, index: int, previous: dict[int, np.ndarray | Quat] | None) -> solving.RigStatus | None:
        """Solve the frame read last (the bake's frame `index`) as `solving.compute` solves it from `previous`
        (each moving bone's local rotation: a continuous bake's previous solution), or without it from where this
        batch's own solve of the frame before left the bones; the status. None where this read does not do: a
        bone without a previous rotation, a bone above a chain without a usable frame, a result that is not a
        number (`compute` says why); the frame is then not solved here, and `last_rotations` still gives the
        solve before.

        A free connected tree goes on from the joints and frames its last solve left, as long as nothing above it
        moved (forward kinematics of its local rotations would put them back where they are); the local
        rotations of the frames solved so are worked out together (`rotations_in_turn`).
        """
        if self.limited:
            return self._follow(index, previous)
        local = local_solve.local_tree(self.skeleton, self.tree)
        translations = [tuple(t) if any(t) else None for t in self.channels["loc"][-1][self.moving].tolist()]
        fixed = self._fixed_now(local)
        if fixed is None:
            return None
        goals = [replace(goal, target=tuple(point)) for goal, point in zip(self.goals, self.targets[-1])]
        began = time.perf_counter()
        if local_solve.goes_on(local, goals):
            start = None
            if previous is None and self._left is not None and self._left[0] == (translations, fixed):
                start = self._left[1]
            if start is None:
                rotations = self._start_rotations(previous)
                if rotations is None:
                    return None
                start = local_solve.start_joints(local, rotations, translations, fixed)
            solved, report = local_solve.solve_on(local, goals, start, self.warm_settings)
            if not math.isfinite(sum(map(sum, solved[0]))):
                return None
            self._swung[index] = (solved[0], len(self.targets) - 1)
            self._left = ((translations, fixed), solved)
        else:
            rotations = self._start_rotations(previous)
            if rotations is None:
                return None
            outcome = local_solve.solve(local, goals, rotations, translations, fixed, self.warm_settings)
            if outcome is None or not math.isfinite(sum(map(sum, outcome[0]))):
                return None
            self._rotated[index], report = outcome
            self._left = None
        return self._solved_last(index, goals, report, began)

    def _follow(self, index: int, previous: dict[int, np.ndarray | Quat] | None) -> solving.RigStatus | None:
        """`solve_last` for a limited tree: `fabrik.follow_limited` from the rig the last frame's solve left (made
        anew from `previous`, or where the bones' locations or the fixed parents' pose changed), as
        `fabrik.solve` moves it first from that solution; None where it does not reach (the rig is dropped)."""
        began = time.perf_counter()
        made_for = self.channels["loc"][-1][self.moving].tobytes() + (
            self.parents[-1].tobytes() if self.fixed_parents else b""
        )
        if previous is not None or self._kept is None or self._kept[0] != made_for:
            rotations = self._start_rotations(previous)
            if rotations is None:
                return None
            start = dict(zip(self.moving, rotations))
            self._kept = made_for, solving.followed_rig(self.obj, self.skeleton, self.tree, start)
        angle_rig = self._kept[1]
        goals = [replace(goal, target=tuple(point)) for goal, point in zip(self.goals, self.targets[-1])]
        report = fabrik.follow_limited(self.skeleton, self.tree, goals, angle_rig, self.warm_settings)
        if report is None or not math.isfinite(sum(map(sum, angle_rig.local))):
            self._kept = None
            return None
        self._rotated[index] = list(angle_rig.local)
        self._left = None
        return self._solved_last(index, goals, report, began)

    def _solved_last(self, index: int, goals: list, report, began: float) -> solving.RigStatus:
        """The status of frame `index`, solved by `solve_last` (the one `last_rotations` now gives)."""
        self._last_index = index
        result = solving.RigStatus(effectors=dict(self.problems[-1]))
        problem = solving.Problem(
            result, self.skeleton, goals, self.used, self.moving, {}, None, self.warm_settings, "FABRIK", [], began
        )
        return solving.conclude_status(problem, report)

    def _start_rotations(self, previous: dict | None) -> list[Quat] | None:
        """The moving bones' local rotations a solve starts from: `previous`'s, or without it the last frame's
        solve's; None when some bone has none."""
        previous = previous if previous is not None else self.last_rotations()
        if not all(b in previous for b in self.moving):
            return None
        return [solving.as_quaternion(previous[b]) for b in self.moving]

    def _fixed_now(self, local) -> list | None:
        """Per node of the frame read last, the frame and head of the fixed bone it hangs from (None for none);
        None when such a bone has no usable frame (scaled to zero, not a number)."""
        fixed = [None] * len(self.moving)
        if self.fixed_parents:
            matrices = self.parents[-1]
            for k, (p, b) in enumerate(zip(self.tree.parent, local.parent_bone)):
                if p < 0 and b >= 0:
                    matrix = matrices[self.fixed_parents.index(b)]
                    if not (np.isfinite(matrix).all() and abs(np.linalg.det(matrix[:3, :3])) > 1e-12):
                        return None
                    fixed[k] = solving.fixed_frame(matrix.tolist())
        return fixed

    def last_rotations(self) -> dict[int, np.ndarray | Quat]:
        """The moving bones' local rotations of the last frame `solve_last` solved."""
        if self._last_index in self._rotated:
            return dict(zip(self.moving, self._rotated[self._last_index]))
        return dict(zip(self.moving, self._swung_rotations([self._swung[self._last_index]])[0]))

    @property
    def solved_in_turn(self) -> bool:
        """Whether `solve_last` solved any frame."""
        return bool(self._swung or self._rotated)

    def rotations_in_turn(self) -> tuple[list[int], np.ndarray]:
        """The frame indices `solve_last` solved and their moving bones' local rotations (frames, m, 3, 3), worked
        out together."""
        indices = sorted([*self._swung, *self._rotated])
        row_of = {i: row for row, i in enumerate(indices)}
        matrices = np.empty((len(indices), len(self.moving), 3, 3))
        if self._rotated:
            quaternions = np.array(list(self._rotated.values())).reshape(-1, 4)
            matrices[[row_of[i] for i in self._rotated]] = matrix_rows.quaternion_to_matrix(quaternions).reshape(
                len(self._rotated), -1, 3, 3
            )
        if self._swung:
            matrices[[row_of[i] for i in self._swung]] = self._swung_rotations(list(self._swung.values()))
        return indices, matrices

    def _swung_rotations(self, swung: list[tuple[list[Quat], int]]) -> np.ndarray:
        """The local rotations (frames, m, 3, 3) of frames `solve_on` left (armature space), each with the row of
        the frame read (its fixed parents' pose)."""
        frames = matrix_rows.quaternion_to_matrix(np.array([f for f, _ in swung]).reshape(-1, 4))
        parent_frames = None
        if self.fixed_parents:
            parent_frames = _unit_frames(np.asarray([self.parents[row] for _, row in swung]))
        return self._local_rotations(frames.reshape(len(swung), -1, 3, 3), parent_frames)

    def _start_poses(self, channels: dict[str, np.ndarray], fixed) -> tuple[np.ndarray, np.ndarray]:
        """Forward kinematics of the moving bones, as Skeleton.with_local_rotations composes them: heads
        (U, m, 3) and frames (U, m, 3, 3) for U sets of channel values (and fixed parents' heads and frames)."""
        skeleton = self.skeleton
        fk = self._fk_rotations(channels)
        node_of = {b: k for k, b in enumerate(self.moving)}
        fixed_index = {p: i for i, p in enumerate(self.fixed_parents)}
        frames = np.empty(fk.shape)
        heads = np.empty(fk.shape[:2] + (3,))
        for k, b in enumerate(self.moving):
            p = skeleton.parents[b]
            relative = skeleton.rest_in_parent[b]
            offset = skeleton.head_in_parent[b] + channels["loc"][:, b] @ relative.T
            if p < 0:
                frames[:, k] = relative @ fk[:, k]
                heads[:, k] = offset
                continue
            if p in node_of:
                frame_p, head_p = frames[:, node_of[p]], heads[:, node_of[p]]
            else:
                head_p, frame_p = fixed[0][:, fixed_index[p]], fixed[1][:, fixed_index[p]]
            frames[:, k] = frame_p @ (relative @ fk[:, k])
            heads[:, k] = head_p + np.einsum("fij,fj->fi", frame_p, offset)
        return heads, frames

    def _local_rotations(self, solved: np.ndarray, parent_frames: np.ndarray | None) -> np.ndarray:
        """Local rotations rest_b^T rest_p F_p^T F_b of the moving bones (F, m, 3, 3), with F_p the parent's
        solved frame, or its fixed pose frame, or (for a root) none."""
        skeleton = self.skeleton
        node_of = {b: k for k, b in enumerate(self.moving)}
        parent_of = np.empty_like(solved)
        rest = np.empty((len(self.moving), 3, 3))
        inner, inner_parents = [], []
        for k, b in enumerate(self.moving):
            p = skeleton.parents[b]
            if p < 0:
                parent_of[:, k], rest[k] = np.eye(3), skeleton.rest_frames[b].T
                continue
            rest[k] = skeleton.rest_frames[b].T @ skeleton.rest_frames[p]
            if p in node_of:
                inner.append(k)
                inner_parents.append(node_of[p])
            else:
                parent_of[:, k] = parent_frames[:, self.fixed_parents.index(p)]
        parent_of[:, inner] = solved[:, inner_parents]
        return rest[None] @ (np.swapaxes(parent_of, 2, 3) @ solved)

    def _fk_rotations(self, channels: dict[str, np.ndarray]) -> np.ndarray:
        """Each moving bone's FK rotation (U, m, 3, 3) from its channels, in its rotation mode.

        Where a bone still holds the value live solving wrote, its FK rotation is
        the one that value replaced, as in `solving.fk_channel_values`.
        """
        count = len(channels["loc"])
        fk = np.empty((count, len(self.moving), 3, 3))
        for k, (b, mode) in enumerate(zip(self.moving, self.modes)):
            if mode == 'QUATERNION':
                values = channels["quat"][:, b]
                fk[:, k] = matrix_rows.quaternion_to_matrix(values)
            elif mode == 'AXIS_ANGLE':
                values = channels["axis"][:, b]
                axis = values[:, 1:]
                size = np.linalg.norm(axis, axis=1)
                axis = np.where(size[:, None] > 0.0, axis / np.where(size > 0.0, size, 1.0)[:, None], [0.0, 1.0, 0.0])
                half = np.where(size > 0.0, values[:, 0] / 2.0, 0.0)  # Blender poses a zero axis as no turn
                fk[:, k] = matrix_rows.quaternion_to_matrix(np.column_stack((np.cos(half), axis * np.sin(half)[:, None])))
            else:
                values = channels["euler"][:, b]
                fk[:, k] = matrix_rows.euler_matrices(values, mode)
            stashed = solving.stashed_fk(self.obj, self.skeleton.names[b])
            # A value held for another rotation mode (the bone's mode changed since the batch began) says nothing.
            if stashed is not None and len(stashed[0]) == values.shape[1]:
                written, matrix = stashed
                same = np.all(np.abs(values - np.asarray(written)[None, :]) <= 1e-6, axis=1)
                fk[same, k] = matrix
        return fk


def _unit_frames(pose: np.ndarray) -> np.ndarray:
    """Pose matrices' (..., 4, 4) rotations with their axes made unit, as `rig.current_pose` makes them."""
    m = pose[..., :3, :3]
    with np.errstate(invalid="ignore", divide="ignore"):  # a parent scaled to zero: NaN, the bake skips it
        return m / np.linalg.norm(m, axis=-2, keepdims=True)


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


def _solve_settings(obj, depsgraph) -> tuple:
    """The rig settings a batch shares: solver, iteration cap, tolerance and influences (evaluated, as
    animation sets them; a frame whose influence is below 1 is blended, so solved alone)."""
    settings = (obj.evaluated_get(depsgraph) if depsgraph is not None else obj).fabrik
    influences = (settings.influence,) + tuple(e.influence for e in settings.effectors)
    return settings.solver, settings.iterations, settings.tolerance, influences


def goal_layout(goals) -> tuple:
    """What must stay the same across frames for them to be solved together."""
    return tuple((g.bone, g.chain_length, g.weight, g.rotation is None, g.pole is None) for g in goals)


def _animated_paths(obj) -> list[str] | None:
    """Data paths the object's drivers and active action animate; None when NLA tracks may animate anything."""
    animation_data = obj.animation_data
    if animation_data is None:
        return []
    if len(animation_data.nla_tracks):
        return None
    paths = [driver.data_path for driver in animation_data.drivers]
    collection = animdata.fcurves(obj)
    if collection is not None:
        paths += [fcurve.data_path for fcurve in collection]
    return paths
