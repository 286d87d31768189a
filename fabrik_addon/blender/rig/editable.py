# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether the add-on may write to a rig: data linked from a library file is read-only, whatever Python allows.

Blender lets a script set a linked object's pose and key its linked action,
but none of it is saved: the next load reads that data from the library
again. A library override is local data and keeps what is written to it.
"""

from __future__ import annotations

import bpy


def _library_name(data) -> str:
    """The library file a linked data-block comes from, as the user sees it."""
    return data.library.filepath or data.library.name


def editable(obj: bpy.types.Object) -> str | None:
    """None when obj's pose and keys can be written and saved; else why not, in the user's words."""
    if obj.library is not None:
        return (
            f"'{obj.name}' is linked from the library '{_library_name(obj)}', so nothing written to it is saved: "
            "make a library override of it (Object > Library Override > Make) and use that"
        )
    override = getattr(obj, "override_library", None)
    if override is not None and getattr(override, "is_system_override", False):
        return (
            f"'{obj.name}' is a system library override, which is not editable: "
            "make it editable (Object > Library Override > Make Editable) first"
        )
    return None


def action_editable(action) -> str | None:
    """None when keys written into the action are saved; else why not (it is linked from a library)."""
    if action is None:
        return None
    if action.library is not None:
        return (
            f"the action '{action.name}' is linked from the library '{_library_name(action)}', so keys written "
            "into it are not saved: bake into a new action"
        )
    if getattr(action, "override_library", None) is not None:
        # An override keeps only the properties it overrides; keys added to its F-curves are not among them.
        return f"the action '{action.name}' is a library override, which does not keep new keys: bake into a new action"
    return None


def keys_editable(obj: bpy.types.Object) -> str | None:
    """`action_editable` of the object's active action (None for none: a new one would be made)."""
    return action_editable(obj.animation_data.action if obj.animation_data is not None else None)
