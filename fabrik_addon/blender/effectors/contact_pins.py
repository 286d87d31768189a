# SPDX-License-Identifier: GPL-3.0-or-later
"""Find Contacts in the scene: sample the effectors' targets (or tips) frame by frame and pin each contact.

The sampling runs in steps, so a modal operator shows progress and Esc
cancels between them (`long_work`); nothing is keyed before `finish`, and the
frame and live solving go back as they were. Finding the contacts in the
samples is `core.motion.contacts`; keying the pins is `pins`.
"""

from __future__ import annotations

import math

import bpy
import numpy as np
from mathutils import Matrix

from ...core.motion import contacts
from .. import long_work
from ..rig import armature
from ..rig.props import FabrikEffector
from . import integrity, pins
from .effector_goals import EffectorError, world_matrix

#: Where Find Contacts looks: the targets' animation, or the tips as the scene plays them.
SOURCES = ('TARGETS', 'TIPS')
#: Its defaults (`core.motion.contacts`): speed a frame and height above the lowest point (shares of the chain's length),
#: the shortest contact and the blend frames.
SPEED, HEIGHT, SHORTEST, BLEND = contacts.SPEED, contacts.HEIGHT, contacts.SHORTEST, contacts.BLEND


def chain_reach(obj: bpy.types.Object, effector: FabrikEffector) -> float:
    """The length of the effector's chain in world units (its bones end to end, scaled as the rig is)."""
    bones = obj.data.bones
    names = armature.chain_bones(obj, effector.bone, effector.chain_length)
    return armature.mean_scale(obj) * sum(bones[name].length for name in names)


def _unusable(obj: bpy.types.Object, index: int, depsgraph: bpy.types.Depsgraph, source: str) -> str | None:
    """Why Find Contacts cannot look at an effector, or None."""
    effector = obj.fabrik.effectors[index]
    if not effector.enabled:
        return "it is switched off"
    if effector.bone not in obj.data.bones:
        return f"no bone '{effector.bone}' in '{obj.data.name}'"
    if source == 'TIPS':
        return None
    if effector.target is None:
        return "it has no target"
    try:
        world_matrix(effector.target, effector.subtarget, depsgraph)
    except EffectorError as exc:
        return str(exc)
    return integrity.effector_problem(obj, index, depsgraph)


class ContactFinder(long_work.SceneWork):
    """Find Contacts, in steps (see the module)."""

    noun = "Find Contacts"

    def __init__(
        self, scene: bpy.types.Scene, obj: bpy.types.Object, indices: list[int], frames: range, speed: float = SPEED,
        height: float = HEIGHT, shortest: int = SHORTEST, blend: int = BLEND, source: str = 'TARGETS'
    ) -> None:
        if len(frames) < 2:
            raise ValueError("the frame range needs at least two frames")
        if not (math.isfinite(speed) and math.isfinite(height) and speed >= 0.0 and height >= 0.0):
            raise ValueError("the Speed and Height must be numbers of 0 or more")
        if source not in SOURCES:
            raise ValueError(f"no source '{source}': look at one of {', '.join(SOURCES)}")
        effectors = obj.fabrik.effectors
        depsgraph = bpy.context.evaluated_depsgraph_get()
        #: Per effector left out, why.
        self.skipped: dict[str, str] = {}
        chosen = []
        for i in indices:
            effector = effectors[i]
            why = _unusable(obj, i, depsgraph, source)
            if why:
                self.skipped[effector.name or effector.bone or f"effector {i + 1}"] = why
            else:
                chosen.append(i)
        if not chosen:
            reasons = "; ".join(f"{name}: {why}" for name, why in self.skipped.items())
            raise ValueError("no effector to find contacts for" + (f" ({reasons})" if reasons else ""))
        self.indices, self.frames = chosen, frames
        self.speed, self.height, self.shortest, self.blend = speed, height, shortest, blend
        self.tips = source == 'TIPS'
        self.index = 0
        self._matrices = {i: [] for i in chosen}
        self.hold(scene, obj, live_off=not self.tips)  # (the targets do not need live solving; the tips do)

    @property
    def done(self) -> bool:
        """Whether every frame has been sampled."""
        return self.index >= len(self.frames)

    @property
    def progress(self) -> tuple[int, int]:
        """(frames sampled, frames in all)."""
        return self.index, len(self.frames)

    def step(self) -> None:
        """Sample the next frame."""
        self.check()
        self.scene.frame_set(self.frames[self.index])
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = self.obj.evaluated_get(depsgraph)
        for i in list(self.indices):
            effector = self.obj.fabrik.effectors[i]
            if self.tips:
                bone = evaluated.pose.bones[effector.bone]
                turned = (evaluated.matrix_world @ bone.matrix).to_quaternion()
                matrix = Matrix.LocRotScale(evaluated.matrix_world @ bone.tail, turned, None)
            else:
                try:
                    matrix = world_matrix(effector.target, effector.subtarget, depsgraph).copy()
                except (EffectorError, ReferenceError, AttributeError) as exc:
                    self.skipped[effector.name or effector.bone] = str(exc) or "its target is gone"
                    self.indices.remove(i)
                    continue
            self._matrices[i].append(matrix)
        self.index += 1

    def run(self) -> tuple[dict[str, list[pins.Span]], int]:
        """Every step and `finish`, at once."""
        while not self.done:
            self.step()
        return self.finish()

    def cancel(self) -> None:
        """Stop, having keyed nothing."""
        self.let_go()

    def finish(self) -> tuple[dict[str, list[pins.Span]], int]:
        """Key a pin over each contact found, replacing the chosen effectors' pins in the frame range: per effector
        name its spans, and how many pin keys were replaced."""
        try:
            effectors = self.obj.fabrik.effectors
            found = {}
            for i in self.indices:  # (every contact first: nothing is keyed if one effector's samples fail)
                points = np.array([m.translation for m in self._matrices[i]])
                if not np.isfinite(points).all():
                    self.skipped[effectors[i].name or effectors[i].bone] = "its target is not at a finite location"
                    continue
                reach = max(chain_reach(self.obj, effectors[i]), 1e-9)
                runs = contacts.find(points, self.speed * reach, self.height * reach, self.shortest)
                found[i] = [
                    pins.Span(self.frames[c.first], self.frames[c.last], blend_in, blend_out)
                    for c, (blend_in, blend_out) in zip(runs, contacts.blends(runs, self.blend, len(points)))
                ]
            keyed, replaced = {}, 0
            for i, spans in found.items():
                effector = effectors[i]
                replaced += pins.clear(self.obj, effector, self.frames[0], self.frames[-1])
                for span in spans:
                    replaced += pins.key_span(self.obj, effector, span, self._matrices[i][span.first - self.frames[0]])
                keyed[effector.name or effector.bone] = spans
        finally:
            self.let_go()
        return keyed, replaced
