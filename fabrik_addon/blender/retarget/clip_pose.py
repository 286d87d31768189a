# SPDX-License-Identifier: GPL-3.0-or-later
"""The clip's pose on the rig over every frame, and the goals that correct its ends.

`hold_of` finds how the rig's driven bones hang on each other (constraints
and all); `Copy.make` takes the clip's posed bones over all frames (read by
`job`) through the `rests.Layout` to the rig's local
rotations and hips locations (`core.motion.retarget`), and to the ends' goals:
each wrist from its shoulder scaled by the arms' lengths, each ankle from
its hip by the legs', the feet held where they stand, heel and toe,
grounded on the floor.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np
from mathutils import Matrix, Vector

from ...core.math.matrix_rows import unit_frames
from ...core.motion import retarget
from ..rig.armature import pose_matrices
from . import setup
from .rests import Layout
from .setup import LIMBS

#: How far (a share of the leg's reach) a held foot may be out of the leg's reach before the hips come down: a
#: foot the clip's own slide takes that little further is taken in to the leg instead.
SLACK = 0.005


def hold_of(obj: bpy.types.Object, names: list[str]) -> retarget.Hold:
    """How the driven bones (`names`, parents first) hang on each other in this rig, found by turning each in turn
    and seeing which bones turn with it and which it carries (Blender evaluates the rig, constraints and all);
    their channels are as they were after."""
    pose_bones = [obj.pose.bones[n] for n in names]
    kept = [(pb.rotation_quaternion.copy(), pb.rotation_euler.copy(), tuple(pb.rotation_axis_angle), pb.location.copy(),
             pb.scale.copy()) for pb in pose_bones]
    count = len(names)
    depth = [len(obj.data.bones[n].parent_recursive) for n in names]
    turns_with, moves_with = [-1] * count, [-1] * count
    test = Matrix.Translation((0.1, 0.2, 0.3)) @ Matrix.Rotation(1.0, 4, Vector((1.0, 2.0, 3.0)).normalized())
    # (each bone's own scale stays: the copy keys its turn and the hips' place, never its scale)
    scales = [Matrix.Diagonal(pb.scale.to_4d()) for pb in pose_bones]
    try:
        for pb, scale in zip(pose_bones, scales):
            pb.matrix_basis = scale
        rest = _evaluated(obj, names)
        rest_turns = unit_frames(rest)
        for a, pb in enumerate(pose_bones):
            pb.matrix_basis = test @ scales[a]
            probe = _evaluated(obj, names)
            pb.matrix_basis = scales[a]
            turn = unit_frames(probe[a]) @ rest_turns[a].T
            move = probe[a] @ np.linalg.inv(rest[a])
            for k in range(count):
                if k == a:
                    continue
                turned = unit_frames(probe[k])
                if (np.abs(turned - rest_turns[k]).max() > 1e-3 and np.abs(turned - turn @ rest_turns[k]).max() < 1e-4
                        and (turns_with[k] < 0 or depth[a] > depth[turns_with[k]])):
                    turns_with[k] = a
                moved = probe[k][:3, 3]
                carried = np.abs(moved - (move @ rest[k][:, 3])[:3]).max() < 1e-4
                if (np.abs(moved - rest[k][:3, 3]).max() > 1e-4 and carried
                        and (moves_with[k] < 0 or depth[a] > depth[moves_with[k]])):
                    moves_with[k] = a
    finally:
        for pb, (quaternion, euler, axis_angle, location, scale) in zip(pose_bones, kept):
            pb.rotation_quaternion, pb.rotation_euler = quaternion, euler
            pb.rotation_axis_angle, pb.location, pb.scale = axis_angle, location, scale
        bpy.context.view_layer.update()
    return retarget.Hold(rest, turns_with, moves_with)


def _evaluated(obj: bpy.types.Object, names: list[str]) -> np.ndarray:
    """The bones' posed matrices (N, 4, 4, armature space) as Blender evaluates the rig now."""
    bpy.context.view_layer.update()
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    order = {b.name: i for i, b in enumerate(evaluated.pose.bones)}
    return pose_matrices(evaluated)[[order[n] for n in names]].astype(np.float64)


