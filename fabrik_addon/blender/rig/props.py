# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK settings stored on the armature object: live solving, stopping rules and the effectors."""

from __future__ import annotations

import math

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)
from bpy.types import PropertyGroup

from ...core.solving.solvers import DESCRIPTIONS

#: The update callbacks that reach above this module (the live handler, the overlay, the effectors' records), by
#: name: `ui.updates` fills it when it registers, so that the properties stand below everything that reads them.
UPDATES: dict = {}


def _on(name: str):
    """An update callback that runs `UPDATES[name]`, once it is there."""

    def changed(owner, context: bpy.types.Context) -> None:
        callback = UPDATES.get(name)
        if callback is not None:
            callback(owner, context)

    return changed



def setting_changed(owner, _context: bpy.types.Context) -> None:
    """A setting the solve reads changed: a live rig solves at the next update (custom properties alone start
    none, so the rig is tagged for one; the handler sees the change in its inputs)."""
    obj = owner.id_data
    if obj.fabrik.live:
        obj.update_tag()


class FabrikBoneRef(PropertyGroup):
    """Where a bone an effector names sat when last seen (the item's name is the effector's field), so a rename
    is followed: a renamed bone keeps its rest place, parent and position among the armature's bones."""

    bone: StringProperty(name="Bone", description="The bone's name when this was taken")
    head: FloatVectorProperty(name="Head", size=3, description="The bone's rest head in armature space")
    tail: FloatVectorProperty(name="Tail", size=3, description="The bone's rest tail in armature space")
    z_axis: FloatVectorProperty(name="Z Axis", size=3, description="The bone's rest Z axis (its roll)")
    parent: StringProperty(name="Parent", description="The bone's parent's name")
    index: IntProperty(name="Index", default=-1, description="The bone's position among the armature's bones")


class FabrikMovedDriver(PropertyGroup):
    """A driver of a converted constraint's property (the item's name), moved onto its effector while converted."""

    path: StringProperty(name="Data Path", description="The driver's data path while it drives the effector")


class FabrikConverted(PropertyGroup):
    """One IK constraint that "Convert IK Constraints" muted (the item's name is its effector's): what Restore
    needs to find it again, even renamed, with its bone renamed, or with its effector removed."""

    bone: StringProperty(name="Bone", description="The pose bone that holds the constraint")
    constraint: StringProperty(name="Constraint", description="The constraint's name")
    index: IntProperty(name="Index", default=-1, description="The constraint's place in the bone's stack")
    target: StringProperty(name="Target", description="The constraint's target object's name")
    subtarget: StringProperty(name="Target Bone", description="The constraint's target bone")
    pole: StringProperty(name="Pole", description="The constraint's pole target object's name")
    pole_subtarget: StringProperty(name="Pole Bone", description="The constraint's pole target bone")
    # Convert takes the targets off the muted constraint (kept here), because even muted it ties the armature to
    # them in Blender's dependency graph and makes Blender evaluate the rig again whenever one moves.
    set_aside: BoolProperty(name="Targets Set Aside", description="Convert took the constraint's targets off it")
    chain_count: IntProperty(name="Chain Length", description="The constraint's chain length")
    bone_ref: PointerProperty(type=FabrikBoneRef)
    drivers: CollectionProperty(type=FabrikMovedDriver)


#: The iteration cap a rig starts with: a 1000-bone chain pulled from straight needs about 99 FABRIK
#: iterations, and a solve that converges or stalls stops well before it.
DEFAULT_ITERATIONS = 200
#: The largest Tolerance (a tenth of the rig's size): a larger one would call a tip "reached" far from its target.
TOLERANCE_MAX = 0.1


class FabrikHeldBone(PropertyGroup):
    """One bone live solving had written, as files saved before `held_bones.py`'s layout keep it: the values it wrote
    and the animator's values they replaced (the item's name is the bone's). Read once, to move them there."""

    rotated: BoolProperty(name="Rotated", description="Live solving wrote this bone's rotation")
    # Which bone it is, beyond its name: a renamed bone keeps its place among the bones and its rest head.
    index: IntProperty(name="Bone Index", default=-1, description="The bone's place among the armature's bones")
    head: FloatVectorProperty(name="Rest Head", size=3, description="The bone's rest head in armature space")
    mode: StringProperty(name="Rotation Mode", description="The bone's rotation mode when its rotation was written")
    written: FloatVectorProperty(name="Written", size=4, description="The rotation channel value live solving wrote")
    fk: FloatVectorProperty(name="Animator's Rotation", size=4, description="The rotation channel value it replaced")
    scaled: BoolProperty(name="Scaled", description="IK stretch wrote this bone's scale")
    written_scale: FloatVectorProperty(name="Written Scale", size=3, description="The scale IK stretch wrote")
    fk_scale: FloatVectorProperty(
        name="Animator's Scale", size=3, default=(1.0, 1.0, 1.0), description="The scale it replaced"
    )


