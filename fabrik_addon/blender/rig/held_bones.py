# SPDX-License-Identifier: GPL-3.0-or-later
"""What live solving holds per rig: for each bone it wrote, the value it wrote and the animator's value under it.

Kept in the file with the rig (so a reload solves from the same pose, and
live solving off gives the animator's channels back) as a few flat arrays in
the rig's settings, not as a collection of groups. Every pose write tags the
rig, and Blender then copies the whole object for evaluation, ID properties
included: a group per bone made that copy grow with the bones, a handful of
arrays costs it next to nothing.

For a library override the entries live in the rig's memory instead:
Blender keeps no property we could add to an override in its file. Files from before this
layout hold a `fabrik.held` collection (`props.FabrikHeldBone`): the first
`held_bones` of such a rig moves its entries into the arrays.

Below the storage: holding itself. Each write keeps, per bone, the value
written and the animator's value it replaced (`hold`); the next solve reads
the animator's value back where the channel still holds what was written
(`animator_values`), or what its animation gives this frame; live solving off
gives it back (`channels.give_back`).
"""

from __future__ import annotations

import array
import json
import math

import bpy
import numpy as np
from mathutils import Vector

from ...core import Skeleton
from . import animdata, armature, compat, memory

#: Where the arrays live in the rig's settings.
KEY = "held_bones"

#: Each per-bone vector kept, with its size (single precision, as the channels hold them).
VECTORS = {
    "written": 4, "fk": 4, "head": 3, "written_scale": 3, "fk_scale": 3,
    # (a root that moves: its location and rotation channels, `root`)
    "written_location": 3, "fk_location": 3, "written_turn": 4, "fk_turn": 4,
}
#: Each per-bone integer kept (flags and the bone's place among the armature's bones).
INTEGERS = ("rotated", "scaled", "moved", "index")
#: Each per-bone string kept, as one JSON list each.
STRINGS = ("name", "mode")
#: A new entry's values.
_NEW = {"written": (0.0,) * 4, "fk": (0.0,) * 4, "head": (0.0,) * 3, "written_scale": (0.0,) * 3,
        "fk_scale": (1.0,) * 3, "written_location": (0.0,) * 3, "fk_location": (0.0,) * 3,
        "written_turn": (0.0,) * 4, "fk_turn": (0.0,) * 4, "rotated": 0, "scaled": 0, "moved": 0, "index": -1,
        "name": "", "mode": ""}
_BOOLEANS = ("rotated", "scaled", "moved")
#: What an entry of the older layout (`props.FabrikHeldBone`) holds.
_LEGACY = ("written", "fk", "head", "written_scale", "fk_scale", "rotated", "scaled", "index", "mode")

#: JSON lists read, parsed: per text, (the list, each item's first place). Most reads find a text read before.
_parsed: dict[str, tuple[list[str], dict[str, int]]] = {}


