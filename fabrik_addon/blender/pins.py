# SPDX-License-Identifier: GPL-3.0-or-later
"""Pins: an effector's target held where it was in world space over keyed frame ranges.

An effector's Pin (0 to 1, keyable) blends its target's world matrix
towards its Pin Location and Pin Rotation, which are keyed with constant
interpolation at the start of each pinned range: the solve pulls the tip to
where the target was when the pin was planted, while the rest of the rig
moves. Every solve reads its goals through `held_world`, so live frames and
every kind of bake hold the same pose.

The keys live on the rig's action under the effector's name (its index
changes when effectors are moved), beside any other animation of the rig.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import bpy
import numpy as np
from mathutils import Matrix, Quaternion, Vector

from ..core import contacts
from . import animdata, constraints, rig

#: The pin properties keyed per range, and the F-curve group they are keyed in.
KEYED = ("pin", "pin_location", "pin_rotation")
GROUP = "FABRIK Pins"


def held_world(world: Matrix, effector) -> Matrix:
    """The target's world matrix as the effector's pin holds it (its Pin Location and Rotation blended in by Pin;
    `effector` is the effector or its `EffectorValues`)."""
    pin = effector.pin
    if not pin > 0.0:
        return world
    location, rotation, scale = world.decompose()
    location = location.lerp(Vector(effector.pin_location), min(pin, 1.0))
    rotation = rotation.slerp(Quaternion(effector.pin_rotation).normalized(), min(pin, 1.0))
    return Matrix.LocRotScale(location, rotation, scale)


def problem(effector) -> str | None:
    """Why the effector's pin cannot be used (a value that is not a number), or None."""
    pin = effector.pin
    if not (isinstance(pin, float) and 0.0 <= pin <= 1.0):
        return "its pin is not a number from 0 to 1"
    if pin > 0.0:
        if not all(math.isfinite(c) for c in effector.pin_location):
            return "its pin location is not a number"
        rotation = tuple(effector.pin_rotation)
        if not all(math.isfinite(c) for c in rotation) or sum(c * c for c in rotation) < 1e-12:
            return "its pin rotation is not a rotation"
    return None


def is_pin_path(path: str) -> bool:
    """Whether a data path animates an effector's pin."""
    return path.startswith("fabrik.effectors[") and path.rsplit(".", 1)[-1] in KEYED


def read_again(values, effector, solved: tuple) -> tuple | None:
    """Read the effector's pin into its `EffectorValues` again, and its properties snapshot (`solved()`) with the
    pin as it is now; None where the pin cannot be used."""
    values.pin = effector.pin
    values.pin_location, values.pin_rotation = tuple(effector.pin_location), tuple(effector.pin_rotation)
    if problem(values):
        return None
    return solved[: -len(KEYED)] + (values.pin, values.pin_location, values.pin_rotation)


def _path(effector, prop: str) -> str:
    """The data path of one of the effector's pin properties, by its name."""
    return f'fabrik.effectors["{bpy.utils.escape_identifier(effector.name)}"].{prop}'


def named(obj, effector) -> None:
    """Give the effector a name its keys can find it by, where it has none."""
    if not effector.name:
        effector.name = constraints.unique_name(obj.fabrik, effector.bone or "Effector")


class Span(NamedTuple):
    """A pinned range: held fully from `first` to `last`, blending in from `first - blend_in` and out until
    `last + blend_out`."""

    first: int
    last: int
    blend_in: int
    blend_out: int

    @property
    def keyed(self) -> tuple[int, int]:
        """The frames its keys lie on, first to last."""
        return self.first - self.blend_in, self.last + self.blend_out


def _curves(obj, effector, create: bool) -> dict[tuple[str, int], object]:
    """The effector's pin F-curves by (property, index); made where `create`."""
    collection = animdata.fcurves(obj, create=create)
    if collection is None:
        return {}
    found = {}
    for prop, size in (("pin", 1), ("pin_location", 3), ("pin_rotation", 4)):
        for index in range(size):
            path = _path(effector, prop)
            curve = collection.find(path, index=index)
            if curve is None and create:
                curve = animdata.ensure_fcurve(collection, path, index, GROUP)
            if curve is not None:
                found[prop, index] = curve
    return found


def _remove_keys(curve, low: float, high: float) -> int:
    """Remove the curve's keys from frame low to high; how many."""
    points = curve.keyframe_points
    gone = [i for i, point in enumerate(points) if low - 1e-4 <= point.co[0] <= high + 1e-4]
    for i in reversed(gone):
        points.remove(points[i], fast=True)
    curve.update()
    return len(gone)


def _insert(curve, frame: int, value: float, interpolation: str) -> None:
    """One key, replacing any on that frame."""
    point = curve.keyframe_points.insert(frame, value, options={'FAST'})
    point.interpolation = interpolation


def key_span(obj, effector, span: Span, world: Matrix) -> None:
    """Key a pin over `span` holding the target's world matrix `world` (where it was planted): Pin 0 at the
    span's keyed ends and 1 from `first` to `last`, the location and rotation from where it begins blending in.
    Keys of the effector's pins within the span's keyed frames are replaced."""
    named(obj, effector)
    animdata.ensure_action(obj, False, f"{obj.name}Action")
    curves = _curves(obj, effector, create=True)
    low, high = span.keyed
    for curve in curves.values():
        _remove_keys(curve, low, high)
    pin = curves["pin", 0]
    _insert(pin, low, 0.0, 'LINEAR')
    _insert(pin, span.first, 1.0, 'LINEAR')
    _insert(pin, span.last, 1.0, 'LINEAR')
    _insert(pin, high, 0.0, 'LINEAR')
    location, rotation, _ = world.decompose()
    for index, value in enumerate(location):
        _insert(curves["pin_location", index], low, value, 'CONSTANT')
    for index, value in enumerate(rotation.normalized()):
        _insert(curves["pin_rotation", index], low, value, 'CONSTANT')
    for curve in curves.values():
        curve.update()


