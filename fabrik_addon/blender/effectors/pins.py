# SPDX-License-Identifier: GPL-3.0-or-later
"""Pins: an effector's target held where it was in world space over keyed frame ranges.

An effector's Pin (0 to 1, keyable) blends its target's world matrix
towards its Pin Location (and, for a rotation goal, its Pin Rotation), which
are keyed with constant interpolation where each pinned range begins to
blend in: the solve pulls the tip to where the target was when the pin was
planted, while the rest of the rig moves. Every solve reads its goals
through `held_world`, so live frames and every kind of bake hold the same
pose.

The keys live on the rig's action under the effector's name, which stays
when effectors are moved (an index would not); the name they were keyed
under is kept on the effector (Pinned As), so a renamed effector's keys
follow it (`follow_renames`), and a removed effector's keys go with it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import bpy
from mathutils import Matrix, Quaternion, Vector

from ..rig import animdata, props
from ..rig.props import FabrikEffector

#: The pin properties keyed per range, and the F-curve group they are keyed in.
KEYED = ("pin", "pin_location", "pin_rotation")
SIZES = {"pin": 1, "pin_location": 3, "pin_rotation": 4}
GROUP = "FABRIK Pins"


def held_world(world: Matrix, effector: FabrikEffector) -> Matrix:
    """The target's world matrix as the effector's pin holds it (`effector`: the effector or its values)."""
    pin = min(effector.pin, 1.0)
    if not pin > 0.0:
        return world
    location, rotation, scale = world.decompose()
    location = location.lerp(Vector(effector.pin_location), pin)
    if effector.use_rotation:  # (only a rotation goal reads it)
        rotation = rotation.slerp(Quaternion(effector.pin_rotation).normalized(), pin)
    return Matrix.LocRotScale(location, rotation, scale)


def problem(effector: FabrikEffector) -> str | None:
    """Why the effector's pin cannot be used (a value that is not a number), or None."""
    pin = effector.pin
    if not (isinstance(pin, float) and 0.0 <= pin <= 1.0):
        return "its pin is not a number from 0 to 1"
    if pin > 0.0:
        if not all(math.isfinite(c) for c in effector.pin_location):
            return "its pin location is not a number"
        rotation = tuple(effector.pin_rotation)
        if effector.use_rotation and (
            not all(math.isfinite(c) for c in rotation) or sum(c * c for c in rotation) < 1e-12
        ):
            return "its pin rotation is not a rotation"
    return None


def is_pin_path(path: str) -> bool:
    """Whether a data path animates an effector's pin."""
    return path.startswith("fabrik.effectors[") and path.rsplit(".", 1)[-1] in KEYED


def read_again(values, effector: FabrikEffector, solved: tuple) -> tuple | None:
    """The effector's pin read again into its values, and its snapshot (`solved()`) with it; None where unusable."""
    values.pin = effector.pin
    values.pin_location, values.pin_rotation = tuple(effector.pin_location), tuple(effector.pin_rotation)
    if problem(values):
        return None
    return solved[: -len(KEYED)] + (values.pin, values.pin_location, values.pin_rotation)


def range_text(ranges) -> str:
    """Frame ranges as reports and the panel write them."""
    return ", ".join(f"{first}-{last}" for first, last in ranges)


def _prefix(key: str) -> str:
    """The data path of the effector named `key`."""
    return f'fabrik.effectors["{bpy.utils.escape_identifier(key)}"]'


def _index_prefix(obj: bpy.types.Object, effector: FabrikEffector) -> str | None:
    """The data path by index of the effector (where keys set by hand on an unnamed effector put it)."""
    for i, other in enumerate(obj.fabrik.effectors):
        if other.as_pointer() == effector.as_pointer():
            return f"fabrik.effectors[{i}]"
    return None


def _key_of(effector: FabrikEffector) -> str:
    """The name the effector's keys are under: the one they were keyed under, else its own."""
    return effector.pin_key or effector.name


def _curves(obj: bpy.types.Object, effector: FabrikEffector) -> dict[tuple[str, int], object]:
    """The effector's pin F-curves by (property, index), found under the name they were keyed under, its name, or
    its index (read only: a panel may ask)."""
    collection = animdata.fcurves(obj)
    if collection is None:
        return {}
    prefixes = [p for p in (_prefix(_key_of(effector)) if _key_of(effector) else None, _index_prefix(obj, effector))
                if p is not None]
    found = {}
    for prop in KEYED:
        for index in range(SIZES[prop]):
            for prefix in prefixes:
                curve = collection.find(f"{prefix}.{prop}", index=index)
                if curve is not None:
                    found[prop, index] = curve
                    break
    return found


def _own_curves(obj: bpy.types.Object, effector: FabrikEffector) -> dict[tuple[str, int], object]:
    """The effector's pin F-curves, made where missing, all under its own name (those found elsewhere moved
    there): what keying writes into."""
    if not effector.name:
        effector.name = props.unique_name(obj.fabrik, effector.bone or "Effector")
    animdata.ensure_action(obj, False, f"{obj.name}Action")
    collection = animdata.fcurves(obj, create=True)
    prefix = _prefix(effector.name)
    found = _curves(obj, effector)
    for (prop, index), curve in found.items():
        curve.data_path = f"{prefix}.{prop}"
    effector.pin_key = effector.name
    for prop in KEYED:
        for index in range(SIZES[prop]):
            if (prop, index) not in found:
                found[prop, index] = animdata.ensure_fcurve(collection, f"{prefix}.{prop}", index, GROUP)
    return found