class HeldBones:
    """The held entries of one rig, kept in `store` (the rig's settings' ID properties, or a dict in memory): the
    parts of a collection the add-on uses (length, names, entries by name or place, add, clear), and bulk reads
    and writes of the arrays themselves (`column`, `vectors`, `set_strings`)."""

    def __init__(self, store, in_memory: bool = False, make=None) -> None:
        #: Where the entries are kept; None where the rig keeps none yet (`make` makes the store on the first add).
        self.store = store
        self._make = make
        #: True where the entries live in memory (a library override's).
        self.in_memory = in_memory

    def __len__(self) -> int:
        rotated = self.store.get("rotated") if self.store is not None else None
        return 0 if rotated is None else len(rotated)

    def keys(self) -> list[str]:
        """The bones' names, in the entries' order."""
        return list(self._strings("name"))

    def modes(self) -> list[str]:
        """Each entry's rotation mode when its rotation was written."""
        return list(self._strings("mode"))

    def __iter__(self):
        return iter([HeldBone(self, i) for i in range(len(self))])

    def __getitem__(self, key):
        if isinstance(key, str):
            entry = self.get(key)
            if entry is None:
                raise KeyError(key)
            return entry
        if not -len(self) <= key < len(self):
            raise IndexError(key)
        return HeldBone(self, key % len(self))

    def get(self, name: str) -> HeldBone | None:
        index = self._parsed("name")[1].get(name)
        return None if index is None else HeldBone(self, index)

    def add(self, names: list[str]) -> list[HeldBone]:
        """New entries at the end, one per bone name (other values as `_NEW`), made at once: each array is made
        anew for any number of them."""
        if self.store is None:
            self.store = self._make()
        count, added = len(self), len(names)
        old = {name: list(self._array(name, 'f' if name in VECTORS else 'i')) for name in (*VECTORS, *INTEGERS)}
        for name in VECTORS:
            self._replace(name, array.array('f', [*old[name], *_NEW[name] * added]))
        for name in INTEGERS:
            self._replace(name, array.array('i', [*old[name], *(_NEW[name],) * added]))
        self._set_strings("name", [*self._strings("name"), *names])
        self._set_strings("mode", [*self._strings("mode"), *(_NEW["mode"],) * added])
        return [HeldBone(self, i) for i in range(count, count + added)]

    def clear(self) -> None:
        for name in (*VECTORS, *INTEGERS, *(name + "s" for name in STRINGS)):
            if self.store is not None and name in self.store:
                del self.store[name]

    def column(self, name: str) -> np.ndarray:
        """Every entry's `name` value as an array ((count, size) for a vector; flags as integers), viewing the
        stored values: what is set in it is set where they are kept (until the next `add`)."""
        values = np.asarray(memoryview(self._array(name, 'f' if name in VECTORS else 'i')))
        return values.reshape(len(self), VECTORS[name]) if name in VECTORS else values

    def vectors(self, name: str, rows: list[int], values: list) -> None:
        """Set the `name` vectors of the entries at `rows` to `values` (a shorter value padded with zeros)."""
        if not rows:
            return
        view = self.column(name)
        size = view.shape[1]
        if all(len(value) == size for value in values):
            view[rows] = values
        else:
            view[rows] = [(*value, *(0.0,) * (size - len(value))) for value in values]

    def set_strings(self, name: str, values: dict[int, str]) -> None:
        """Set some entries' `name` string ({entry index: value}) at once."""
        strings = list(self._strings(name))
        for i, value in values.items():
            strings[i] = value
        self._set_strings(name, strings)

    def _replace(self, name: str, values) -> None:
        # (an ID property array set to a longer one of its type keeps its length and writes past its end: a new one)
        if name in self.store:
            del self.store[name]
        self.store[name] = values

    def _array(self, name: str, typecode: str):
        values = self.store.get(name) if self.store is not None else None
        if values is None:
            values = array.array(typecode)
        size = VECTORS.get(name, 1)
        short = len(self) - len(values) // size
        if short > 0 and self.store is not None:  # (a file from before this kind of entry: each entry gets its new value)
            new = _NEW[name] if name in VECTORS else (_NEW[name],)
            self._replace(name, array.array(typecode, [*values, *new * short]))
            values = self.store[name]
        return values

    def _strings(self, name: str) -> list[str]:
        return self._parsed(name)[0]

    def _parsed(self, name: str) -> tuple[list[str], dict[str, int]]:
        text = self.store.get(name + "s") if self.store is not None else None
        if text is None:
            return [], {}
        parsed = _parsed.get(text)
        if parsed is None:
            if len(_parsed) > 256:
                _parsed.clear()
            values = json.loads(text)
            parsed = _parsed[text] = (values, {value: i for i, value in reversed(list(enumerate(values)))})
        return parsed

    def _set_strings(self, name: str, values: list[str]) -> None:
        self._replace(name + "s", json.dumps(values))


class HeldBone:
    """One held entry: attributes read and set where the entry is kept (vectors as tuples, flags as bools)."""

    __slots__ = ("_held", "_index")

    def __init__(self, held: HeldBones, index: int) -> None:
        object.__setattr__(self, "_held", held)
        object.__setattr__(self, "_index", index)

    def __getattr__(self, name: str):
        held, i = self._held, self._index
        if name in VECTORS:
            size = VECTORS[name]
            return tuple(held._array(name, 'f')[i * size:(i + 1) * size])
        if name in INTEGERS:
            value = held._array(name, 'i')[i]
            return bool(value) if name in _BOOLEANS else value
        if name in STRINGS:
            return held._strings(name)[i]
        raise AttributeError(name)

    def __setattr__(self, name: str, value) -> None:
        held, i = self._held, self._index
        if name in VECTORS:
            size = VECTORS[name]
            held._array(name, 'f')[i * size:(i + 1) * size] = array.array('f', tuple(value))
        elif name in INTEGERS:
            held._array(name, 'i')[i] = int(value)
        elif name in STRINGS:
            held.set_strings(name, {i: value})
        else:
            raise AttributeError(name)


