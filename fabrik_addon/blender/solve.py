# SPDX-License-Identifier: GPL-3.0-or-later
"""One solve of a rig: one read, one solve, one write.

`read` takes from Blender what a solve needs: the goals in armature space
(`effector_goals`), the rig's plan (`core.solving.plan`, kept with its skeleton), and the
moving bones' rotation channels with the animator's values under them
(`channels`), all in bulk. `solve` runs the plan from the animator's pose, or
from the previous solution, on plain floats. `write` sets the solved rotations
in one bulk write per channel kind, holds the animator's values under them
(`held_bones`) and writes IK stretch. `solve_object` is the three for one rig; live
solving (`live`) and the bake (`bake`) use them too.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import bpy
import numpy as np

from ..core import DESCRIPTIONS, Goal, Skeleton, SolveReport, SolveSettings
from ..core.goals import stretch
from ..core.goals.floor import Floor
from ..core.goals.root import away
from ..core.math import quat, rotation_channels
from ..core.math.quat import Quat
from ..core.model.tree import Start, chain_reach
from ..core.solving.plan import Carry, Plan, plan_for
from .effectors import effector_goals
from .effectors.effector_goals import Gathered
from .effectors.effector_values import EffectorValues
from .rig import armature, editable, held_bones, memory, moving_root
from .rig.channels import (
    Channels,
    PoseRead,
    channel_values,
    give_back,
    hung_frames,
    node_indices,
    read_channels,
    read_pose,
    release_others,
    start_pose,
    write_channels,
)
from .rig.floor import floor_plane
from .rig.status import DeferredStatus, RigStatus, concluded, say_influence, show, switched_off

__all__ = ["Read", "Solution", "compute", "not_finite", "read", "solve", "solve_object", "write"]


@dataclass
class Read:
    """What one solve of a rig read from Blender (`read`): enough to solve it (`solve`) and write it (`write`)."""

    obj: object
    #: The effectors read (which were solved, and why the others were not) and the goals of those solved, with
    #: when reading began (a frame that goes on from this read sets its own goals and time).
    gathered: Gathered
    goals: list[Goal]
    began: float
    plan: Plan
    settings: SolveSettings
    #: The moving bones' rotation channels (the plan's nodes, in its order), with the animator's values.
    channels: Channels
    #: Per node: the animator's rotation (a unit quaternion), its location channel (None for none), and the frame
    #: and head of the fixed bone it hangs from (None for none: a node with a moving parent, or a root bone; all
    #: None where one of those bones has no usable frame, and the solve starts from the whole pose).
    fk: list[Quat]
    translations: list
    fixed: list | None
    #: The previous solution's rotations per node where the solve starts from it (Start From: Previous
    #: Solution, a continuous bake), else None: it starts from the animator's pose.
    previous: list[Quat] | None
    #: Per node, how much of the solve it takes (None: all of it).
    influence: list[float] | None
    pose: PoseRead
    limit_problems: list[str]
    #: IK stretch: per bone whose scale a stretch may set, whether it inherits its parent's scale in Blender.
    inherits_scale: dict[int, bool]
    #: The root that moves (`moving_root`), where the rig's Root is on: its bone's name; and why a Root that is on does
    #: not move (the rig is solved with it where it stands).
    root: str | None = None
    root_problem: str | None = None
    #: The root's location and rotation as the animator has them (`moving_root.read`), which the write holds.
    root_fk: tuple | None = None
    _start: object = None

    def start(self):
        """Where the solve starts (`core.solving.plan.Plan.start`): the previous solution, or the animator's pose (kept
        while what it is made from stays: `moved` says it did)."""
        if self.previous is None and self._start is not None:
            return self._start
        self._start = self._made_start()
        return self._start

    @property
    def held_root(self) -> bool:
        """Whether live solving holds a root it moved (`moving_root`)."""
        stored = self.channels.held
        return len(stored) > 0 and bool(stored.column("moved").any())

    def moved(self) -> None:
        """Say that what the start is made from changed (the frames the chains hang from, say)."""
        self._start = None

    def _made_start(self):
        """`start`, made."""
        plan, obj = self.plan, self.obj
        rotations = self.previous or self.fk
        bones = plan.bones
        pose = lambda: start_pose(obj, plan.skeleton, dict(zip(bones, _matrices(rotations))))  # noqa: E731
        if self.fixed is None:
            return Start.of_pose(plan.skeleton, plan.tree, pose())
        return plan.start(rotations, self.translations, self.fixed, pose)


@dataclass
class Solution:
    """What a solve made of a rig: each moving bone's local rotation (a unit quaternion, before any influence
    blend), IK stretch's scale channel values, and the report."""

    rotations: list[Quat]
    scales: dict[int, float]
    report: SolveReport
    #: The root's location and rotation channel values where it moves (`moving_root.channel_values`), else None; and
    #: how far that is from its animated place (armature units) and turned from it (radians).
    root: tuple | None = None
    away: tuple[float, float] | None = None
    #: The plan's solve alone (no reading, no writing), in seconds.
    solver_seconds: float = 0.0