class FabrikEffector(PropertyGroup):
    """One end effector: a tip bone that should reach a target."""

    enabled: BoolProperty(name="Enabled", default=True, description="Solve for this effector", update=setting_changed)
    bone: StringProperty(
        name="Tip Bone", description="Bone whose tail should reach the target", update=_on("bone")
    )
    target: PointerProperty(
        name="Target", type=bpy.types.Object, description="Object the tip bone reaches for",
        update=_on("target"),
    )
    subtarget: StringProperty(
        name="Target Bone", description="When the target is an armature, reach for this bone's head instead",
        update=_on("bone"),
    )
    chain_length: IntProperty(
        name="Chain Length",
        default=0,
        min=0,
        soft_max=255,
        description="How many bones from the tip upwards may move (0: all the way to the root)",
        update=setting_changed,
    )
    weight: FloatProperty(
        name="Branch Weight",
        default=1.0,
        min=0.0,
        soft_max=10.0,
        description="Where chains share bones, how hard this effector pulls compared with the others",
        update=setting_changed,
    )
    influence: FloatProperty(
        name="Influence",
        default=1.0,
        min=0.0,
        max=1.0,
        subtype='FACTOR',
        description=(
            "How much of the solve this effector's chain takes, as a constraint's influence: 0 leaves it in the "
            "animator's pose, 1 takes the solved pose (keyable: blend IK and FK over time)"
        ),
        update=setting_changed,
    )
    use_rotation: BoolProperty(
        name="Rotation",
        default=False,
        description="Also turn the tip bone to match the target's rotation",
        update=setting_changed,
    )
    rotation_weight: FloatProperty(
        name="Rotation Weight",
        default=1.0,
        min=0.0,
        max=1.0,
        subtype='FACTOR',
        description="How far the tip bone turns towards the target's rotation",
        update=setting_changed,
    )
    pole_target: PointerProperty(
        name="Pole Target",
        type=bpy.types.Object,
        description=(
            "Object that decides which way the chain bends, as Blender's IK pole: the chain's first bone turns "
            "its X axis, turned towards Z by the pole angle, to face it"
        ),
        update=_on("pole"),
    )
    pole_subtarget: StringProperty(
        name="Pole Bone", description="When the pole target is an armature, use this bone", update=_on("bone")
    )
    pole_angle: FloatProperty(
        name="Pole Angle",
        default=0.0,
        min=-3.141593,
        max=3.141593,
        subtype='ANGLE',
        description=(
            "As Blender's IK pole angle: the first bone's axis X cos(angle) + Z sin(angle) faces the pole; "
            "-90° points a knee bent by a positive turn about X at it"
        ),
        update=setting_changed,
    )
    use_stretch: BoolProperty(
        name="Stretch",
        default=False,
        description=(
            "As Blender's IK Stretch: when the target is out of reach, the chain's bones with an IK Stretch factor "
            "(Bone properties > Inverse Kinematics) grow to reach it, shared out by their factors, and are scaled "
            "to match (scale 1 again once they no longer stretch)"
        ),
        update=_on("stretch"),
    )
    pin: FloatProperty(
        name="Pin",
        default=0.0,
        min=0.0,
        max=1.0,
        subtype='FACTOR',
        description=(
            "How firmly the target is held at its Pin Location and Rotation (where it was when pinned, in world "
            "space) instead of where it is: 1 plants the tip there while the rest of the rig moves (keyable: "
            "Pin Target keys it over a range of frames, with blends in and out)"
        ),
        update=setting_changed,
    )
    pin_location: FloatVectorProperty(
        name="Pin Location", size=3, subtype='TRANSLATION', unit='LENGTH',
        description="Where the pin holds the target, in world space (keyed at the start of each pinned range)",
        update=setting_changed,
    )
    pin_rotation: FloatVectorProperty(
        name="Pin Rotation", size=4, subtype='QUATERNION', default=(1.0, 0.0, 0.0, 0.0),
        description="How the pin holds the target turned, in world space (for a rotation goal)",
        update=setting_changed,
    )
    pin_key: StringProperty(
        name="Pinned As", description="The name the effector's pin keys are under (they follow it when it is renamed)"
    )
    # Set by "Convert IK Constraints": the muted constraint this effector came from.
    source_bone: StringProperty(name="Source Bone", description="Bone that holds the IK constraint this effector replaces")
    source_constraint: StringProperty(
        name="Source Constraint", description="Blender IK constraint this effector replaces (muted while it does)"
    )
    # Kept up to date by `integrity.follow_renames`: where each named bone was, so renames are followed.
    bone_refs: CollectionProperty(type=FabrikBoneRef)
    # Names of a target and pole target that were deleted (the pointers are cleared so the file drops them).
    lost_target: StringProperty(name="Deleted Target", description="Name of the target object that was deleted")
    lost_pole: StringProperty(name="Deleted Pole Target", description="Name of the pole target that was deleted")
    # A converted constraint's drivers (a rig's own switches, as Rigify's pole switch) drive these instead.
    switch_mute: BoolProperty(
        name="Switched Off", description="The rig's switch (a driver taken over from the converted constraint) has "
        "turned this effector off",
    )
    switch_influence: FloatProperty(
        name="Switch Influence", default=1.0, min=0.0, max=1.0,
        description="The converted constraint's driven influence: 0 turns this effector off",
    )
    switched: BoolProperty(name="Switched", description="Drivers of a converted constraint drive this effector")


