# SPDX-License-Identifier: GPL-3.0-or-later
"""Differences between the Blender versions we run on (3.4 as a legacy add-on, 4.2 to 5.0 as an extension).

Only what some module needs lives here, so version checks are not scattered
through the code. `gpu` and `blf` are imported when first used: they are not
needed (and may have no GPU behind them) in background mode.
"""

from __future__ import annotations

import bpy

#: Blender 4.0 renamed the built-in shaders ('3D_UNIFORM_COLOR' became 'UNIFORM_COLOR', and so on; the old
#: names went in 4.0) and dropped blf.size's dpi argument.
_RENAMED = (4, 0, 0)


def builtin_shader_name(kind: str, version: tuple[int, ...] | None = None) -> str:
    """The built-in shader's name for `kind`: 'lines' (one-pixel lines of one colour) or 'polyline' (lines
    of one colour with a width in pixels) on this Blender, or on `version`."""
    old = tuple(version or bpy.app.version) < _RENAMED
    names = {
        "lines": ("3D_UNIFORM_COLOR", "UNIFORM_COLOR"),
        "polyline": ("3D_POLYLINE_UNIFORM_COLOR", "POLYLINE_UNIFORM_COLOR"),
    }[kind]
    return names[0] if old else names[1]


def builtin_shader(kind: str):
    """The built-in GPU shader for `kind` (see builtin_shader_name). Needs a GPU context: never in background."""
    import gpu  # (here: see the module's note)

    return gpu.shader.from_builtin(builtin_shader_name(kind))


def text_size(font_id: int, size: float) -> None:
    """Set blf's text size in pixels (3.x also wants a dpi; 72 makes a point a pixel)."""
    import blf  # (here: see the module's note)

    if tuple(bpy.app.version) < _RENAMED:
        blf.size(font_id, int(round(size)), 72)
    else:
        blf.size(font_id, size)


def stored_properties(struct):
    """The ID properties that hold `struct`'s add-on properties (those bpy.props defines), or None when it has none
    yet. Setting a value there runs no RNA update. Blender 5.0 keeps them apart from the custom properties
    (`bl_system_properties_get`); before 5.0 item access on the struct reaches them."""
    getter = getattr(struct, "bl_system_properties_get", None)
    if getter is not None:
        return getter()
    return struct if struct.keys() else None