def settings_of(obj: bpy.types.Object, warm: bool, size: float, floor: Floor | None = None) -> SolveSettings:
    """Core settings for a rig of this size: the tolerance is a fraction of it; starting from a previous
    solution favours continuity over exploring; `floor`: its Floor in armature space (`floor.floor_plane`)."""
    settings = obj.fabrik
    return SolveSettings(
        max_iterations=settings.iterations, tolerance=settings.tolerance * size, explore=not warm, floor=floor,
        from_previous=settings.start == 'PREVIOUS',
    )


def rig_size(plan: Plan) -> float:
    """The rig's size for tolerances: its longest effector chain's bones laid end to end (armature units)."""
    tree = plan.tree
    return max(chain_reach(tree, chain) for chain in tree.goal_chain)


def read(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, gathered: Gathered, pose: PoseRead,
    previous: dict | None = None
) -> tuple[Read | None, RigStatus]:
    """Read one rig's solve from Blender (`gathered`: its goals, read and checked): the read, or None where there is
    nothing to solve, and the status it starts with; with `previous` (a continuous bake's last solution) the moving
    bones start there."""
    skeleton, goals, used, problems, began = gathered
    result = RigStatus(effectors=dict(problems))
    if not goals:
        result.message = "no effector to solve" if not problems else "no effector can be solved"
        result.ok = all(switched_off(p) for p in problems.values())
        return None, result
    settings = obj.fabrik
    plan = plan_for(skeleton, goals, settings.solver)
    bones = plan.bones
    if previous is None and settings.start == 'PREVIOUS':
        previous = memory.of(obj).solution
    start = None if previous is None or not all(b in previous for b in bones) else [previous[b] for b in bones]
    at = node_indices(obj, plan.tree)
    read_channels_ = read_channels(obj, [skeleton.names[b] for b in bones], at.tolist(), depsgraph, pose)
    fk = [rotation_channels.channel_to_quaternion(m, v) for m, v in zip(read_channels_.modes, read_channels_.fk_values)]
    translations = [tuple(t) if any(t) else None for t in pose.channel("location", 3)[at].tolist()]
    # (None where a bone above a chain has no usable frame: live solving refuses such chains first
    # (`effector_goals.usable_goals`); a bake solves them from the whole pose, and leaves what is not finite unkeyed)
    fixed = hung_frames(obj, skeleton, plan.tree, plan.local)
    solve_settings = settings_of(obj, start is not None, rig_size(plan))
    # (a Root that cannot move is said, and the rig solved as if it were off: the chains fit where it stands)
    root_name, root_problem = moving_root.usable(obj, plan, goals)
    root_fk = None
    try:
        plane = floor_plane(obj, depsgraph)
    except ValueError as exc:  # (`effector_goals.unusable_rig` says so before anything is read; a script may not ask)
        result.message, result.ok = str(exc), False
        return None, result
    if root_name is not None:
        try:
            moving, root_fk = moving_root.read(obj, skeleton, root_name, depsgraph)
            solve_settings = replace(solve_settings, root=moving)
        except ValueError as exc:
            root_name, root_problem = None, str(exc)
    return Read(
        obj, gathered, goals, began, plan, replace(solve_settings, floor=plane), read_channels_, fk,
        translations, fixed, start, effector_goals.influences(obj, depsgraph, plan.tree, used), pose,
        armature.limit_problems(obj),
        armature.inherits_scale(obj, skeleton, stretch.scalable(skeleton, goals)) if plan.stretch else {},
        root_name, root_problem, root_fk,
    ), result


def solve(read_: Read, carry: Carry | None = None) -> Solution:
    """Solve what `read` read (`carry`: what continuity mode keeps between frames, where the caller keeps it).
    Raises ValueError where the rig's solver cannot take the rig (the two-bone one on a longer chain, say)."""
    plan = read_.plan
    start = read_.start()
    began = time.perf_counter()
    outcome = plan.solve(read_.goals, start, read_.settings, carry if read_.previous is not None else None)
    seconds = time.perf_counter() - began
    scales = {}
    if outcome.pose is not None and plan.stretch:
        skeleton = plan.skeleton
        scales = scale_channels(skeleton, stretch.scales(skeleton, outcome.pose), read_.inherits_scale)
    root = off = None
    if outcome.root is not None:
        root = moving_root.channel_values(read_.obj, read_.root, outcome.root)
        off = away(outcome.root, read_.settings.root.home)
    return Solution(plan.rotations(start, outcome), scales, outcome.report, root, off, seconds)


