# SPDX-License-Identifier: GPL-3.0-or-later
"""One-click setup: an effector with a new target at the bone's tip, a pole that moves nothing, and the panel and
the active effector following what the animator selects."""

from __future__ import annotations

import math

import bpy
from bpy.app.handlers import persistent
from bpy.props import EnumProperty, FloatProperty, IntProperty
from bpy.types import Operator
from mathutils import Matrix, Vector

from ...core.goals.pole_angle import auto_pole_angle, auto_pole_angle_warm, pole_point
from ..effectors import effector_goals
from ..rig import animdata, armature, channels, props
from ..rig.props import FabrikEffector


def rig_for_panel(context: bpy.types.Context):
    """The armature the FABRIK panel shows: the active object when it is one, else the first armature whose
    effectors target (or pole at) the active object, so the tab stays while the animator drags a target."""
    obj = getattr(context, "object", None)
    if obj is None or obj.type == 'ARMATURE':
        return obj
    return rig_of_target(obj, getattr(context, "scene", None) or bpy.context.scene)


def rig_of_target(obj: bpy.types.Object, scene: bpy.types.Scene):
    """The first armature in the scene with an effector whose target or pole target is obj, else None."""
    for candidate in scene.objects if scene is not None else ():
        if candidate.type == 'ARMATURE' and any(
            e.target == obj or e.pole_target == obj for e in candidate.fabrik.effectors
        ):
            return candidate
    return None


def effector_for_bone(obj: bpy.types.Object, bone: str) -> int:
    """Index of the first effector whose tip bone, or target bone in this same rig, is `bone`; -1 if none."""
    for index, effector in enumerate(obj.fabrik.effectors):
        if effector.bone == bone or (effector.target == obj and effector.subtarget == bone):
            return index
    return -1


def sync_active_effector(obj: bpy.types.Object) -> bool:
    """Make the effector of the rig's active bone the active effector; True if it changed."""
    if obj is None or obj.type != 'ARMATURE' or obj.data.bones.active is None:
        return False
    index = effector_for_bone(obj, obj.data.bones.active.name)
    if index < 0 or obj.fabrik.active_effector == index:
        return False  # writing an equal value would still tag the rig for an update
    obj.fabrik.active_effector = index
    return True


def sync_target_effector(target) -> bool:
    """When the active object is a target or pole, make its effector the active one of its rig; True if changed."""
    rig = rig_of_target(target, bpy.context.scene)
    if rig is None:
        return False
    for index, effector in enumerate(rig.fabrik.effectors):
        if effector.target == target or effector.pole_target == target:
            if rig.fabrik.active_effector != index:
                rig.fabrik.active_effector = index
                return True
            return False
    return False


#: What the selection handler saw last: (active object, its active bone), so a click in the list is not overridden.
_last_selection: list = [None]


@persistent
def on_selection_change(_scene: bpy.types.Scene, _depsgraph: bpy.types.Depsgraph | None = None) -> None:
    """A changed active bone or object selects its effector (selection changes tag the rig for an update, which
    runs this; Blender's message bus says nothing about active bones clicked in the viewport)."""
    try:
        view_layer = bpy.context.view_layer
        obj = view_layer.objects.active if view_layer is not None else None
        if obj is None:
            return
        bone = obj.data.bones.active.name if obj.type == 'ARMATURE' and obj.data.bones.active else ""
        seen = (obj.name, bone)
        if seen == _last_selection[0]:
            return  # nothing new selected: most updates are drags and edits, and the list keeps its choice
        _last_selection[0] = seen
        if obj.type == 'ARMATURE':
            sync_active_effector(obj)
        else:
            sync_target_effector(obj)
    except Exception:  # never raise into Blender's event loop; the selection merely stays as it is
        pass


def rig_and_effector(context: bpy.types.Context, index: int):
    """(rig, effector) the panel shows, effector `index` or the active one; (rig, None) if out of range."""
    obj = rig_for_panel(context)
    if obj is None:
        return None, None
    settings = obj.fabrik
    index = settings.active_effector if index < 0 else index
    return obj, settings.effectors[index] if 0 <= index < len(settings.effectors) else None


def _evaluated_pose(obj: bpy.types.Object, context: bpy.types.Context):
    """The rig's pose bones as shown (evaluated), whose matrices are in armature space."""
    return obj.evaluated_get(context.evaluated_depsgraph_get()).pose.bones


def _collection_of(obj: bpy.types.Object, context: bpy.types.Context):
    """Where new helpers of a rig go: the rig's own collection, else the scene's."""
    return obj.users_collection[0] if obj.users_collection else context.scene.collection


