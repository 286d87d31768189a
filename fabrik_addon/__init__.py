# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK inverse kinematics for Blender.

Registration only. The solver library is `core` (no bpy, so it imports and
tests without Blender); the bridge to Blender is `blender`, imported here
lazily for that reason.
"""


def register() -> None:
    """Register the add-on's properties, operators, panels and handlers."""
    from . import blender  # (here, so that `core` imports without bpy)

    blender.register()


def unregister() -> None:
    """Unregister everything `register` added."""
    from . import blender  # (here, so that `core` imports without bpy)

    blender.unregister()