def status_of(read_: Read, solved: Solution, result: RigStatus) -> RigStatus:
    """The status of a solve, put into words when first read (`status.DeferredStatus`)."""
    gathered, plan = read_.gathered, read_.plan

    def words() -> RigStatus:
        concluded(
            result, plan.tree, read_.goals, gathered.used, solved.report, read_.settings.tolerance,
            read_.limit_problems, read_.began,
        )
        if read_.influence is not None:
            say_influence(result, read_.influence)
        if read_.root_problem:
            result.ok, result.message = False, f"{read_.root_problem}; {result.message}"
        return result

    deferred = DeferredStatus(words)
    deferred.report, deferred.seconds = solved.report, time.perf_counter() - read_.began
    deferred.solver_seconds = solved.solver_seconds
    return deferred


def shown(read_: Read, solved: Solution) -> list[Quat]:
    """The rotations the moving bones are posed with: the solve, blended with the animator's where an influence
    is below 1."""
    if read_.influence is None:
        return solved.rotations
    return [
        q if w >= 1.0 else quat.slerp(fk, q, max(0.0, w)) for q, fk, w in zip(solved.rotations, read_.fk, read_.influence)
    ]


def not_finite(read_: Read, solved: Solution) -> str | None:
    """Why a solve must not be written (a rotation that is not a number, the animator's or the solve's), or None.
    (Every value summed first: a NaN or an infinity makes the sum none, and that is the rare case.)"""
    names, bones = read_.plan.skeleton.names, read_.plan.bones
    fk_values = read_.channels.fk_values
    if not math.isfinite(sum(map(sum, fk_values))):
        for b, value in zip(bones, fk_values):
            if not held_bones.finite(value):
                return f"bone '{names[b]}' is keyed to a rotation that is not a number on this frame: nothing written"
    if not math.isfinite(sum(map(sum, solved.rotations))):
        for b, q in zip(bones, solved.rotations):
            if not math.isfinite(sum(q)):
                return f"the solve gave bone '{names[b]}' a rotation that is not a number: nothing written"
    return None


def write(
    obj: bpy.types.Object, read_: Read, solved: Solution, hold: bool, kept: memory.RigMemory | None = None
) -> None:
    """Set the moving bones' rotation channels to the solve in bulk and hold the animator's values under them
    (without `hold`, the solve becomes the animator's pose); write IK stretch; keep the solution for the next solve
    (in `kept`, the rig's memory)."""
    found = read_.channels
    values = channel_values(found.modes, shown(read_, solved), found.current)
    written = write_channels(obj, found.at, found.modes, found.arrays, found.current, values)
    found.current = written
    if hold and found.held_rows is not None:
        # A later frame that goes on from the same read: the animator's values are the ones held already.
        found.held.vectors("written", found.held_rows, written)
    elif hold:
        found.entries = held_bones.hold(obj, found.held, found.names, found.modes, written, found.fk_values, found.entries)
        index = found.entries[0]
        found.held_rows = [index[name] for name in found.names]
    else:
        held_bones.let_go(obj, found.names)
    if solved.scales or (found.entries is not None and found.entries[4].any()):
        held_bones.write_stretch(obj, read_.plan.skeleton, solved.scales, read_.pose)  # (bones stretched before go back)
    if solved.root is not None or read_.held_root:  # (a root moved before and no longer moving goes back)
        moving_root.write(obj, read_.root, solved.root, read_.root_fk, hold)
        read_.pose.forget()
    scale = armature.mean_scale(obj) if solved.away is not None else 1.0
    (kept or memory.of(obj)).root_away = None if solved.away is None else (solved.away[0] * scale, solved.away[1])
    (kept or memory.of(obj)).solution = dict(zip(read_.plan.bones, solved.rotations))


def scale_channels(skeleton: Skeleton, scales: np.ndarray, inherits: dict[int, bool]) -> dict[int, float]:
    """Per bone of `inherits`, the uniform scale channel value that gives it `scales[b]` (its length over its
    rest length) in Blender, where it also takes its parent's scale when it inherits scale."""
    values = {}
    for b, inherited in inherits.items():
        p = skeleton.parents[b]
        values[b] = float(scales[b]) / (float(scales[p]) if inherited and p >= 0 else 1.0)
    return values