def _new_empty(context: bpy.types.Context, obj: bpy.types.Object, name: str, matrix: Matrix, size: float, display: str):
    """A new empty with that world matrix, in the rig's collection."""
    empty = bpy.data.objects.new(name, None)
    empty.empty_display_type = display
    empty.empty_display_size = size
    empty.matrix_world = matrix
    _collection_of(obj, context).objects.link(empty)
    return empty


class FABRIK_OT_effector_add_with_target(Operator):
    """Add an effector on the active bone with a new target exactly at its tip, so the pose does not move; no
    need to select a target (works with Lock Object Modes)"""

    bl_idname = "fabrik.effector_add_with_target"
    bl_label = "Add Effector with New Target"
    bl_options = {'REGISTER', 'UNDO'}

    target_type: EnumProperty(
        name="Target",
        items=(
            ('EMPTY', "New Empty", "A new empty at the bone's tip, in the rig's collection"),
            ('BONE', "New Bone", "A new control bone at the tip in this armature, outside the chain (drag it "
                                 "in Pose Mode)"),
        ),
        default='EMPTY',
        description="What the new target is",
    )
    display_type: EnumProperty(
        name="Display As",
        items=(('SPHERE', "Sphere", ""), ('PLAIN_AXES', "Plain Axes", ""), ('CUBE', "Cube", "")),
        default='SPHERE',
        description="How the new empty is drawn",
    )
    chain_length: IntProperty(
        name="Chain Length", default=0, min=0, soft_max=255,
        description="How many bones from the tip upwards may move (0: all the way to the root)",
    )

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj = context.object
        if obj is None or obj.type != 'ARMATURE' or obj.mode == 'EDIT':
            return False
        return context.active_pose_bone is not None or obj.data.bones.active is not None

    def execute(self, context: bpy.types.Context):
        obj = context.object
        bone = context.active_pose_bone or obj.pose.bones.get(obj.data.bones.active.name)
        if obj.library is not None:
            self.report({'ERROR'}, f"'{obj.name}' is linked from a library: its effectors are not saved")
            return {'CANCELLED'}
        if self.chain_length > len(armature.chain_bones(obj, bone.name, 0)):
            self.report({'ERROR'}, f"Chain length {self.chain_length} is longer than the bones up to the root")
            return {'CANCELLED'}
        shown = _evaluated_pose(obj, context)[bone.name]
        # The target takes the tip bone's place and turn, so ticking Rotation later moves nothing either.
        local = shown.matrix.to_quaternion().to_matrix().to_4x4()  # (without a stretched bone's scale)
        local.translation = shown.tail
        name = f"IK-{bone.name}"
        if self.target_type == 'EMPTY':
            size = 0.25 * shown.length * armature.mean_scale(obj)
            target = _new_empty(context, obj, name, obj.matrix_world @ local, size, self.display_type)
            subtarget = ""
        else:
            subtarget = self._add_control_bone(obj, name, local, shown.length)
            target = obj
        effector = obj.fabrik.effectors.add()
        effector.name = props.unique_name(obj.fabrik, bone.name)  # (drivers and Restore find effectors by name)
        effector.bone = bone.name
        effector.chain_length = self.chain_length
        effector.subtarget = subtarget
        effector.target = target
        obj.fabrik.active_effector = len(obj.fabrik.effectors) - 1
        # The rig's first effector turns live solving on, so dragging the target moves the chain at once; a
        # later one leaves it as the animator set it (off after a bake, so the baked keys keep playing).
        if len(obj.fabrik.effectors) == 1:
            obj.fabrik.live = True
        obj.update_tag()  # a live rig solves with it at the next update: the target is at the tip, nothing moves
        what = f"bone '{subtarget}'" if subtarget else f"empty '{target.name}'"
        live = "drag it and the chain follows" if obj.fabrik.live else "tick Live Solving to make the chain follow"
        self.report({'INFO'}, f"Added effector '{effector.name}' reaching for new {what} at its tip: {live}")
        return {'FINISHED'}

    @staticmethod
    def _add_control_bone(obj: bpy.types.Object, name: str, local: Matrix, length: float) -> str:
        """A new unparented, non-deforming bone with that armature-space place and turn; its final name."""
        mode = obj.mode
        bpy.ops.object.mode_set(mode='EDIT')  # bones are added in Edit Mode only
        try:
            edit_bone = obj.data.edit_bones.new(name)
            head = local.translation
            edit_bone.head = head
            edit_bone.tail = head + local.col[1].to_3d().normalized() * 0.5 * length
            edit_bone.align_roll(local.col[2].to_3d())
            edit_bone.use_deform = False
            name = edit_bone.name  # Blender makes the name unique
        finally:
            bpy.ops.object.mode_set(mode=mode if mode != 'EDIT' else 'POSE')
        if obj.mode == 'POSE':  # the new control is the one to drag: select it alone
            for pose_bone in obj.pose.bones:
                animdata.set_selected(pose_bone, pose_bone.name == name)
        obj.data.bones.active = obj.data.bones[name]
        return name


