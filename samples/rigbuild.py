# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers the sample scripts share: armatures from bone lists, targets and their motion, meshes, measurements.

Only bpy, bmesh and mathutils are used, and the add-on only through its
properties (`obj.fabrik`) and operators (`bpy.ops.fabrik.*`), so the samples
run the same with the bpy module, inside Blender, and with the add-on
installed as an extension.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, Iterable, Sequence

try:
    import bpy  # first: the bpy module makes bmesh and mathutils importable
except ModuleNotFoundError:  # (a sample run with a Python that has no Blender in it)
    script = f"samples/{os.path.basename(sys.argv[0])}" if sys.argv[0].endswith(".py") else "samples/NAME.py"
    raise SystemExit(
        f"The samples need Blender: run them with Blender's Python module (.venv/bin/python {script}, "
        f"after `python3 tools/dev.py demo` set it up) or inside Blender (blender --python {script})."
    ) from None
import bmesh
from mathutils import Matrix, Vector

# (name, head, tail, parent name or None, connected[, vector the bone's Z axis should face])
Bone = tuple

#: Colours (RGBA) the samples share; Workbench shows them with colour type 'OBJECT'.
STEEL = (0.45, 0.55, 0.70, 1.0)
ORANGE = (0.95, 0.55, 0.15, 1.0)
SAND = (0.80, 0.72, 0.55, 1.0)
RED = (0.85, 0.15, 0.12, 1.0)
GROUND = (0.95, 0.95, 0.93, 1.0)


def ensure_addon() -> None:
    """Register the add-on from this source tree unless Blender already has it (enabled or registered)."""
    if hasattr(bpy.types.Object, "fabrik"):
        return
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import fabrik_addon

    fabrik_addon.register()


#: Where a sample saves its scene unless told otherwise (in the checkout's out/, which git ignores, beside but not
#: over the demo's baked scenes).
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "out", "samples")