@dataclass
class Copy:
    """The clip's pose on the rig over every frame, and the goals that correct its ends."""

    #: The driven rig bones, parents first; each one's armature-space rotation (F, 3, 3) and local rotation.
    names: list[str]
    turned: dict[int, np.ndarray]
    local: dict[int, np.ndarray]
    hold: retarget.Hold
    hips: str
    hips_location: np.ndarray
    #: Per limb effector ("hand.L"...): its goal (F, 3) in world space; the feet's contacts (ankle, toe).
    goals: dict[str, np.ndarray]
    contacts: dict[str, tuple[list, list]]
    #: How far the clip was moved up to stand on the rig's floor (world units).
    grounded: float
    #: Per hand, the frames where the clip's hand is further from its shoulder than the rig's arm reaches, scaled
    #: (a bone stretched in the clip): the arm goes straight towards it.
    beyond: dict[str, int]

    @classmethod
    def make(cls, obj: bpy.types.Object, layout: Layout, hold: retarget.Hold, names: list[str], clip_posed: np.ndarray,
             clip_world: np.ndarray, numbers: list[int], hold_feet: bool = True) -> Copy:
        """The copy from the clip's posed bones (F, len(layout.read), 4, 4) in its armature space and its world
        matrices (F, 4, 4) on the frames `numbers`; `names`: the driven rig bones as `hold` has them."""
        pairs = setup.mapping(obj)
        clip, rig = layout.clip, layout.rig
        frames = len(clip_posed)
        world = clip_world[:, None] @ clip_posed
        rest = np.stack([clip.rotation(name) for name in layout.read])
        turns = retarget.turns(unit_frames(world), rest)
        turns = layout.turn @ turns @ layout.turn.T
        bad = ~np.isfinite(turns).all(axis=(1, 2, 3))
        if bad.any():  # (a clip bone scaled to nothing has no turn)
            raise ValueError(f"the clip's pose cannot be put on the rig on frame {numbers[int(np.argmax(bad))]} "
                             "(a bone scaled to nothing?)")
        at = {name: k for k, name in enumerate(layout.read)}
        index = {name: k for k, name in enumerate(names)}
        rig_turn = unit_frames(rig.world)
        # (the turns are onto the bones' rests as the rig is built; how they hang now is the hold's business)
        rest_turns = np.stack([rig.rotation(name) for name in names])
        wanted: dict[int, np.ndarray] = {}
        spans: dict[tuple, np.ndarray] = {}
        for name, sourced in layout.sources.items():
            if len(sourced) == 1:
                turn = turns[:, at[sourced[0]]]
            else:
                span, count, place = sourced
                if (span, count) not in spans:
                    spans[span, count] = retarget.sampled(turns[:, [at[n] for n in span]], count)
                turn = spans[span, count][:, place - 1]
            k = index[name]
            wanted[k] = rig_turn.T @ (turn @ layout.aligned.get(name, np.eye(3)) @ rest_turns[k])
        # A hinged knee or elbow bends about its hinge alone, in the plane the clip's bends in.
        for name, upper, lower, _, _ in LIMBS:
            if name in layout.hinges:
                top, bottom = index[pairs[upper][1]], index[pairs[lower][1]]
                relative = rest_turns[top].T @ rest_turns[bottom]
                wanted[top], wanted[bottom] = retarget.hinged(wanted[top], wanted[bottom], relative,
                                                                *layout.hinges[name])
        # The hips: the middle of the hip joints where the clip's is in the rig's space.
        k = [at[pairs[f"thigh.{s}"][0]] for s in "LR"]
        clip_middle = (world[:, k[0], :3, 3] + world[:, k[1], :3, 3]) / 2.0
        middle = (clip_middle - layout.clip_ground) @ layout.turn.T * layout.scale + layout.rig_ground
        hips = pairs["hips"][1]
        h = index[hips]
        offset = rest_turns[h].T @ (layout.rig_middle - rig.head(hips))
        heads = middle - (rig_turn @ wanted[h]) @ offset
        inverse = np.linalg.inv(rig.world)

        def pose(shift: np.ndarray) -> tuple:
            """The rig posed with its hips moved by `shift` (F, 3, world), and the ends' goals there."""
            armature = (np.concatenate((heads + shift, np.ones((frames, 1))), axis=1) @ inverse.T)[:, :3]
            posed, local, locations = hold.pose(wanted, heads={h: armature})
            return posed, local, locations, *cls._goals(obj, layout, pairs, index, posed, world, at)

        up = np.zeros((frames, 3))
        # The clip grounded: its lowest standing ankle at the rig's own ankle height above the floor (found where
        # it stands as it is: standing is measured from its own lowest, wherever that is).
        _, _, _, goals, toes = pose(up)
        runs = {s: retarget.stands(goals[f"foot.{s}"], toes[s], layout.leg[s]) for s in "LR"}
        heights = [retarget.grounding(goals[f"foot.{s}"], toes[s], runs[s], layout.ankle_height[s]) for s in "LR"]
        if all(height is None for height in heights):  # (never standing: its lowest ankle)
            heights = [goals[f"foot.{s}"][:, 2].min() - layout.ankle_height[s] for s in "LR"]
        lift = layout.floor - min(height for height in heights if height is not None)
        up[:, 2] = lift
        posed, local, locations, goals, toes = pose(up)
        contacts, feet = {}, {}
        for s in "LR":
            feet[s], ankle_runs, toe_runs = retarget.held(
                goals[f"foot.{s}"], toes[s], runs[s] if hold_feet else ([], []), layout.floor)
            contacts[f"foot.{s}"] = (ankle_runs, toe_runs)
        # The hips lowered where a leg cannot reach its ankle's goal (a rig of other proportions, a held foot);
        # a held foot that the leg misses by a hair (the clip's own foot slid there) is taken in to the leg instead.
        def hip_joints() -> dict:
            return {s: _at(rig.world, posed[:, index[pairs[f"thigh.{s}"][1]]]) for s in "LR"}

        joints = hip_joints()
        drop = np.zeros(frames)
        for s in "LR":
            drop = np.maximum(drop, retarget.lowered(feet[s] - joints[s], (1.0 + SLACK) * layout.reach[f"foot.{s}"]))
        if drop.any():
            up[:, 2] -= drop
            posed, local, locations, goals, toes = pose(up)
            joints = hip_joints()
        # A clip's limb held straight is the rig's held as straight as it goes (a hinge may stop short of it); a
        # clip's hand or foot further than that (a bone stretched in the clip) is counted.
        beyond = {}
        for name, upper, _, _, _ in LIMBS:
            top = _at(rig.world, posed[:, index[pairs[upper][1]]])
            goal = feet[name[-1]] if name.startswith("foot") else goals[name]
            goals[name] = retarget.within(top, goal, layout.reach[name])
            far = np.linalg.norm(goal - goals[name], axis=1) > 0.01 * layout.reach[name]
            if name.startswith("hand"):  # (a held foot the hips came down for is not beyond its leg)
                beyond[name] = int(far.sum())
        return cls(names, wanted, local, hold, hips, locations[h], goals, contacts, float(lift), beyond)

    @staticmethod
    def _goals(obj: bpy.types.Object, layout: Layout, pairs, index, posed, clip_world, at) -> tuple[dict, dict]:
        """Each limb's goal in world space: the rig's joint at the limb's top plus the clip's reach from its own,
        turned into the rig's space and scaled by the limbs' lengths; and each foot's toe where the copy puts it
        beside its ankle."""
        world = layout.rig.world
        rig_turn = unit_frames(world)
        source = obj.fabrik.retarget_source.data.bones
        goals, toes = {}, {}

        def tail(name: str) -> np.ndarray:
            """A driven rig bone's tail over the frames, in world space."""
            return _at(world, posed[:, index[name]], (0.0, obj.data.bones[name].length, 0.0))

        for name, upper, lower, end, _ in LIMBS:
            s = name[-1]
            scale = layout.arm_scale[s] if name.startswith("hand") else layout.leg_scale[s]
            clip_top = clip_world[:, at[pairs[upper][0]], :3, 3]
            if end in pairs:  # (where the clip's hand or foot begins: its bones' tails may point anywhere)
                clip_end = clip_world[:, at[pairs[end][0]], :3, 3]
            else:
                length = source[pairs[lower][0]].length
                clip_end = (clip_world[:, at[pairs[lower][0]]] @ np.array([0.0, length, 0.0, 1.0]))[:, :3]
            top = _at(world, posed[:, index[pairs[upper][1]]])
            goals[name] = top + (clip_end - clip_top) @ layout.turn.T * scale
            if end in pairs:  # (a forearm or shin whose tail is off the wrist or ankle carries it along)
                rig = layout.rig
                off = rig.rotation(pairs[lower][1]).T @ (rig.tail(pairs[lower][1]) - rig.head(pairs[end][1]))
                goals[name] = goals[name] + (rig_turn @ unit_frames(posed[:, index[pairs[lower][1]]])) @ off
            if name.startswith("foot"):
                ankle = tail(pairs[lower][1])
                foot = pairs.get(f"foot.{s}")
                toes[s] = goals[name] + ((tail(foot[1]) if foot else ankle) - ankle)
        return goals, toes

    def turned_ends(self, solved: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every driven bone's local rotation once some bones' local rotations are `solved` (F, 3, 3): the others
        keep their turns in the world (a hand on a solved forearm turns as the clip's)."""
        index = {name: k for k, name in enumerate(self.names)}
        _, local, _ = self.hold.pose(self.turned, local={index[n]: m for n, m in solved.items()})
        return {self.names[k]: m for k, m in local.items()}


def _at(world: np.ndarray, posed: np.ndarray, point=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Where a point of a posed bone's own space (its head by default) is over the frames (`posed`: (F, 4, 4),
    armature space), in world space."""
    return np.einsum("ij,fj->fi", world, posed @ np.append(point, 1.0))[:, :3]
