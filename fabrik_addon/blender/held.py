# SPDX-License-Identifier: GPL-3.0-or-later
"""What live solving holds per rig: for each bone it wrote, the value it wrote and the animator's value under it.

Kept in the file with the rig (so a reload solves from the same pose, and
live solving off gives the animator's channels back) as a few flat arrays in
the rig's settings, not as a collection of groups. Every pose write tags the
rig, and Blender then copies the whole object for evaluation, ID properties
included: a group per bone cost that copy about 1 us a frame each (53 us on a
50-bone chain, a tenth of its frame), a handful of arrays costs it next to
nothing.

For a library override the entries live in memory instead: Blender keeps no
property we could add to an override in its file. Files from before this
layout hold a `fabrik.held` collection (`props.FabrikHeldBone`): the first
`held_bones` of such a rig moves its entries into the arrays.
"""

from __future__ import annotations

import array
import json

import numpy as np

from . import compat

#: Where the arrays live in the rig's settings.
KEY = "held_bones"

#: Each per-bone vector kept, with its size (single precision, as the channels hold them).
VECTORS = {"written": 4, "fk": 4, "head": 3, "written_scale": 3, "fk_scale": 3}
#: Each per-bone integer kept (flags and the bone's place among the armature's bones).
INTEGERS = ("rotated", "scaled", "index")
#: Each per-bone string kept, as one JSON list each.
STRINGS = ("name", "mode")
#: A new entry's values.
_NEW = {"written": (0.0,) * 4, "fk": (0.0,) * 4, "head": (0.0,) * 3, "written_scale": (0.0,) * 3,
        "fk_scale": (1.0,) * 3, "rotated": 0, "scaled": 0, "index": -1, "name": "", "mode": ""}
_BOOLEANS = ("rotated", "scaled")

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
        for name in VECTORS:
            self._replace(name, array.array('f', [*self._array(name, 'f'), *_NEW[name] * added]))
        for name in INTEGERS:
            self._replace(name, array.array('i', [*self._array(name, 'i'), *(_NEW[name],) * added]))
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
        return array.array(typecode) if values is None else values

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


#: Per library override (by name): its held entries, in memory.
_in_memory: dict[str, HeldBones] = {}


def held_bones(obj) -> HeldBones:
    """Where live solving keeps obj's held entries: in its settings, in the file; for a library override, in memory
    (for this session: live solving off still gives the animator's pose back)."""
    if getattr(obj, "override_library", None) is not None:
        held = _in_memory.get(obj.name)
        if held is None:
            held = _in_memory[obj.name] = HeldBones({}, in_memory=True)
        return held
    settings = _settings_store(obj)
    held = HeldBones(settings.get(KEY) if settings is not None else None, make=lambda: _made_store(obj))
    legacy = settings.get("held") if settings is not None else None
    if legacy is not None and len(legacy):
        try:
            _move_legacy(obj, held)
        except (AttributeError, RuntimeError):  # (where nothing may be written, as in drawing: the next call moves)
            pass
    return held


def _settings_store(obj):
    """The ID properties that hold obj's `fabrik` settings, or None where nothing has set any yet."""
    stored = compat.stored_properties(obj)
    return stored.get("fabrik") if stored is not None else None


def _made_store(obj):
    """A new store for obj's held entries, in its settings (made as well where nothing has set any yet)."""
    if _settings_store(obj) is None:
        obj.fabrik.held.clear()  # (any write through RNA makes them; this one changes nothing)
    settings = _settings_store(obj)
    settings[KEY] = {}
    return settings[KEY]


def _move_legacy(obj, held: HeldBones) -> None:
    """Move the entries of a file from before this layout (`fabrik.held`, a collection) into the arrays."""
    old = [entry for entry in obj.fabrik.held if held.get(entry.name) is None]
    for entry, moved in zip(old, held.add([entry.name for entry in old])):
        for name in (*VECTORS, *INTEGERS, "mode"):
            setattr(moved, name, getattr(entry, name))
    obj.fabrik.held.clear()


def forget(obj_name: str | None = None) -> None:
    """Drop the entries kept in memory for one library override, or for all."""
    if obj_name is None:
        _in_memory.clear()
    else:
        _in_memory.pop(obj_name, None)


def remembered() -> set[str]:
    """Names of the rigs whose entries are kept in memory."""
    return set(_in_memory)