def follow_renames(obj: bpy.types.Object) -> list[str]:
    """Move the pin keys of every renamed effector under its new name (all found before any moves, so effectors
    that swapped names swap keys), and set its pin as they say on this frame; what moved."""
    effectors = obj.fabrik.effectors
    names = [e.name for e in effectors]
    renamed = [e for e in effectors if e.pin_key and e.name and e.pin_key != e.name]
    found = [(e, _curves(obj, e)) for e in renamed if names.count(e.name) == 1]  # (a name twice: none is moved)
    frame = bpy.context.scene.frame_current if bpy.context.scene is not None else 0
    moved = []
    for effector, curves in found:
        old, prefix = effector.pin_key, _prefix(effector.name)
        for (prop, index), curve in curves.items():
            curve.data_path = f"{prefix}.{prop}"
            value = curve.evaluate(frame)  # (this frame was evaluated under the old name)
            if SIZES[prop] == 1:
                setattr(effector, prop, value)
            else:
                getattr(effector, prop)[index] = value
        effector.pin_key = effector.name
        if curves:
            moved.append(f"the pins of '{old}' follow it, renamed '{effector.name}'")
    return moved


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


def _remove_keys(curve: bpy.types.FCurve, low: float, high: float, inclusive: bool = True) -> int:
    """Remove the curve's keys from frame low to high (without the ends unless `inclusive`); how many."""
    points = curve.keyframe_points
    eps = 1e-4 if inclusive else -1e-4
    gone = [i for i, point in enumerate(points) if low - eps <= point.co[0] <= high + eps]
    for i in reversed(gone):
        points.remove(points[i], fast=True)
    curve.update()
    return len(gone)


def _widened(curve: bpy.types.FCurve, low: float, high: float) -> tuple[float, float]:
    """Frames low to high, widened to the whole of any pin they begin or end inside: back to the key at 0 before
    it, on to the key at 0 after it."""
    keys = sorted((point.co[0], point.co[1]) for point in curve.keyframe_points)
    if not keys:
        return low, high
    # (a pin without a key at 0 on that side, its key deleted, is held to the end: all of it goes)
    if curve.evaluate(low) > 0.0:
        low = max((f for f, v in keys if f <= low and v <= 0.0), default=-math.inf)
    if curve.evaluate(high) > 0.0:
        high = min((f for f, v in keys if f >= high and v <= 0.0), default=math.inf)
    return low, high


def _clear_between(curves: dict, low: float, high: float) -> int:
    """Remove the pins from frame low to high, and the whole of any pin begun or ended inside (its keys at 0 on
    the far side stay, as may a next pin's location keyed there); how many pin keys went."""
    pin = curves.get(("pin", 0))
    wide_low, wide_high = _widened(pin, low, high) if pin is not None else (low, high)
    removed = 0
    for (prop, _), curve in curves.items():
        if prop == "pin":
            removed += _remove_keys(curve, low, high) + _remove_keys(curve, wide_low, wide_high, inclusive=False)
        else:  # (the location of a pin is keyed where it begins: one beginning at the far end stays)
            _remove_keys(curve, wide_low, wide_high - 2e-4)
    return removed


def _insert(curve: bpy.types.FCurve, frame: int, value: float, interpolation: str) -> None:
    """One key, replacing any on that frame."""
    point = curve.keyframe_points.insert(frame, value, options={'FAST'})
    point.interpolation = interpolation


def key_span(obj: bpy.types.Object, effector: FabrikEffector, span: Span, world: Matrix) -> int:
    """Key a pin over `span` holding the target's world matrix `world`, replacing the pins it overlaps; how many
    pin keys it replaced."""
    curves = _own_curves(obj, effector)
    low, high = span.keyed
    replaced = _clear_between(curves, low, high)
    pin = curves["pin", 0]
    for frame, value in ((low, 0.0), (span.first, 1.0), (span.last, 1.0), (high, 0.0)):
        _insert(pin, frame, value, 'LINEAR')
    location, rotation, _ = world.decompose()
    for index, value in enumerate(location):
        _insert(curves["pin_location", index], low, value, 'CONSTANT')
    for index, value in enumerate(rotation.normalized()):
        _insert(curves["pin_rotation", index], low, value, 'CONSTANT')
    for curve in curves.values():
        curve.update()
    return replaced


def clear(obj: bpy.types.Object, effector: FabrikEffector, low: float | None = None, high: float | None = None) -> int:
    """Remove the effector's pins (those from frame low to high; None: all), and its pin F-curves once none are
    left, with Pin back to 0; how many pin keys went."""
    curves = _curves(obj, effector)
    if not curves:
        return 0
    if low is None:
        removed = len(curves["pin", 0].keyframe_points) if ("pin", 0) in curves else 0
        for curve in curves.values():
            _remove_keys(curve, -math.inf, math.inf)
    else:
        removed = _clear_between(curves, low, high)
    pin = curves.get(("pin", 0))
    if pin is None or all(point.co[1] <= 0.0 for point in pin.keyframe_points):
        collection = animdata.fcurves(obj)
        for curve in curves.values():
            collection.remove(curve)
        effector.pin, effector.pin_key = 0.0, ""
    return removed


def spans(obj: bpy.types.Object, effector: FabrikEffector) -> list[tuple[int, int]]:
    """The ranges of frames the effector's keyed pin holds fully (Pin 1), in order."""
    curve = _curves(obj, effector).get(("pin", 0))
    if curve is None:
        return []
    found, begun, last = [], None, None
    # (a key on a frame that is no number, which a script can make, holds no frame: the others still count)
    keys = [(p.co[0], p.co[1]) for p in curve.keyframe_points if math.isfinite(p.co[0])]
    for frame, value in sorted((round(frame), value) for frame, value in keys):
        if value >= 1.0 - 1e-6 and begun is None:
            begun = frame
        elif value < 1.0 - 1e-6 and begun is not None:
            found.append((begun, last))
            begun = None
        last = frame
    if begun is not None:
        found.append((begun, last))
    return found