class FabrikRetargetBone(PropertyGroup):
    """One row of a retarget's mapping: a body part (the item's name, `core.motion.naming.ROLES`) and its bone in the
    captured clip and in the rig."""

    source: StringProperty(name="Source Bone", description="The clip's bone for this part (empty: none)")
    target: StringProperty(name="Rig Bone", description="The rig's bone for this part (empty: none)")


class FabrikSettings(PropertyGroup):
    """FABRIK settings of one armature object."""

    floor: PointerProperty(
        name="Floor",
        type=bpy.types.Object,
        description=(
            "An object whose XY plane (through its origin, without end; its Z axis up) the chains stay above: "
            "targets under it are lifted onto it, and FABRIK holds the chains' joints above it (not bones beyond "
            "the tips; IK stretch and the other solvers take the lifted targets only; an Influence below 1 blends "
            "the pose back towards the animator's). Clear the field to take it away"
        ),
        poll=lambda settings, obj: obj != settings.id_data,
        update=setting_changed,
    )
    root_mode: EnumProperty(
        name="Root",
        items=[
            ('OFF', "Off", "The root stays where its animation puts it"),
            ('OUT_OF_REACH', "Out of Reach",
             "The root moves (and turns, within Angle) only as far as a target beyond its chain's reach needs; a "
             "chain that reaches keeps reaching (pinned feet hold the hips back)"),
            ('FREE', "Free",
             "The root follows the effectors' pull by Weight, as a sub-base follows its branches, and moves as "
             "Out of Reach besides"),
        ],
        default='OFF',
        description=(
            "Let the root bone move and turn with the effectors: its location and rotation channels take the "
            "move (held over the animator's, as the chains' rotations are; Off gives them back)"
        ),
        update=setting_changed,
    )
    root_bone: StringProperty(
        name="Root Bone",
        description="The bone that moves (the hips, say); empty: the top bone above the first effector's chain. "
        "It must not be in an effector's chain",
        update=_on("root_bone"),
    )
    # Kept up to date by `integrity.follow_renames`: where the Root bone was, so its renames are followed.
    root_bone_ref: PointerProperty(type=FabrikBoneRef)
    root_weight: FloatProperty(
        name="Weight", default=0.5, min=0.0, max=1.0, subtype='FACTOR',
        description="Free: how much of the effectors' pull the root follows (their branch weights weigh them; "
        "1: the whole pull, so the chains keep their shape)",
        update=setting_changed,
    )
    root_distance: FloatProperty(
        name="Distance", default=0.5, min=0.0, subtype='DISTANCE', unit='LENGTH',
        description="How far the root may move from where its animation puts it (0: it does not move)",
        update=setting_changed,
    )
    root_angle: FloatProperty(
        name="Angle", default=0.0, min=0.0, max=math.pi, subtype='ANGLE',
        description="How far the root may turn from its animated rotation, about its head (0: it does not turn)",
        update=setting_changed,
    )
    solver: EnumProperty(
        name="Solver",
        items=[(key, label, description) for key, (label, description) in DESCRIPTIONS.items()],
        default='FABRIK',
        description="The IK method; FABRIK is the fastest and the only one with rotation goals and poles on trees",
        update=setting_changed,
    )

    influence: FloatProperty(
        name="Influence",
        default=1.0,
        min=0.0,
        max=1.0,
        subtype='FACTOR',
        description=(
            "How much of the solve the whole rig takes, on top of each effector's own influence: 0 leaves every "
            "chain in the animator's pose (keyable: blend IK and FK over time)"
        ),
        update=setting_changed,
    )
    live: BoolProperty(
        name="Live Solving",
        default=False,
        description=(
            "Re-solve on every frame change and whenever a target, pole, the rig or a chain bone's own channels "
            "change; off gives the chains back the pose you left them in"
        ),
        update=_on("live"),
    )
    iterations: IntProperty(
        name="Iterations", default=DEFAULT_ITERATIONS, min=1, soft_max=500, description="Most FABRIK iterations per solve",
        update=setting_changed,
    )
    tolerance: FloatProperty(
        name="Tolerance",
        default=1e-4,
        min=0.0,
        max=TOLERANCE_MAX,
        soft_max=0.01,
        precision=6,
        description=(
            "How close each tip must come to its target, as a fraction of the rig's size (its longest effector "
            "chain, laid end to end), so it means the same on a rig of any size or unit scale"
        ),
        update=setting_changed,
    )
    start: EnumProperty(
        name="Start From",
        items=(
            ('FK', "This Frame's Pose", "Start each solve from the pose animation gives this frame: the same frame always gives the same result"),
            ('PREVIOUS', "Previous Solution", "Start from the last solution: smoother while dragging, but the result depends on what came before"),
        ),
        default='FK',
        description="Where each solve starts",
        update=setting_changed,
    )
    effectors: CollectionProperty(type=FabrikEffector)
    active_effector: IntProperty(
        name="Active Effector", default=0, min=0,
        description="The effector the panel shows; picking one in the list makes its tip bone the active bone",
        update=_on("active_effector"),
    )
    #: What live solving wrote and what the animator had there before, per bone, in files saved before
    #: `held_bones.py`'s layout (which holds it now, beside these settings).
    held: CollectionProperty(type=FabrikHeldBone)
    #: The IK constraints "Convert IK Constraints" muted, for Restore (see FabrikConverted).
    converted: CollectionProperty(type=FabrikConverted)
    retarget_source: PointerProperty(
        name="Source",
        type=bpy.types.Object,
        description="The armature whose captured motion Retarget puts on this rig (an imported BVH or FBX clip)",
        poll=lambda settings, obj: obj.type == 'ARMATURE' and obj != settings.id_data,
    )
    retarget_bones: CollectionProperty(type=FabrikRetargetBone)
    retarget_index: IntProperty(name="Active Part", min=0)
    retarget_scale: FloatProperty(
        name="Scale", default=0.0, min=0.0, soft_max=10.0,
        description="How much the clip's hips motion is scaled onto this rig (0: the ratio of the rig's legs to the "
        "clip's)",
    )
    retarget_arm_scale: FloatProperty(
        name="Arm Scale", default=0.0, min=0.0, soft_max=10.0,
        description="How much the clip's hands' reach from the shoulders is scaled onto this rig (0: the ratio of "
        "each of the rig's arms to the clip's)",
    )


