# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-frame bakes of free connected trees: read each frame cheaply, then solve every frame at once.

Reading a frame here is a handful of bulk reads (targets, and every pose
bone's rotation and location channels via `foreach_get`); the forward
kinematics of the start poses, the FABRIK solve (`core.batch`) and the local
rotations then run in numpy over all frames together. The result is the same
as solving each frame with `solving.compute` from this frame's FK pose.
"""

from __future__ import annotations

import numpy as np

from ..core import batch, rotation
from ..core.fabrik import moving_tree
from . import rig, solving


class FrameBatch:
    """The inputs of many frames of one rig's per-frame solve, and their joint solve."""

    @classmethod
    def start(cls, obj, depsgraph, bake_bones: list[str]) -> "FrameBatch | None":
        """A batch for this rig, or None when its solve cannot be batched (another solver, limits, offsets...)."""
        if obj.fabrik.solver != 'FABRIK':
            return None
        skeleton = rig.skeleton_of(obj)
        goals, _, _ = solving.gather_goals(obj, depsgraph, skeleton)
        if not goals or not batch.supports(skeleton, goals):
            return None
        tree = moving_tree(skeleton, goals)
        if not {skeleton.index(name) for name in bake_bones} <= set(tree.bones):
            return None
        return cls(obj, skeleton, goals, tree)

    def __init__(self, obj, skeleton, goals, tree) -> None:
        self.obj, self.skeleton, self.goals, self.tree = obj, skeleton, goals, tree
        self.layout = _layout(goals)
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
        self.targets: list[list[tuple]] = []
        self.channels: dict[str, list[np.ndarray]] = {"quat": [], "euler": [], "axis": [], "loc": []}
        self.parents: list[np.ndarray] = []
        self.problems: list[dict[int, str]] = []

    def read(self, depsgraph) -> bool:
        """Read the current frame; False when its goals differ from the batch's (the caller solves it alone)."""
        goals, _, problems = solving.gather_goals(self.obj, depsgraph, self.skeleton)
        if _layout(goals) != self.layout:
            return False
        self.targets.append([g.target for g in goals])
        pose_bones = self.obj.pose.bones
        n = len(pose_bones)
        for key, prop, width in self.reads:
            values = np.empty(n * width, dtype=np.float32)
            pose_bones.foreach_get(prop, values)
            self.channels[key].append(values.reshape(n, width)[self.order])
        if self.fixed_parents:
            self.parents.append(np.array([np.array(pose_bones[self.skeleton.names[p]].matrix) for p in self.fixed_parents]))
        self.problems.append(problems)
        return True

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Solve every frame read; local rotations (F, n, 3, 3) of the moving bones (identity elsewhere), iterations, errors."""
        skeleton = self.skeleton
        count, n = len(self.targets), len(skeleton)
        channels = {key: np.asarray(values, dtype=np.float64) for key, values in self.channels.items() if values}
        fk = self._fk_rotations(channels)
        parent_pose = np.asarray(self.parents).reshape(count, len(self.fixed_parents), 4, 4) if self.parents else None
        fixed = {p: i for i, p in enumerate(self.fixed_parents)}

        def parent_frame(p: int, frames: dict[int, np.ndarray], heads: dict[int, np.ndarray]):
            """The parent's pose frame and head for all frames."""
            if p in frames:
                return frames[p], heads[p]
            m = parent_pose[:, fixed[p]]
            frame = m[:, :3, :3] / np.linalg.norm(m[:, :3, :3], axis=1, keepdims=True)
            return frame, m[:, :3, 3]

        # Forward kinematics of the start poses, as Skeleton.with_local_rotations composes them.
        frames: dict[int, np.ndarray] = {}
        heads: dict[int, np.ndarray] = {}
        for k, b in enumerate(self.moving):
            p = skeleton.parents[b]
            offset = skeleton.rest_heads[b] + channels["loc"][:, b] @ skeleton.rest_frames[b].T
            if p < 0:
                frames[b] = skeleton.rest_frames[b] @ fk[:, k]
                heads[b] = offset
            else:
                frame_p, head_p = parent_frame(p, frames, heads)
                rest_to_pose = frame_p @ skeleton.rest_frames[p].T
                frames[b] = rest_to_pose @ skeleton.rest_frames[b] @ fk[:, k]
                heads[b] = head_p + np.einsum("fij,fj->fi", rest_to_pose, offset - skeleton.rest_heads[p])
        start_heads = np.stack([heads[b] for b in self.moving], axis=1)
        start_frames = np.stack([frames[b] for b in self.moving], axis=1)
        targets = np.asarray(self.targets, dtype=float)
        settings = solving.solve_settings_of(self.obj.fabrik, warm=False)
        solved, iterations, errors = batch.solve_moving(skeleton, self.goals, targets, start_heads, start_frames, settings)

        # Local rotations: rest_b^T rest_p F_p^T F_b (the parent's solved or fixed pose frame).
        local = np.broadcast_to(np.eye(3), (count, n, 3, 3)).copy()
        solved_frames = {b: solved[:, k] for k, b in enumerate(self.moving)}
        for b in self.moving:
            p = skeleton.parents[b]
            if p < 0:
                local[:, b] = skeleton.rest_frames[b].T @ solved_frames[b]
            else:
                frame_p = solved_frames[p] if p in solved_frames else parent_frame(p, {}, {})[0]
                local[:, b] = skeleton.rest_frames[b].T @ skeleton.rest_frames[p] @ np.swapaxes(frame_p, 1, 2) @ solved_frames[b]
        return local, iterations, errors

    def _fk_rotations(self, channels: dict[str, np.ndarray]) -> np.ndarray:
        """Each moving bone's FK rotation per frame (F, m, 3, 3) from its channels, in its rotation mode.

        Where a bone still holds the value live solving wrote, its FK rotation is
        the one that value replaced, as in `solving._fk_rotation`.
        """
        count = len(self.targets)
        fk = np.empty((count, len(self.moving), 3, 3))
        for k, (b, mode) in enumerate(zip(self.moving, self.modes)):
            if mode == 'QUATERNION':
                values = channels["quat"][:, b]
                fk[:, k] = rotation.quaternion_to_matrix(values)
            elif mode == 'AXIS_ANGLE':
                values = channels["axis"][:, b]
                axis = values[:, 1:]
                size = np.linalg.norm(axis, axis=1)
                axis = np.where(size[:, None] > 1e-12, axis / np.maximum(size, 1e-12)[:, None], [0.0, 1.0, 0.0])
                half = values[:, 0] / 2.0
                fk[:, k] = rotation.quaternion_to_matrix(np.column_stack((np.cos(half), axis * np.sin(half)[:, None])))
            else:
                values = channels["euler"][:, b]
                fk[:, k] = rotation.euler_matrices(values, mode)
            stashed = solving.stashed_fk(self.obj.name, self.skeleton.names[b])
            if stashed is not None:
                written, matrix = stashed
                same = np.all(np.abs(values - np.asarray(written)[None, :]) <= 1e-6, axis=1)
                fk[same, k] = matrix
        return fk


def _layout(goals) -> tuple:
    """What must stay the same across frames for them to be solved together."""
    return tuple((g.bone, g.chain_length, g.weight, g.rotation is None, g.pole is None) for g in goals)