def _start_matrices(obj: bpy.types.Object, context: bpy.types.Context, names: list[str]) -> dict:
    """Armature-space matrices of the chain's bones in the pose its solve starts from: as shown, except that a
    live rig starting from the animator's pose starts from its FK rotations (the ones live solving replaced),
    since Blender's pole rule reads the first bone's axes in the start pose (`channels.fk_start_pose`)."""
    if not (obj.fabrik.live and obj.fabrik.start == 'FK'):
        shown = _evaluated_pose(obj, context)
        return {name: shown[name].matrix.copy() for name in names}
    skeleton = armature.skeleton_of(obj)
    path = skeleton.path_to_root(skeleton.index(names[-1]))
    start = channels.fk_start_pose(obj, skeleton, [skeleton.names[b] for b in path])
    matrices = {}
    for name in names:
        b = skeleton.index(name)
        matrix = Matrix(start.frames[b].tolist()).to_4x4()
        matrix.translation = Vector(start.heads[b].tolist())
        matrices[name] = matrix
    return matrices


def _pole_frame(obj: bpy.types.Object, context: bpy.types.Context, effector: FabrikEffector):
    """(joints, first bone X, first bone Z, reach) of an effector's chain in the pose its solve starts from, in
    armature space."""
    names = armature.chain_bones(obj, effector.bone, effector.chain_length)
    if not names:
        return None
    matrices = _start_matrices(obj, context, names)
    first = matrices[names[0]]
    joints = [first.translation.copy()]
    for name in names:
        head = matrices[name].translation
        if (head - joints[-1]).length > 1e-9:
            joints.append(head.copy())  # an unconnected bone's head is a joint too
        joints.append(matrices[name] @ Vector((0.0, obj.data.bones[name].length, 0.0)))
    reach = sum((joints[i + 1] - joints[i]).length for i in range(len(joints) - 1))
    return joints, first.col[0].to_3d(), first.col[2].to_3d(), reach


def pole_angle_for(
    obj: bpy.types.Object, context: bpy.types.Context, effector: FabrikEffector, frame, pole_armature
) -> float | None:
    """The pole angle that leaves a chain (its `_pole_frame`) as it starts with its pole at that armature-space
    point; where each solve goes on from the previous one, as such a solve turns it (`auto_pole_angle_warm`)."""
    joints, x_axis, z_axis, _reach = frame
    if obj.fabrik.start == 'PREVIOUS':
        names = armature.chain_bones(obj, effector.bone, effector.chain_length)
        bones = obj.data.bones
        first = _start_matrices(obj, context, names[:1])[names[0]]
        to_first = bones[names[0]].matrix_local.inverted()
        points = [tuple(to_first @ bones[names[0]].head_local)]
        points += [tuple(to_first @ bones[name].tail_local) for name in names]
        angle = auto_pole_angle_warm(
            tuple(first.translation), tuple(first.to_quaternion().normalized()), points, tuple(joints[-1]),
            tuple(pole_armature),
        )
    else:
        angle = auto_pole_angle(joints[0], joints[-1], x_axis, z_axis, pole_armature)
    return None if angle is None else max(-math.pi, min(math.pi, angle))


def _solve_starts_elsewhere(
    obj: bpy.types.Object, context: bpy.types.Context, effector: FabrikEffector, start_joints, reach: float
) -> bool:
    """Whether the rig's live solve starts the effector's chain from a pose other than the one shown (Start From
    This Frame's Pose, after the target moved away from the tip): there the new pole's turn moves the chain."""
    if not (obj.fabrik.live and obj.fabrik.start == 'FK'):
        return False
    names = armature.chain_bones(obj, effector.bone, effector.chain_length)
    shown = _evaluated_pose(obj, context)
    tip = shown[names[-1]].matrix @ Vector((0.0, obj.data.bones[names[-1]].length, 0.0))
    heads = [shown[name].matrix.translation for name in names]
    start_heads = [Vector(joint) for joint in start_joints]
    tolerance = 1e-4 * max(reach, 1e-9)
    if (tip - start_joints[-1]).length > tolerance:
        return True
    return any(min((head - joint).length for joint in start_heads) > tolerance for head in heads)