def clear(obj, effector, low: float | None = None, high: float | None = None) -> int:
    """Remove the effector's pin keys (from frame low to high; None: all of them) and, with none left, its pin
    F-curves, Pin back to 0: how many keys went."""
    curves = _curves(obj, effector, create=False)
    removed = 0
    for curve in curves.values():
        removed += _remove_keys(curve, -math.inf if low is None else low, math.inf if high is None else high)
    collection = animdata.fcurves(obj)
    if collection is not None and all(len(curve.keyframe_points) == 0 for curve in curves.values()):
        for curve in curves.values():
            collection.remove(curve)
        effector.pin = 0.0
    return removed


def spans(obj, effector) -> list[tuple[int, int]]:
    """The ranges of frames the effector's keyed pin holds fully (Pin 1), in order."""
    curve = _curves(obj, effector, create=False).get(("pin", 0))
    if curve is None:
        return []
    keys = sorted((round(p.co[0]), p.co[1]) for p in curve.keyframe_points)
    found, begun = [], None
    for frame, value in keys:
        if value >= 1.0 - 1e-6 and begun is None:
            begun = frame
        elif value < 1.0 - 1e-6 and begun is not None:
            found.append((begun, last))
            begun = None
        last = frame
    if begun is not None:
        found.append((begun, last))
    return found


def chain_reach(obj, effector) -> float:
    """The length of the effector's chain in world units (its bones end to end, scaled as the rig is)."""
    bones = obj.data.bones
    names = rig.chain_bones(obj, effector.bone, effector.chain_length)
    scale = sum(obj.matrix_world.to_scale()) / 3.0
    return scale * sum(bones[name].length for name in names)


class ContactFinder:
    """Find Contacts, in steps (a modal operator shows progress and cancels between them): sample the chosen
    effectors' targets (`source` 'TARGETS') or their tips as the scene plays them ('TIPS') once a frame, find
    where each is planted (`core.contacts`) and key a pin over each contact, holding what was sampled on its
    first frame. Nothing is keyed before `finish`; live solving is off while targets are sampled (they do not
    need it) and the frame goes back afterwards."""

    def __init__(self, scene, obj, indices: list[int], frames: range, speed: float, height: float,
                 shortest: int, blend: int, source: str = 'TARGETS') -> None:
        if len(frames) < 2:
            raise ValueError("the frame range needs at least two frames")
        effectors = obj.fabrik.effectors
        chosen = [i for i in indices if effectors[i].enabled and effectors[i].target is not None
                  and effectors[i].bone in obj.data.bones]
        if not chosen:
            raise ValueError("no enabled effector with a target and a tip bone to find contacts for")
        self.scene, self.obj, self.indices, self.frames = scene, obj, chosen, frames
        self.speed, self.height, self.shortest, self.blend = speed, height, shortest, blend
        self.tips = source == 'TIPS'
        self.index = 0
        self._matrices = {i: [] for i in chosen}
        self._frame_before, self._live_before = scene.frame_current, obj.fabrik.live
        if not self.tips:
            obj.fabrik.live = False

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
        from .goals import world_matrix  # (goals imports this module)

        self.scene.frame_set(self.frames[self.index])
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = self.obj.evaluated_get(depsgraph)
        for i in self.indices:
            effector = self.obj.fabrik.effectors[i]
            if self.tips:
                bone = evaluated.pose.bones[effector.bone]
                turned = (evaluated.matrix_world @ bone.matrix).to_quaternion()
                matrix = Matrix.LocRotScale(evaluated.matrix_world @ bone.tail, turned, None)
            else:
                matrix = world_matrix(effector.target, effector.subtarget, depsgraph).copy()
            self._matrices[i].append(matrix)
        self.index += 1

    def _restore(self) -> None:
        """Put the frame and live solving back."""
        self.obj.fabrik.live = self._live_before
        self.scene.frame_set(self._frame_before)

    def cancel(self) -> None:
        """Stop, having keyed nothing."""
        self._restore()

    def finish(self) -> dict[str, list[Span]]:
        """Key a pin over each contact found (replacing the chosen effectors' pin keys in the frame range): per
        effector name, its spans."""
        effectors = self.obj.fabrik.effectors
        keyed = {}
        first, step = self.frames[0], self.frames.step
        for i in self.indices:
            effector = effectors[i]
            reach = max(chain_reach(self.obj, effector), 1e-9)
            points = np.array([m.translation for m in self._matrices[i]])
            found = contacts.find(points, self.speed * reach, self.height * reach, self.shortest)
            clear(self.obj, effector, self.frames[0], self.frames[-1])
            spans_ = []
            for contact, (blend_in, blend_out) in zip(found, contacts.blends(found, self.blend, len(points))):
                span = Span(first + step * contact.first, first + step * contact.last, step * blend_in,
                            step * blend_out)
                key_span(self.obj, effector, span, self._matrices[i][contact.first])
                spans_.append(span)
            keyed[effector.name or effector.bone] = spans_
        self._restore()
        return keyed