def solve_object(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None, hold: bool = True,
    checked: list[EffectorValues] | None = None, pose: PoseRead | None = None
) -> tuple[RigStatus, Read | None]:
    """Solve one armature's effectors and write the pose; the status (kept for the panel) and what was read (None
    where nothing was solved). With `hold` the animator's rotations stay under the solution; input that cannot be
    solved is a status, and nothing is written."""
    kept = memory.of(obj)
    kept.again, kept.root_away = False, None
    refused = editable.editable(obj) or effector_goals.unusable_rig(obj, depsgraph)
    if refused:
        return show(obj.name, RigStatus(message=refused, ok=False)), None
    gathered = effector_goals.gather(obj, depsgraph, checked)
    pose = pose or read_pose(obj)
    held_bones.follow_renames(obj, gathered.skeleton.positions)
    gathered, refusals = effector_goals.usable_goals(obj, gathered, pose)
    released = False
    if hold and not refusals:  # (a chain left out for bad input keeps its pose: nothing it should not change does)
        skeleton = gathered.skeleton
        plan = plan_for(skeleton, gathered.goals, obj.fabrik.solver) if gathered.goals else None
        released = release_others(obj, {skeleton.names[b] for b in plan.bones} if plan is not None else set())
        # (a root no longer moving goes back first: the chains hang from where it goes)
        keep = moving_root.usable(obj, plan, gathered.goals)[0] if plan is not None else None
        released = moving_root.let_go(obj, keep=keep) or released
        if released:
            pose.forget()  # (channels given back: what was read of them is not what they hold)
    read_, result = read(obj, depsgraph, gathered, pose)
    if read_ is not None:
        try:
            with np.errstate(invalid="ignore", divide="ignore"):  # what is not finite is refused below, never written
                solved = solve(read_, kept.carry if kept.carry is not None else _carry(kept))
        except ValueError as exc:  # a solver that cannot take this rig (the two-bone one on a longer chain, say)
            result.ok, result.message = False, f"{DESCRIPTIONS[obj.fabrik.solver][0]}: {exc}"
            read_ = None
        else:
            unfinished = not_finite(read_, solved)
            if unfinished:
                result = RigStatus(effectors=dict(gathered.problems), message=unfinished, ok=False)
                read_ = None
            else:
                write(obj, read_, solved, hold)
                result = status_of(read_, solved, result)
    if read_ is None and refusals and not gathered.goals:
        result.message = "; ".join(dict.fromkeys(refusals))  # nothing solved: say why, once per cause
        if hold:
            held_bones.write_stretch(obj, gathered.skeleton, {}, pose)  # (what IK stretch wrote before goes back all the same)
    if released:
        result = _put_off(obj, result)
    return show(obj.name, result), read_


def _carry(kept: memory.RigMemory) -> Carry:
    """The rig's continuity carry, made when first needed."""
    kept.carry = Carry()
    return kept.carry


def carry_of(obj: bpy.types.Object) -> Carry:
    """What continuity mode carries between a rig's frames (kept with its memory)."""
    kept = memory.of(obj)
    return kept.carry if kept.carry is not None else _carry(kept)


def _put_off(obj: bpy.types.Object, result: RigStatus) -> RigStatus:
    """The status of a solve made while bones that left every chain got the animator's rotation back: chains
    may hang from them that Blender has not posed anew yet, so nothing counts as reached, and live solving
    solves again at the next update (`RigMemory.again`)."""
    memory.of(obj).again = True
    obj.update_tag()
    return RigStatus(
        effectors={k: m for k, m in result.effectors.items() if not result.reached.get(k)},
        message="the effectors changed: solving again at the next update", ok=result.ok,
    )


def compute(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, previous: dict | None = None, carry: Carry | None = None
) -> tuple[RigStatus, Read | None, Solution | None]:
    """Solve one armature's effectors without touching its pose (a bake's frame): the status, what was read and
    the solve (None where nothing was solved). `previous` (each moving bone's local rotation) starts the moving
    bones where a continuous bake's last frame left them."""
    # (no refusals of chains with a channel that is not a number, or hanging from a bone scaled to zero: the
    # bake solves them, and leaves what is not finite unkeyed, saying which bone and why)
    gathered = effector_goals.gather(obj, depsgraph)
    read_, result = read(obj, depsgraph, gathered, read_pose(obj), previous)
    if read_ is None:
        return result, None, None
    began = time.perf_counter()
    try:
        with np.errstate(invalid="ignore", divide="ignore"):
            solved = solve(read_, carry)
    except ValueError as exc:
        result.ok, result.message = False, f"{DESCRIPTIONS[obj.fabrik.solver][0]}: {exc}"
        result.solver_seconds = time.perf_counter() - began  # (the plan's, which refused the solve)
        return result, None, None
    return status_of(read_, solved, result), read_, solved


def _matrices(rotations: list[Quat]) -> list[np.ndarray]:
    """Unit quaternions as 3x3 matrices."""
    return [np.array(quat.to_matrix(q)) for q in rotations]


__all__ += ["give_back", "carry_of", "settings_of", "rig_size", "scale_channels", "shown", "status_of"]
