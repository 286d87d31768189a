# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK inverse kinematics for Blender: registration only; the solver is in `core`, the bridge in `blender`."""

from .blender import live, ops, props, ui

_modules = (props, ops, ui, live)


def register() -> None:
    """Register every module, properties first."""
    for module in _modules:
        module.register()


def unregister() -> None:
    """Unregister in reverse order, leaving nothing behind."""
    for module in reversed(_modules):
        module.unregister()
