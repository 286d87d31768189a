# SPDX-License-Identifier: GPL-3.0-or-later
"""A retarget as one piece of long work: read the clip, key its pose on the rig, then let FABRIK correct the ends.

In steps, so the operator shows progress from the first frame and Esc
cancels (`long_work`): every frame of the clip is read (its posed bones, one
`foreach_get` a frame); the clip's pose is worked out for all frames at once
(`clip_pose.Copy`) and keyed in bulk on the rig's action (every mapped
bone's rotation and the hips' location), the ends' goals keyed on empties,
and an effector made per limb; then FABRIK's bake solves each frame from
that pose (This Frame's Pose), and the hands and feet are turned back to the
clip's orientation on the solved forearms and shins. Esc before the keys are
written changes nothing; after, it stops the bake and leaves the rig with
the clip's pose and live solving on.
"""

from __future__ import annotations

import bpy
import numpy as np

from ...core.math.matrix_rows import continuous_quaternions
from .. import long_work
from ..bake import baking, keys, writing
from ..rig import animdata, armature
from . import setup
from .clip_pose import Copy, hold_of
from .rests import Layout
from .setup import LIMBS


class Retargeting(long_work.SceneWork):
    """One retarget (see the module): `step()` until `done`, then `finish()`."""

    noun = "the retarget"

    def __init__(
        self, scene: bpy.types.Scene, obj: bpy.types.Object, hold_feet: bool = True, bake_it: bool = True
    ) -> None:
        refused = setup.refusal(obj)
        if refused:
            raise ValueError(refused)
        span = setup.frame_range(obj)
        if span is None or span[1] < span[0]:
            raise ValueError("the clip's action has no frames")
        self.frames = list(range(span[0], span[1] + 1))
        self.layout = Layout.of(obj)
        self.clip = obj.fabrik.retarget_source
        self.hold_feet, self.bake_it = hold_feet, bake_it
        names = [b.name for b in self.clip.pose.bones]
        self._order = [names.index(n) for n in self.layout.read]
        self._clip_posed = np.empty((len(self.frames), len(self._order), 4, 4))
        self._clip_world = np.empty((len(self.frames), 4, 4))
        self.index = 0
        self.copy: Copy | None = None
        #: Whether the rig has been changed: the clip's pose keyed, the effectors made.
        self.written = False
        self.made: list = []
        self.baker: baking.Baker | None = None
        self.result: writing.BakeResult | None = None
        self.hold(scene, obj, live_off=True)

    @property
    def done(self) -> bool:
        return self.copy is not None and (not self.bake_it or (self.baker is not None and self.baker.done))

    @property
    def progress(self) -> tuple[int, int]:
        """(work done, all the work): a unit a clip frame read, as many for the keys, and the bake's own."""
        count = len(self.frames)
        baked, to_key = self.baker.progress if self.baker is not None else (0, 3 * count if self.bake_it else 0)
        return self.index + (count if self.copy is not None else 0) + baked, 2 * count + to_key

    def step(self) -> None:
        self.check()
        if self.index < len(self.frames):
            self._read()
        elif self.copy is None:
            self._write()
        elif self.baker is None:
            bones = baking.bake_bones(self.obj, 'CHAINS')
            self.baker = baking.Baker(self.scene, self.obj, self.frames, bones, warm_start=False)
        else:
            self.baker.step()

    def _read(self) -> None:
        """Go to the next frame and read the clip's posed bones there."""
        self.scene.frame_set(self.frames[self.index])
        clip = self.clip.evaluated_get(bpy.context.evaluated_depsgraph_get())
        self._clip_posed[self.index] = armature.pose_matrices(clip)[self._order]
        self._clip_world[self.index] = np.array(clip.matrix_world)
        self.index += 1

    def _write(self) -> None:
        """Work the clip's pose out for every frame and key it, with the ends' goals and effectors; where the
        clip's pose cannot be put on the rig, take away what was made for it and say which frame."""
        bad = ~(np.isfinite(self._clip_posed).all(axis=(1, 2, 3)) & np.isfinite(self._clip_world).all(axis=(1, 2)))
        if bad.any():
            raise ValueError(f"the clip's pose is not a number on frame {self.frames[int(np.argmax(bad))]}")
        switches = setup.switch_to_fk(self.obj)  # (before the rig is probed: they change what its bones follow)
        try:
            names = sorted(self.layout.sources, key=lambda n: len(self.obj.data.bones[n].parent_recursive))
            copy = Copy.make(self.obj, self.layout, hold_of(self.obj, names), names, self._clip_posed,
                             self._clip_world, self.frames, self.hold_feet)
            bad = ~np.isfinite(copy.hips_location).all(axis=1)
            for values in (*copy.local.values(), *copy.goals.values()):
                bad |= ~np.isfinite(values.reshape(len(self.frames), -1)).all(axis=1)
            if bad.any():
                raise ValueError(f"the clip's pose cannot be put on the rig on frame "
                                 f"{self.frames[int(np.argmax(bad))]} (a bone scaled to nothing?)")
        except Exception:
            setup.switches_back(self.obj, switches)
            raise
        range_before = self.scene.frame_start, self.scene.frame_end
        try:
            self.scene.frame_start, self.scene.frame_end = self.frames[0], self.frames[-1]
            self.made = setup.set_up(self.obj, self.scene)
            self._key(copy, names)
        except Exception:  # (what it made goes again; keys it wrote stay, undo takes them)
            setup.take_away(self.obj)
            setup.switches_back(self.obj, switches)
            self.scene.frame_start, self.scene.frame_end = range_before
            raise
        self.copy, self.written = copy, True

    def _key(self, copy: Copy, names: list[str]) -> None:
        """Key the clip's pose on the rig and the ends' goals on the effectors' targets."""
        frames = np.asarray(self.frames, dtype=np.float64)
        span = (frames[0], frames[-1])
        animdata.ensure_action(self.obj, False, f"{self.obj.name}_{self.clip.name}")
        collection = animdata.fcurves(self.obj, create=True)
        for k, local in copy.local.items():
            write_rotation(self.obj, collection, names[k], local, frames, span)
        hips = bpy.utils.escape_identifier(copy.hips)
        for index in range(3):
            fcurve = animdata.ensure_fcurve(collection, f'pose.bones["{hips}"].location', index, copy.hips)
            keys.write_keys(fcurve, frames, copy.hips_location[:, index], span)
        for name in self.made:
            keys.key_path(self.obj.fabrik.effectors[name].target, self.frames, copy.goals[name])

    def cancel(self) -> None:
        if self.baker is not None:
            self.baker.cancel()
            self.baker = None
        self.let_go(live=True if self.written else None)

    def finish(self) -> writing.BakeResult | None:
        """Write the bake's keys and turn the hands and feet back to the clip's orientation; let go (where the bake
        fails, with live solving on: the clip's pose is keyed and live solving corrects the ends)."""
        live = None
        try:
            while not self.done:
                self.step()
            live = True
            if self.baker is not None:
                self.result = self.baker.finish(new_action=False, keep_live=False)
                self._turn_ends()
            live = not self.bake_it
        finally:
            self.let_go(live if self.written else None)
        return self.result

    def _turn_ends(self) -> None:
        """Key each hand's and foot's rotation so that, on the forearm and shin as solved, it turns as the clip's."""
        baker, copy = self.baker, self.copy
        pairs = setup.mapping(self.obj)
        index = {name: k for k, name in enumerate(copy.names)}
        good = baker.solved[:, None, None]
        solved = {}
        for _, upper, lower, _, _ in LIMBS:
            for role in (upper, lower):
                name = pairs[role][1]
                if name in baker.bones and name in index:
                    solved[name] = np.where(good, baker.locals[:, baker.bones.index(name)], copy.local[index[name]])
        local = copy.turned_ends(solved)
        frames = np.asarray(self.frames, dtype=np.float64)
        collection = animdata.fcurves(self.obj, create=True)
        for _, _, _, end, beyond in LIMBS:
            for role in (end, beyond):
                if role in pairs:
                    write_rotation(self.obj, collection, pairs[role][1], local[pairs[role][1]], frames,
                                   (frames[0], frames[-1]))


def write_rotation(obj: bpy.types.Object, collection, name: str, local: np.ndarray, frames: np.ndarray, span) -> None:
    """Key a pose bone's local rotations (F, 3, 3) in its own rotation mode, replacing its keys in the span."""
    pose_bone = obj.pose.bones[name]
    mode = pose_bone.rotation_mode
    path, size = armature.rotation_channel(mode)
    if mode == 'QUATERNION':
        values = continuous_quaternions(local)
    else:
        values = np.empty((len(local), size))
        before = armature.rotation_value(pose_bone)
        for i, m in enumerate(local):
            values[i] = before = armature.channel_value(mode, m, before)
    escaped = bpy.utils.escape_identifier(name)
    for index in range(size):
        fcurve = animdata.ensure_fcurve(collection, f'pose.bones["{escaped}"].{path}', index, name)
        keys.write_keys(fcurve, frames, values[:, index], span)
