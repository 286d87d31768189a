# SPDX-License-Identifier: GPL-3.0-or-later
"""The bridge to Blender: properties, rig reading and pose writing, operators, panels, handlers."""

from . import long_work
from .effectors import integrity
from .live import handlers
from .rig import props
from .ui import (
    bone_panel,
    compare,
    ops,
    overlay,
    panels,
    pin_ops,
    presets,
    report,
    retarget_ops,
    setup_ops,
    target_motion,
    updates,
)

_modules = (
    props, updates, long_work, ops, pin_ops, retarget_ops, setup_ops, presets, target_motion, compare, panels, report,
    bone_panel, overlay, handlers, integrity,
)


def register() -> None:
    """Register every module, properties first."""
    for module in _modules:
        module.register()


def unregister() -> None:
    """Unregister in reverse order, leaving nothing behind."""
    for module in reversed(_modules):
        module.unregister()