def held_bones(obj: bpy.types.Object) -> HeldBones:
    """Where live solving keeps obj's held entries: in its settings, in the file; for a library override, in the
    rig's memory (for this session: live solving off still gives the animator's pose back)."""
    if getattr(obj, "override_library", None) is not None:
        kept = memory.of(obj)
        if kept.held is None:
            kept.held = HeldBones({}, in_memory=True)
        return kept.held
    settings = _settings_store(obj)
    held = HeldBones(settings.get(KEY) if settings is not None else None, make=lambda: _made_store(obj))
    legacy = settings.get("held") if settings is not None else None
    if legacy is not None and len(legacy):
        try:
            _move_legacy(obj, held)
        except (AttributeError, RuntimeError):  # (where nothing may be written, as in drawing: the next call moves)
            pass
    return held


def _settings_store(obj: bpy.types.Object):
    """The ID properties that hold obj's `fabrik` settings, or None where nothing has set any yet."""
    stored = compat.stored_properties(obj)
    return stored.get("fabrik") if stored is not None else None


def _made_store(obj: bpy.types.Object):
    """A new store for obj's held entries, in its settings (made as well where nothing has set any yet)."""
    if _settings_store(obj) is None:
        obj.fabrik.held.clear()  # (any write through RNA makes them; this one changes nothing)
    settings = _settings_store(obj)
    settings[KEY] = {}
    return settings[KEY]


def _move_legacy(obj: bpy.types.Object, held: HeldBones) -> None:
    """Move the entries of a file from before this layout (`fabrik.held`, a collection) into the arrays."""
    old = [entry for entry in obj.fabrik.held if held.get(entry.name) is None]
    for entry, moved in zip(old, held.add([entry.name for entry in old])):
        for name in _LEGACY:
            setattr(moved, name, getattr(entry, name))
    obj.fabrik.held.clear()


# Holding the animator's pose under the solve.


def new_entries(obj: bpy.types.Object, held: HeldBones, names: list[str]) -> list:
    """Held entries for these bones, noting which bone each is (so it follows a rename: `follow_renames`)."""
    entries = held.add(names)
    bones = obj.data.bones
    for entry, name in zip(entries, names):
        index = bones.find(name)
        if index >= 0:
            entry.index, entry.head = index, bones[index].head_local
    return entries


def follow_renames(obj: bpy.types.Object, bone_names=None) -> None:
    """Held entries of bones renamed since follow them (the same place among the bones, the same rest head).
    `bone_names`, when the caller has them, are the armature's bone names (a set or dict, for the quick check)."""
    held = held_bones(obj)
    bones = obj.data.bones
    names = held.keys()
    known = bone_names or bones
    if not names or all(name in known for name in names):
        return
    for entry in held:
        if entry.name in bones or not 0 <= entry.index < len(bones):
            continue
        bone = bones[entry.index]
        if bone.name not in names and (bone.head_local - Vector(entry.head)).length < 1e-5 * (1.0 + bone.length):
            entry.name = bone.name


def entries_of(held: HeldBones):
    """The held entries in bulk: (index by name, rotated, written (m, 4), fk (m, 4), scaled, set()), or None when
    there are none."""
    if not len(held):
        return None
    rotated = held.column("rotated").astype(bool)
    written, fk = held.column("written").copy(), held.column("fk").copy()
    scaled = held.column("scaled").astype(bool)
    index = {name: i for i, name in enumerate(held.keys())}
    # An entry that is not finite (from a file saved before they were refused) holds nothing: the channel is the
    # animator's, so a rig whose NaN was cleared solves again.
    rotated &= np.isfinite(written).all(axis=1) & np.isfinite(fk).all(axis=1)
    # The last item collects the entries found rotated in the bone's mode (so they are not read twice).
    return index, rotated, written, fk, scaled, set()


def animator_values(
    obj: bpy.types.Object, held: HeldBones, names, modes, current, entries,
    depsgraph: bpy.types.Depsgraph | None = None
) -> list[tuple[float, ...]]:
    """`channels.fk_channels` from channels and held entries read in bulk (`modes`: each bone's rotation mode); the
    depsgraph, when there is one, tells the frame keyed channels are evaluated at."""
    if entries is None:
        return list(current)
    index, rotated, written, fk, _, matched = entries
    rotated, written, fk = rotated.tolist(), written.tolist(), fk.tolist()
    held_modes = None
    values = []
    keyed = None
    for name, mode, value in zip(names, modes, current):
        i = index.get(name)
        size = len(value)
        if i is not None and rotated[i] and same(value, written[i][:size]):
            if held_modes is None:
                held_modes = held.modes()
            if held_modes[i] == mode:
                matched.add(i)
                value = tuple(fk[i][:size])
                if keyed is None:
                    keyed = keyed_channels(obj, depsgraph)
                if keyed:
                    value = animated(keyed, name, armature.rotation_channel(mode)[0], value)
        values.append(value)
    return values


