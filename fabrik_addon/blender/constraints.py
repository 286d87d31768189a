# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn a rig's Blender IK constraints into FABRIK effectors, and back."""

from __future__ import annotations


def convert_ik_constraints(obj) -> tuple[list[str], list[str]]:
    """Add an effector for each active IK constraint of the armature and mute the constraint.

    Returns (what was converted, what was skipped and why). Nothing else on the
    rig changes; `restore_ik_constraints` undoes it.
    """
    converted, skipped = [], []
    effectors = obj.fabrik.effectors
    done = {(e.source_bone, e.source_constraint) for e in effectors if e.source_constraint}
    for pose_bone in obj.pose.bones:
        for constraint in pose_bone.constraints:
            if constraint.type != 'IK' or constraint.mute or (pose_bone.name, constraint.name) in done:
                continue
            label = f"'{constraint.name}' on '{pose_bone.name}'"
            if constraint.target is None:
                skipped.append(f"{label} has no target (targetless IK is not converted)")
                continue
            # Without "Use Tail" Blender's chain ends at the bone's head, i.e. at its parent's tail,
            # and counts its length from the parent.
            tip = pose_bone if constraint.use_tail else pose_bone.parent
            if tip is None:
                skipped.append(f"{label} does not use the tail of a bone without parent: nothing to move")
                continue
            effector = effectors.add()
            effector.bone = tip.name
            effector.target, effector.subtarget = constraint.target, constraint.subtarget
            effector.chain_length = constraint.chain_count
            effector.weight = constraint.weight
            effector.use_rotation = constraint.use_rotation
            effector.rotation_weight = constraint.orient_weight
            effector.pole_target, effector.pole_subtarget = constraint.pole_target, constraint.pole_subtarget
            effector.pole_angle = constraint.pole_angle
            effector.use_stretch = constraint.use_stretch
            effector.source_bone, effector.source_constraint = pose_bone.name, constraint.name
            constraint.mute = True
            converted.append(label)
    if converted:
        obj.fabrik.live = True
        obj.fabrik.active_effector = len(effectors) - 1
    return converted, skipped


def restore_ik_constraints(obj) -> list[str]:
    """Unmute the IK constraints that effectors were converted from and remove those effectors."""
    restored = []
    effectors = obj.fabrik.effectors
    for index in reversed(range(len(effectors))):
        effector = effectors[index]
        if not effector.source_constraint:
            continue
        pose_bone = obj.pose.bones.get(effector.source_bone)
        constraint = pose_bone.constraints.get(effector.source_constraint) if pose_bone else None
        if constraint is not None:
            constraint.mute = False
            restored.append(f"'{constraint.name}' on '{pose_bone.name}'")
        effectors.remove(index)
    settings = obj.fabrik
    settings.active_effector = max(0, min(settings.active_effector, len(effectors) - 1))
    if not len(effectors):
        settings.live = False  # (which gives the chains back the animator's pose)
    elif restored and settings.live:
        # Blender's IK takes its chains back from the animator's pose; the effectors left solve again from theirs.
        from . import solving

        solving.give_back(obj)
        obj.update_tag()
    return restored
