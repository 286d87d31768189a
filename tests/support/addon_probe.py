# SPDX-License-Identifier: GPL-3.0-or-later
"""Looks at an installed add-on from inside a Blender process (driver scripts import this; any Blender 3.4+).

Not a test module: the install tests run drivers in other interpreters
(bpy 5.0 in a subprocess, Debian's Blender 3.4) and put this folder on sys.path.
"""

from __future__ import annotations

import sys

import bpy


def handler_snapshot() -> dict[str, list[str]]:
    """Per list in bpy.app.handlers: its functions as module:name."""
    snapshot = {}
    for name in dir(bpy.app.handlers):
        handlers = getattr(bpy.app.handlers, name)
        if isinstance(handlers, list):
            snapshot[name] = sorted(f"{getattr(h, '__module__', '?')}:{getattr(h, '__name__', repr(h))}" for h in handlers)
    return snapshot


def our_handlers(module: str) -> dict[str, list[str]]:
    """The add-on's handlers (functions from `module` or below), per list."""
    def ours(entry: str) -> bool:
        return entry.startswith(module + ".") or entry.startswith(module + ":")

    return {name: [e for e in entries if ours(e)] for name, entries in handler_snapshot().items()
            if any(ours(e) for e in entries)}


def changed_handlers(before: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    """Per handler list that differs from `before`: [removed, added]."""
    after = handler_snapshot()
    return {name: [sorted(set(before.get(name, [])) - set(entries)), sorted(set(entries) - set(before.get(name, [])))]
            for name, entries in after.items() if entries != before.get(name, [])}


def registered_classes(module: str) -> list[str]:
    """Classes defined in the add-on's modules that are registered with Blender (property groups too)."""
    names = set()
    for name, mod in list(sys.modules.items()):
        if name != module and not name.startswith(module + "."):
            continue
        for value in vars(mod).values():
            if isinstance(value, type) and issubclass(value, bpy.types.bpy_struct) \
                    and value.__module__ == name and value.is_registered:
                names.add(value.__name__)
    return sorted(names)


def object_property_left() -> bool:
    """Whether Object still carries the add-on's settings pointer."""
    return "fabrik" in bpy.types.Object.bl_rna.properties or hasattr(bpy.types.Object, "fabrik")


def solve_a_chain() -> tuple[dict, object, object]:
    """Build a 3-bone chain with an empty as target and run fabrik.solve; the findings, the rig and the target."""
    from samples import rigbuild  # samples/, also on sys.path

    rig = rigbuild.make_armature("Rig", rigbuild.chain_bones(3, 1.0, prefix="b"))
    target = rigbuild.make_target("Target", (1.5, 0.3, 1.5))
    rigbuild.add_effector(rig, "b2", target)
    bpy.context.view_layer.objects.active = rig
    bpy.context.view_layer.update()
    tip_before = rig.matrix_world @ rig.pose.bones["b2"].tail
    solved = sorted(bpy.ops.fabrik.solve())
    bpy.context.view_layer.update()
    tip = rig.matrix_world @ rig.pose.bones["b2"].tail
    findings = {
        "solve": solved,
        "tip_moved": (tip - tip_before).length,
        "tip_error": (tip - target.matrix_world.translation).length,
    }
    return findings, rig, target