class FABRIK_OT_pole_add(Operator):
    """Add a new empty as the effector's pole target, in front of the chain's bend, with the pole angle that
    leaves the chain where it is"""

    bl_idname = "fabrik.pole_add"
    bl_label = "Add Pole Target"
    bl_options = {'REGISTER', 'UNDO'}

    index: IntProperty(name="Index", default=-1, description="Effector to give a pole (-1: the active one)")
    distance: FloatProperty(
        name="Distance", default=1.0, min=0.01, soft_max=5.0,
        description="How far from the chain's knee the pole goes, as a fraction of the chain's length",
    )

    @classmethod
    def poll(cls, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, -1)
        return effector is not None and obj.mode != 'EDIT'

    def execute(self, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, self.index)
        if effector is None or effector.bone not in obj.data.bones:
            self.report({'ERROR'}, "The effector needs a tip bone of the rig first")
            return {'CANCELLED'}
        frame = _pole_frame(obj, context, effector)
        joints, x_axis, z_axis, reach = frame
        where = pole_point(joints, x_axis, z_axis, self.distance * reach)
        angle = None if where is None else pole_angle_for(obj, context, effector, frame, where)
        if angle is None:
            self.report({'ERROR'}, "No pole angle leaves this chain where it is (no length, or no side to face)")
            return {'CANCELLED'}
        size = 0.1 * reach * armature.mean_scale(obj)
        pole = _new_empty(context, obj, f"Pole-{effector.bone}", obj.matrix_world @ Matrix.Translation(Vector(where)),
                          size, 'PLAIN_AXES')
        effector.pole_subtarget = ""
        effector.pole_angle = angle
        effector.pole_target = pole
        obj.update_tag()
        if _solve_starts_elsewhere(obj, context, effector, joints, reach):
            # Blender's pole turns the pose each solve starts from; from a pose other than the one shown no angle
            # gives the shown chain back (the turned start solves to another pose), so say so rather than surprise.
            self.report({'WARNING'}, f"Added pole '{pole.name}' (pole angle {math.degrees(angle):.1f}°); the chain "
                        "moves: live solving starts from this frame's pose, where the tip is away from the target. "
                        "Add poles before moving targets, or set Start From to Previous Solution")
        else:
            self.report({'INFO'}, f"Added pole '{pole.name}' with pole angle {math.degrees(angle):.1f}°")
        return {'FINISHED'}


class FABRIK_OT_pole_angle_auto(Operator):
    """Set the pole angle so that the pole leaves the chain as it is now (for a pole target placed by hand)"""

    bl_idname = "fabrik.pole_angle_auto"
    bl_label = "Auto Pole Angle"
    bl_options = {'REGISTER', 'UNDO'}

    index: IntProperty(name="Index", default=-1, description="Effector whose pole angle to set (-1: the active one)")

    @classmethod
    def poll(cls, context: bpy.types.Context):
        _obj, effector = rig_and_effector(context, -1)
        return effector is not None and effector.pole_target is not None

    def execute(self, context: bpy.types.Context):
        obj, effector = rig_and_effector(context, self.index)
        if effector is None or effector.pole_target is None or effector.bone not in obj.data.bones:
            self.report({'ERROR'}, "The effector needs a tip bone and a pole target first")
            return {'CANCELLED'}
        depsgraph = context.evaluated_depsgraph_get()
        try:
            world = effector_goals.world_matrix(effector.pole_target, effector.pole_subtarget, depsgraph)
        except effector_goals.EffectorError as exc:
            self.report({'ERROR'}, f"Cannot place the pole: {exc}")
            return {'CANCELLED'}
        where = obj.matrix_world.inverted_safe() @ world.translation
        frame = _pole_frame(obj, context, effector)
        angle = None if frame is None else pole_angle_for(obj, context, effector, frame, where)
        if angle is None:
            self.report({'ERROR'}, "The pole lies on the chain's line: it faces no side")
            return {'CANCELLED'}
        effector.pole_angle = angle
        self.report({'INFO'}, f"Pole angle {math.degrees(angle):.1f}°")
        return {'FINISHED'}


def draw_pose_ik_menu(self, _context: bpy.types.Context) -> None:
    """Pose > Inverse Kinematics: our one-click setup beside Blender's own Add IK."""
    self.layout.separator()
    self.layout.operator(FABRIK_OT_effector_add_with_target.bl_idname, text="FABRIK Effector with New Target")


classes = (FABRIK_OT_effector_add_with_target, FABRIK_OT_pole_add, FABRIK_OT_pole_angle_auto)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    """Register the operators, the menu entry and the selection handler (once)."""
    _register_classes()
    bpy.types.VIEW3D_MT_pose_ik.append(draw_pose_ik_menu)
    if on_selection_change not in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.append(on_selection_change)


def unregister() -> None:
    """Remove everything register added."""
    if on_selection_change in bpy.app.handlers.depsgraph_update_post:
        bpy.app.handlers.depsgraph_update_post.remove(on_selection_change)
    bpy.types.VIEW3D_MT_pose_ik.remove(draw_pose_ik_menu)
    _unregister_classes()
    _last_selection[0] = None
