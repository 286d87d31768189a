# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's functions in Blender's handler lists (`bpy.app.handlers`): installed once, removed whole."""

from __future__ import annotations

from collections.abc import Callable, Iterable

#: Pairs of a Blender handler list (`bpy.app.handlers.load_post`...) and a function of ours to call from it.
Handlers = Iterable[tuple[list, Callable]]


def install(handlers: Handlers) -> None:
    """Put each function in its list, unless it is there already (enabling twice adds nothing)."""
    for handler_list, function in handlers:
        if function not in handler_list:
            handler_list.append(function)


def remove(handlers: Handlers) -> None:
    """Take each function out of its list, every time it appears (a script may have added it again)."""
    for handler_list, function in handlers:
        while function in handler_list:
            handler_list.remove(function)
