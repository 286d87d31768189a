# SPDX-License-Identifier: GPL-3.0-or-later
# Knee: bends one way about X, 0 to 150 degrees; no twist, no sideways swing.
from math import radians

import bpy

# FABRIK bone limits: Blender's own IK settings (Bone > Inverse Kinematics), set on the active pose bone
# and on every other selected pose bone.
context = bpy.context
bones = []
for bone in [context.active_pose_bone, *(getattr(context, "selected_pose_bones", None) or ())]:
    if bone is not None and bone not in bones:
        bones.append(bone)
for bone in bones:
    bone.lock_ik_x = False
    bone.lock_ik_y = True
    bone.lock_ik_z = True
    bone.use_ik_limit_x = True
    bone.use_ik_limit_y = False
    bone.use_ik_limit_z = False
    bone.ik_min_x = radians(0.0)
    bone.ik_min_y = radians(-180.0)
    bone.ik_min_z = radians(-180.0)
    bone.ik_max_x = radians(150.0)
    bone.ik_max_y = radians(180.0)
    bone.ik_max_z = radians(180.0)
    bone.ik_stiffness_x = 0.0
    bone.ik_stiffness_y = 0.0
    bone.ik_stiffness_z = 0.0