def main(build: Callable) -> None:
    """Run a sample as a script: make sure the add-on is there, build, and save where `--save` says (by default
    out/samples/<sample>.blend, except in a Blender window, which shows the scene and saves nothing unless told)."""
    module = sys.modules[build.__module__]
    name = os.path.splitext(os.path.basename(module.__file__))[0]
    parser = argparse.ArgumentParser(
        prog=f"samples/{name}.py", description=" ".join((module.__doc__ or "").strip().splitlines()[:1]),
        epilog=f"Inside Blender, give the options after --:\n  blender --python samples/{name}.py -- --save x.blend",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--save", metavar="PATH", help=f"save the scene here (default: out/samples/{name}.blend; "
                        "in a Blender window: not saved)")
    parser.add_argument("--no-save", action="store_true", help="build the scene and save nothing")
    # Inside Blender, sys.argv is Blender's own command line: the sample's options come after `--`.
    inside_blender = os.path.abspath(sys.argv[0]) != os.path.abspath(module.__file__)
    argv = sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else ([] if inside_blender else sys.argv[1:])
    options = parser.parse_args(argv)
    ensure_addon()
    build()
    if options.no_save or (options.save is None and not bpy.app.background):
        print(f"built the {name} sample (not saved)")
        return
    path = os.path.abspath(options.save or os.path.join(OUT, f"{name}.blend"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    print(f"saved the {name} sample to {path}")


def make_armature(name: str, bones: Sequence[Bone], location=(0.0, 0.0, 0.0)):
    """A new armature object in the scene, bones given as (name, head, tail, parent, connected[, z_axis])."""
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    view_layer = bpy.context.view_layer
    previous_active = view_layer.objects.active
    view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode='EDIT')
    for bone_name, head, tail, parent, connected, *z_axis in bones:
        edit_bone = data.edit_bones.new(bone_name)
        edit_bone.head, edit_bone.tail = head, tail
        if z_axis:
            # The roll decides the bone's X and Z axes, hence which way a hinge (a locked IK axis) turns.
            edit_bone.align_roll(Vector(z_axis[0]))
        if parent:
            edit_bone.parent = data.edit_bones[parent]
            edit_bone.use_connect = connected
    bpy.ops.object.mode_set(mode='OBJECT')
    if previous_active is not None:
        view_layer.objects.active = previous_active
    return obj


def make_target(name: str, location, size: float = 0.2):
    """An empty to use as an IK target."""
    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = 'SPHERE'
    obj.empty_display_size = size
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    return obj


def add_effector(rig, bone: str, target, chain_length: int = 0, weight: float = 1.0):
    """Add a FABRIK effector to the rig (the add-on must be enabled)."""
    effector = rig.fabrik.effectors.add()
    effector.bone, effector.target = bone, target
    effector.chain_length, effector.weight = chain_length, weight
    return effector


def use_frames(frames: range) -> None:
    """Make frames the scene's frame range."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames.start, frames.stop - 1


def key_circle(
    obj, center, radius: float, frames: range, axis: str = 'XY', turns: float = 1.0, jump_every: int = 0
) -> None:
    """Keyframe obj's location on a circle in the given plane, one key per frame; with `jump_every`, every that
    many frames it jumps across the circle (half a turn on) and goes round from there."""
    a, b = 'XYZ'.index(axis[0]), 'XYZ'.index(axis[1])
    for frame in frames:
        angle = 2.0 * math.pi * turns * (frame - frames.start) / max(1, len(frames))
        if jump_every:
            angle += math.pi * ((frame - frames.start) // jump_every)
        location = list(center)
        location[a] += radius * math.cos(angle)
        location[b] += radius * math.sin(angle)
        obj.location = location
        obj.keyframe_insert("location", frame=frame)


def key_motion(
    obj, preset: str, radius: float, frames: range, plane: str = 'XZ', turns: float = 1.0, phase: float = 0.0
) -> None:
    """Key obj on the add-on's motion preset ('CIRCLE', 'FIGURE_EIGHT') around its location, `turns` loops over frames.

    Uses the add-on's own operator (what a user would press), with the speed
    worked out from the scene's frame rate so the loops fit the frame range.
    """
    scene = bpy.context.scene
    fps = scene.render.fps / scene.render.fps_base
    speed = turns * fps / max(1, len(frames))
    override = {"active_object": obj, "object": obj, "selected_objects": [obj], "selected_editable_objects": [obj]}
    with bpy.context.temp_override(**override):
        result = bpy.ops.fabrik.target_motion(
            preset=preset, radius=radius, speed=speed, phase=phase, plane=plane,
            frame_start=frames.start, frame_end=frames.stop - 1,
        )
    if result != {'FINISHED'}:
        raise RuntimeError(f"fabrik.target_motion did not finish for '{obj.name}': {result}")


def key_path(obj, frames: Iterable[int], location_at: Callable[[int], Sequence[float]]) -> None:
    """Keyframe obj's location at every frame from a function of the frame."""
    for frame in frames:
        obj.location = tuple(location_at(frame))
        obj.keyframe_insert("location", frame=frame)


def chain_bones(count: int, length: float, prefix: str = "bone", start=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)) -> list[Bone]:
    """A connected chain of equal bones along an axis."""
    bones = []
    for i in range(count):
        head = tuple(start[k] + axis[k] * length * i for k in range(3))
        tail = tuple(start[k] + axis[k] * length * (i + 1) for k in range(3))
        bones.append((f"{prefix}{i}", head, tail, f"{prefix}{i - 1}" if i else None, True))
    return bones


def set_limits(rig, bone: str, lock: str = "", x=None, y=None, z=None, stiffness=None) -> None:
    """Blender IK settings of one pose bone: locked axes ("YZ"), (min, max) ranges in degrees per axis, stiffness."""
    pose_bone = rig.pose.bones[bone]
    for axis in "xyz":
        setattr(pose_bone, f"lock_ik_{axis}", axis.upper() in lock.upper())
    for axis, limits in (("x", x), ("y", y), ("z", z)):
        setattr(pose_bone, f"use_ik_limit_{axis}", limits is not None)
        if limits is not None:
            setattr(pose_bone, f"ik_min_{axis}", math.radians(limits[0]))
            setattr(pose_bone, f"ik_max_{axis}", math.radians(limits[1]))
    for axis, value in zip("xyz", stiffness or (0.0, 0.0, 0.0)):
        setattr(pose_bone, f"ik_stiffness_{axis}", value)


def rest_pole_angle(rig, top: str, tip: str, pole) -> float:
    """The pole angle that keeps the chain top..tip bent as at rest, with its pole target at `pole` (armature space).

    Blender's IK (and the add-on, which follows it) turns the chain so that
    its first bone's up vector X cos(angle) + Z sin(angle), seen along the
    line from the chain's base to its tip, points at the pole; this is the
    angle for which that turn is none at all in the rest pose.
    """
    bones = rig.data.bones
    base = bones[top].head_local
    axis = (bones[tip].tail_local - base).normalized()
    frame = bones[top].matrix_local.to_3x3()

    def across(v):
        return v - axis * axis.dot(v)

    x_axis, z_axis, towards = across(frame.col[0]), across(frame.col[2]), across(Vector(pole) - base)
    # towards = a X' + b Z' in the plane across the line; then (cos, sin) of the angle is along (a, b).
    side = axis.cross(x_axis)
    a = towards.dot(z_axis.cross(axis)) / x_axis.dot(z_axis.cross(axis))
    b = towards.dot(side) / z_axis.dot(side)
    return math.atan2(b, a)


# Meshes, so that renders (which never show armatures or empties) show the rig.

def _mesh_object(name: str, bm, color, parent=None):
    """A mesh object made from a bmesh (which is freed), smooth shaded, linked to the scene."""
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    if hasattr(mesh, "shade_smooth"):
        mesh.shade_smooth()
    else:  # Blender before 4.1
        mesh.polygons.foreach_set("use_smooth", [True] * len(mesh.polygons))
    obj = bpy.data.objects.new(name, mesh)
    obj.color = color
    if parent is not None:
        obj.parent = parent
    bpy.context.scene.collection.objects.link(obj)
    return obj


def add_bone_meshes(
    rig, bones: Iterable[str] | None = None, radius: float = 0.05, taper: float = 0.6, color=STEEL,
    radii: dict[str, float] | None = None, segments: int = 12, joint: float = 1.25,
) -> list:
    """A tapered cylinder with a ball at its head for each bone (default: all), parented to the bone so it follows.

    `radius` is the cylinder's radius at the head (`radii` overrides it per
    bone); it narrows to `taper` times that at the tail. The ball's radius is
    `joint` times the cylinder's (0: no ball).
    """
    objects = []
    names = [b.name for b in rig.data.bones] if bones is None else list(bones)
    for name in names:
        bone = rig.data.bones[name]
        length = bone.length
        r = (radii or {}).get(name, radius)
        bm = bmesh.new()
        # Built along +Y from 0 to the bone's length, which is the bone's own frame with the head at the origin.
        along_y = Matrix.Translation((0.0, length / 2.0, 0.0)) @ Matrix.Rotation(-math.pi / 2.0, 4, 'X')
        bmesh.ops.create_cone(
            bm, cap_ends=True, segments=segments, radius1=r, radius2=r * taper, depth=length, matrix=along_y
        )
        if joint > 0.0:
            bmesh.ops.create_uvsphere(bm, u_segments=segments, v_segments=max(4, segments // 2), radius=r * joint)
        obj = _mesh_object(f"{rig.name}_{name}_mesh", bm, color, parent=rig)
        obj.parent_type = 'BONE'
        obj.parent_bone = name
        # A bone parent places children at the bone's tail; step back to its head.
        obj.location = (0.0, -length, 0.0)
        objects.append(obj)
    return objects


def add_tool(rig, bone: str, length: float, radius: float, color=RED):
    """A cone from a bone's tail onwards along the bone (a tool on a robot's flange), parented to the bone.

    It shows which way the bone points, which a rotation goal decides.
    """
    bm = bmesh.new()
    # Along +Y from the tail: a bone parent places its children at the bone's tail, in the bone's axes.
    along_y = Matrix.Translation((0.0, length / 2.0, 0.0)) @ Matrix.Rotation(-math.pi / 2.0, 4, 'X')
    bmesh.ops.create_cone(bm, cap_ends=True, segments=16, radius1=radius, radius2=radius * 0.15, depth=length,
                          matrix=along_y)
    obj = _mesh_object(f"{rig.name}_{bone}_tool", bm, color, parent=rig)
    obj.parent_type = 'BONE'
    obj.parent_bone = bone
    return obj


def add_bone_box(rig, bone: str, width: float, thickness: float, color=STEEL):
    """A box along a bone (width along its X, thickness along its Z), parented to it: a palm, a robot's body."""
    length = rig.data.bones[bone].length
    bm = bmesh.new()
    box = Matrix.Translation((0.0, length / 2.0, 0.0)) @ Matrix.Diagonal((width, length, thickness, 1.0))
    bmesh.ops.create_cube(bm, size=1.0, matrix=box)
    obj = _mesh_object(f"{rig.name}_{bone}_mesh", bm, color, parent=rig)
    obj.parent_type = 'BONE'
    obj.parent_bone = bone
    obj.location = (0.0, -length, 0.0)
    return obj


def add_sphere(name: str, location, radius: float, color=RED, parent=None, segments: int = 24):
    """A UV sphere mesh object (a ball, or a marker on a target)."""
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=segments, v_segments=max(4, segments // 2), radius=radius)
    obj = _mesh_object(name, bm, color, parent=parent)
    obj.location = location
    return obj


def add_box(name: str, location, size, color=STEEL):
    """A box mesh object centred on location, size (x, y, z): a work piece, a table."""
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=1.0, matrix=Matrix.Diagonal((*size, 1.0)))
    obj = _mesh_object(name, bm, color)
    obj.location = location
    return obj


def add_ground(size: float = 20.0, z: float = 0.0, color=GROUND):
    """A square ground plane."""
    bm = bmesh.new()
    bmesh.ops.create_grid(bm, x_segments=1, y_segments=1, size=size / 2.0)
    obj = _mesh_object("Ground", bm, color)
    obj.location = (0.0, 0.0, z)
    # The demo frames its camera on everything else; a ground plane is only backdrop.
    obj["fabrik_demo_frame"] = False
    return obj


# Measurements on the evaluated scene (what a viewer sees), shared by the demo and the tests.

def chain_of(rig, effector) -> list[str]:
    """The bones an effector moves, tip first."""
    names = []
    bone = rig.data.bones.get(effector.bone)
    while bone is not None and (effector.chain_length == 0 or len(names) < effector.chain_length):
        names.append(bone.name)
        bone = bone.parent
    return names


def effector_error(rig, effector) -> float:
    """World distance from the effector's tip (its bone's tail) to its target, as Blender evaluates them."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    tip = evaluated.matrix_world @ evaluated.pose.bones[effector.bone].tail
    target = effector.target.evaluated_get(depsgraph).matrix_world
    if effector.subtarget:
        target = target @ effector.target.evaluated_get(depsgraph).pose.bones[effector.subtarget].matrix
    return (tip - target.translation).length


def effector_turn(rig, effector) -> float | None:
    """The angle (radians) between the effector's tip bone and its target's rotation, as Blender evaluates them.

    None when the effector has no rotation goal. Compared in the armature's
    space (where the add-on solves), scale taken out of both sides.
    """
    if not effector.use_rotation:
        return None
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    tip = evaluated.pose.bones[effector.bone].matrix.to_quaternion()
    target = effector.target.evaluated_get(depsgraph).matrix_world
    if effector.subtarget:
        target = target @ effector.target.evaluated_get(depsgraph).pose.bones[effector.subtarget].matrix
    goal = (evaluated.matrix_world.inverted() @ target).to_3x3().normalized().to_quaternion()
    difference = tip.rotation_difference(goal)
    # Not difference.angle (2 acos w): mathutils works in single precision, where w rounds to 1 below ~0.05 degrees.
    return 2.0 * math.atan2(Vector(difference[1:]).length, abs(difference.w))


def effector_reach(rig, effector) -> tuple[float, float]:
    """(distance from the chain's fixed base to the target, the chain's reach), in world units, evaluated now.

    The reach adds up the bone lengths and the rest offsets between
    unconnected bones of the chain, at the rig's world scale.
    """
    depsgraph = bpy.context.evaluated_depsgraph_get()
    evaluated = rig.evaluated_get(depsgraph)
    world = evaluated.matrix_world
    to_world = world.to_3x3()
    bones = rig.data.bones
    chain = chain_of(rig, effector)
    reach = 0.0
    for child, parent in zip(chain, chain[1:] + [None]):
        bone = bones[child]
        reach += (to_world @ (bone.tail_local - bone.head_local)).length
        if parent is not None:
            reach += (to_world @ (bone.head_local - bones[parent].tail_local)).length
    base = world @ evaluated.pose.bones[chain[-1]].head
    target = effector.target.evaluated_get(depsgraph).matrix_world.translation
    return (target - base).length, reach


def measure(rig, margin: float = 0.02) -> list[tuple[str, float, bool]]:
    """Per enabled effector: (tip bone, error, whether its target is within (1 - margin) of the chain's reach)."""
    rows = []
    for effector in rig.fabrik.effectors:
        if effector.enabled and effector.target is not None:
            distance, reach = effector_reach(rig, effector)
            rows.append((effector.bone, effector_error(rig, effector), distance <= (1.0 - margin) * reach))
    return rows


# Rigify's generated human, for the tests and benchmarks that take one.

def disable_rigify() -> None:
    """Switch Blender's bundled Rigify off again, with the load_post handler it leaves behind.

    Rigify 5.0 appends a load_post handler at register and leaves it at
    unregister; it then raises on every later file load (its armature property
    is gone), which later code would read as an error of ours.
    """
    import addon_utils

    addon_utils.disable("rigify", default_set=True)
    for handler in list(bpy.app.handlers.load_post):
        if getattr(handler, "__module__", "").startswith("rigify"):
            bpy.app.handlers.load_post.remove(handler)


def generated_rigify():
    """A human rig Rigify generated from its metarig, in Object Mode (Rigify switched off again after)."""
    import addon_utils

    addon_utils.enable("rigify", default_set=True)
    try:
        bpy.ops.object.armature_human_metarig_add()
        bpy.ops.pose.rigify_generate()
        rig = bpy.context.object  # (the generated rig is made active; "rig" may be taken by another scene's)
    finally:
        disable_rigify()
    bpy.ops.object.mode_set(mode='OBJECT')
    return rig
