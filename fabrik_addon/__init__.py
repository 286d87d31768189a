# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK inverse kinematics for Blender.

Registration only. The solver library is `core` (no bpy, so it imports and
tests without Blender); the bridge to Blender is `blender`, imported here
lazily for that reason. Where Blender's Python has no numpy, only
`needs_numpy` registers: the add-on enables and says what to install.
"""

#: The add-on's version (the manifest's, and `bl_info`'s in the root `__init__.py`: a test keeps them equal).
__version__ = "0.1.0"

#: What `register` registered (`blender` or `needs_numpy`), for `unregister`.
_registered = None


def register() -> None:
    """Register the add-on's properties, operators, panels and handlers (or, without numpy, what says so)."""
    global _registered
    try:
        import numpy  # noqa: F401  (some Linux distributions' Blender comes without it)
    except ImportError:
        from . import needs_numpy as registered
        print("FABRIK IK: numpy is missing; the FABRIK tab and the add-on's preferences say what to install")
    else:
        from . import blender as registered  # (here, so that `core` imports without bpy)
    registered.register()
    _registered = registered


def unregister() -> None:
    """Unregister everything `register` added."""
    global _registered
    if _registered is not None:
        _registered.unregister()
        _registered = None
