# SPDX-License-Identifier: GPL-3.0-or-later
"""The bridge to Blender: properties, rig reading and pose writing, operators, panels, handlers."""

from . import (
    compare, integrity, live, motion, ops, overlay, pin_ops, presets, props, retarget_ops, setup_ops, stepping, ui,
)

_modules = (props, stepping, ops, pin_ops, retarget_ops, setup_ops, presets, motion, compare, ui, overlay, live, integrity)


def register() -> None:
    """Register every module, properties first."""
    for module in _modules:
        module.register()


def unregister() -> None:
    """Unregister in reverse order, leaving nothing behind."""
    for module in reversed(_modules):
        module.unregister()