def hold(obj: bpy.types.Object, held, names, modes, written, fk_values, entries) -> tuple:
    """Keep in the file, per bone, the rotation value written and the FK value it replaced, set in bulk (entries
    `animator_values` matched, or an earlier hold of the same read, need no other write); the entries as they
    are now (`entries_of`), for the next hold of the same read."""
    index = entries[0] if entries is not None else {}
    if any(name not in index for name in names):
        new_entries(obj, held, [name for name in names if name not in index])
        entries = entries_of(held)
        index = entries[0]
    matched = entries[5]
    unmatched = {}
    for name, mode in zip(names, modes):
        i = index[name]
        if i not in matched:
            unmatched[i] = mode
    if unmatched:
        held.column("rotated")[list(unmatched)] = 1
        held.set_strings("mode", unmatched)
        matched.update(unmatched)
    rows = [index[name] for name in names]
    held.vectors("written", rows, written)
    held.vectors("fk", rows, fk_values)
    return entries


def same(a, b, tolerance: float = 1e-6) -> bool:
    """Whether two channel values agree (both single precision in Blender, so ours come back exactly); a value
    that is not a number agrees with nothing."""
    for x, y in zip(a, b):  # (a loop, not all() over a generator: this runs for every moving bone every frame)
        if not abs(x - y) <= tolerance:
            return False
    return True


def let_go(obj: bpy.types.Object, names: list[str]) -> None:
    """Forget the held rotations of these bones: what they hold now is the animator's."""
    held = held_bones(obj)
    for name in names:
        entry = held.get(name)
        if entry is not None and entry.rotated:
            entry.rotated = False


def write_stretch(obj: bpy.types.Object, skeleton: Skeleton, scales: dict[int, float], pose=None) -> None:
    """Write IK stretch as the bones' uniform scale, and give bones stretched before and no longer their own scale
    back (the animator's, kept with the rig); a bone that keeps scale 1 and was never stretched is never touched."""
    if pose is not None:
        pose.forget("scale")
    wanted = {skeleton.names[b]: value for b, value in scales.items()}
    held = held_bones(obj)
    names = held.keys()
    for i in np.flatnonzero(held.column("scaled")).tolist():  # (every frame: the flags in bulk)
        if abs(wanted.get(names[i], 1.0) - 1.0) > 1e-9:
            continue  # still stretched: written below
        entry = held[i]
        pose_bone = obj.pose.bones.get(entry.name)
        if pose_bone is not None and same(pose_bone.scale, entry.written_scale):
            pose_bone.scale = entry.fk_scale
        entry.scaled = False
    stretched = {}
    for name, value in wanted.items():
        if abs(value - 1.0) <= 1e-9:
            continue
        stretched[skeleton.index(name)] = value
        entry = held.get(name)
        if entry is None:
            entry = new_entries(obj, held, [name])[0]
        scale = tuple(obj.pose.bones[name].scale)
        if not (entry.scaled and same(scale, entry.written_scale)):
            entry.fk_scale = scale  # the bone does not hold our last stretch: its scale is the animator's
        entry.scaled = True
    armature.write_scales(obj, skeleton, stretched)
    for b, value in stretched.items():
        entry = held[skeleton.names[b]]
        if not same(entry.written_scale, obj.pose.bones[skeleton.names[b]].scale, 0.0):
            entry.written_scale = tuple(obj.pose.bones[skeleton.names[b]].scale)


def keyed_channels(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None) -> tuple | None:
    """(the F-curves of the rig's active action, this frame, the data paths they animate) when it has any, else
    an empty tuple. The frame is the depsgraph's scene's; without one, that of the first scene the rig is in
    (`users_scene` searches them all)."""
    collection = animdata.fcurves(obj)
    if collection is None or not len(collection):
        return ()
    paths = animdata.fcurve_paths(obj, collection)
    if depsgraph is not None:
        return collection, depsgraph.scene.frame_current_final, paths
    return collection, obj.users_scene[0].frame_current_final if obj.users_scene else 0.0, paths


def animated(keyed: tuple, name: str, channel: str, value: tuple[float, ...]) -> tuple[float, ...]:
    """The channel value with each keyed component replaced by what its F-curve gives this frame."""
    collection, frame, paths = keyed
    path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].{channel}'
    if path not in paths:
        return value
    result = list(value)
    for index in range(len(value)):
        fcurve = collection.find(path, index=index)
        if fcurve is not None and not fcurve.mute:
            result[index] = fcurve.evaluate(frame)
    return tuple(result)



def finite(value) -> bool:
    """Whether every component of a value is a finite number."""
    return all(math.isfinite(x) for x in value)
