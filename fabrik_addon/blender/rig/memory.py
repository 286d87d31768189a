# SPDX-License-Identifier: GPL-3.0-or-later
"""What the add-on remembers about each rig between frames, in one place.

One `RigMemory` per armature object, by name: the rig's structure as last
read (its skeleton), the last live solve's status, its solution and what
continuity mode carries, the last live read (which the next frame may reuse),
and what the overlay and the comparison keep. None of it is in the file: what
must survive a reload (the animator's pose under the solve) is kept with the
rig (`held_bones`). A rig's memory is forgotten here, all of it at once, when the
rig is deleted or renamed, another file is loaded or the add-on is switched
off; undo and switching live solving off or on forget what the next frame
could go on from (`forget_reads`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy

__all__ = ["RigMemory", "forget_missing", "forget_reads", "get", "names", "of", "reset"]


@dataclass
class RigMemory:
    """Everything remembered about one rig (see the module)."""

    name: str
    # The structure, as `armature.skeleton_of` last read and checked it.
    #: What the skeleton was made from (bones, then IK settings), and the skeleton.
    signature: tuple | None = None
    skeleton: object = None
    #: Where each skeleton bone sits among the pose bones, and what the skeleton's limits ignored.
    pose_order: object = None
    limit_problems: list[str] = field(default_factory=list)
    #: The data paths the rig's F-curves animate, with what they were read from (`animdata.fcurve_paths`), and
    #: whether the animation or drivers may set an IK setting (`handlers`).
    fcurve_paths: tuple | None = None
    ik_animation: tuple | None = None
    #: Whether the structure is read once and not checked again for a while (`armature.frozen_structure`).
    frozen: bool = False
    # The last solve.
    #: Its status, for the panel and the overlay (`status`).
    status: object = None
    #: Each moving bone's local rotation from the last solve (a unit quaternion), before any influence blend:
    #: where Start From: Previous Solution and continuous bakes go on from.
    solution: dict | None = None
    #: What continuity mode carries from one frame to the next (`core.solving.plan.Carry`).
    carry: object = None
    #: How far the last solve moved the rig's root from its animated place (scene units) and turned it (radians),
    #: where its Root moves (`moving_root`); None where it does not.
    root_away: tuple[float, float] | None = None
    #: Whether the last solve was put off to the next update (`solve.solve_object`): nothing counts as solved.
    again: bool = False
    # Live solving.
    #: Whether live solving checked the rig at the last evaluation its handlers were told of (`handlers`): then an
    #: evaluation that updated neither its object nor its data changed no structure.
    watched: bool = False
    #: What the last live solve read, with the channels as it left them (an update that changes none of it is
    #: no reason to solve again).
    inputs: tuple | None = None
    #: The last live frame's read, which a frame where only the targets moved goes on from (`handlers`).
    read: object = None
    #: A library override's held entries (`held_bones`): Blender keeps no property of ours in an override's file.
    held: object = None
    # The overlay and the comparison.
    #: Per effector index: the tip's recent world positions; and what the overlay last drew, with what from.
    traces: dict = field(default_factory=dict)
    drawing: tuple | None = None
    #: The solvers' comparison's lines (`compare`).
    summaries: list[str] | None = None


_memories: dict[str, RigMemory] = {}


def of(obj: bpy.types.Object) -> RigMemory:
    """The memory of a rig (an object or its name), made when first asked for."""
    name = obj if isinstance(obj, str) else obj.name
    memory = _memories.get(name)
    if memory is None:
        memory = _memories[name] = RigMemory(name)
    return memory


def get(name: str) -> RigMemory | None:
    """The memory of a rig by name, where there is one."""
    return _memories.get(name)


def names() -> set[str]:
    """The names of the rigs something is remembered for."""
    return set(_memories)


def forget_reads(name: str | None = None) -> None:
    """Forget what the next live frame of one rig, or of every rig, could have gone on from, so it reads and solves
    whole (undo, redo, live solving switched); the rest of the memory stays."""
    for memory in _memories.values() if name is None else filter(None, [_memories.get(name)]):
        memory.read = memory.inputs = memory.ik_animation = None
        memory.watched = False
        if memory.carry is not None:
            memory.carry.clear()


#: How many objects the file had when deleted rigs were last looked for.
_objects_seen = -1


def forget_missing(every_name: bool = False) -> int:
    """Forget the rigs that are gone (deleted, or renamed), looked for when the file's object count changes, or
    with `every_name` (a rename changes no count: an update that is no frame change looks); the file's object
    count."""
    global _objects_seen
    objects = bpy.data.objects
    count = len(objects)
    if count != _objects_seen or every_name:
        _objects_seen = count
        for name in [name for name in _memories if objects.get(name) is None]:
            del _memories[name]
    return count


def reset() -> None:
    """Forget everything and look for deleted rigs again at the next chance (a file load)."""
    global _objects_seen
    _objects_seen = -1
    _memories.clear()