classes = (
    FabrikBoneRef, FabrikMovedDriver, FabrikConverted, FabrikHeldBone, FabrikEffector, FabrikRetargetBone,
    FabrikSettings,
)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    """Register the property groups and attach them to objects."""
    _register_classes()
    bpy.types.Object.fabrik = PointerProperty(type=FabrikSettings)


def unregister() -> None:
    """Detach the settings from objects and unregister the property groups."""
    del bpy.types.Object.fabrik
    _unregister_classes()


def effector_label(settings, index: int) -> str:
    """An effector as the panel, the report and the bake name it: its name, else its bone, else its place."""
    effectors = settings.effectors
    if 0 <= index < len(effectors) and (effectors[index].name or effectors[index].bone):
        return effectors[index].name or effectors[index].bone
    return f"#{index + 1}"


def tolerance_problem(obj: bpy.types.Object) -> str | None:
    """Why the rig's Tolerance cannot be used (not a number, below 0, above TOLERANCE_MAX: a file from elsewhere, a
    script that set the raw value), or None; live solving and the bake refuse it alike."""
    tolerance = obj.fabrik.tolerance
    if math.isfinite(tolerance) and 0.0 <= tolerance <= TOLERANCE_MAX * (1.0 + 1e-6):  # (stored as float32)
        return None
    return f"'{obj.name}' has a Tolerance that is not a number from 0 to {TOLERANCE_MAX:g}"


def unique_name(settings, base: str) -> str:
    """A name no effector or converted constraint's record has yet: `base`, else `base (2)`, `base (3)`..."""
    used = set(settings.effectors.keys()) | set(settings.converted.keys())
    key, n = base, 1
    while key in used:
        n += 1
        key = f"{base} ({n})"
    return key
