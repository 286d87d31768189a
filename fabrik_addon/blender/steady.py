# SPDX-License-Identifier: GPL-3.0-or-later
"""Live frames where only the targets moved: the last solve's reading kept, the solve run again on new targets.

In playback the common frame changes nothing of a rig but where its targets
are: the rig is not animated itself (its targets are), nobody edits it. The
full live frame reads and checks the rig's settings, effectors, pose channels
and what the rig holds of the animator's pose (`held`), to find exactly
that, at several times the cost of the solve on small rigs. So after a live
solve on the lean path (`solving._solve_free_tree`, which leaves what it read
with the solve's `PoseRead`), or on the general path of a limited tree that
starts from its previous solution (`_Limited`), what it read is kept here as
a `Plan`, and the next frame change solves from it directly while nothing it
read can have changed:

* Blender's evaluation updated neither the rig nor its armature (every edit of
  a setting, an effector, a bone, a channel through RNA or an operator, a key
  or driver that moves the rig tags it), and live solving saw the evaluation
  before (`live._watched`);
* as many effectors as then (adding or removing one tags nothing; deleting,
  unlinking or parenting a target rebuilds the relations, which updates every
  object, and a deleted target's reference fails);
* the targets' matrices are finite, and the solve converges on the lean path
  as before, or continuity mode's settling step reaches the targets (else the
  full frame runs, and says why).

On a rig animated itself, whose animation reaches no chain bone and no
setting, each frame also reads the pose again (`_read_animated`). On one
that is not, what cannot be seen is a channel set by `foreach_set` without a
tag, which Blender does not show either until something tags the rig. Any
full live solve of the rig replaces or drops its plan.

The frame solves, writes and holds as the full one does (the same functions,
from the same inputs: the result is the same; a limited tree goes on from the
rig its last frame left, where the full frame makes the same rig anew from the
last solution, equal to rounding), and leaves the status and the inputs live
solving compares its next update with.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import bpy

from ..core import Goal, fabrik, local_solve, refine
from ..core.fabrik import moving_tree
from . import animdata, rig, solving
from .effector_values import EffectorValues, comparable
from .held import held_bones


@dataclass
class Plan:
    """What a live frame of one rig solves from while only its targets move (see the module)."""

    obj: object
    #: How many effectors the rig had.
    effectors: int
    values: list[EffectorValues]
    #: Per effector, the properties its solve reads (`EffectorValues.solved`).
    solved: list[tuple]
    to_armature: object
    gathered: solving.Gathered
    #: What the lean path read (`solving._FreeTree`); None for a warm-started limited tree (`limited`).
    read: object | None
    #: The start joints (`local_solve.start_joints` of the held pose) of a tree `local_solve.solve_from_start`
    #: solves, else None.
    start: tuple | None
    pose: solving.PoseRead
    #: How many held entries there are, and the chain bones' rows among them.
    held: int
    held_rows: list[int]
    #: The live inputs' snapshot before its per-effector part (`live._inputs_of`).
    prefix: tuple
    #: The rig's solver and the messages about limits its structure ignored (for the status).
    solver: str
    limit_problems: list[str]
    #: Where the rig is animated itself (but nothing animates a chain bone's channel or a setting): the data
    #: paths its F-curves animated (`animdata.fcurve_paths`: the same object while they are the same) and how
    #: many drivers it had; each frame then reads what the animation moves (`_read_animated`). None for a rig
    #: nothing animates.
    animation: tuple[frozenset, int] | None
    #: For a warm-started limited tree, what its frames go on from (see `_Limited`).
    limited: _Limited | None = None


@dataclass
class _Limited:
    """A limited tree that live solving starts from its previous solution (Start From: Previous Solution), where
    each frame is continuity mode's one settling step from the last (`fabrik.follow_limited`), as the full frame
    moves it first: the problem as the full frame read it, its tree and the channels it wrote, and the tree in the
    limits' coordinates as the last frame left it (made from the last solution on the first frame; kept, as the
    continuous bake keeps it, so a frame does not read the pose again)."""

    problem: solving.Problem
    tree: object
    channels: object
    rig: refine.AngleRig | None = None


#: Per rig name: its plan.
_plans: dict[str, Plan] = {}


def forget(obj_name: str | None = None) -> None:
    """Drop one rig's plan, or all."""
    if obj_name is None:
        _plans.clear()
    else:
        _plans.pop(obj_name, None)


def remembered() -> set[str]:
    """Names of the rigs a plan is kept for."""
    return set(_plans)


def remember(obj, depsgraph, inputs: tuple, values: list[EffectorValues], pose: solving.PoseRead) -> None:
    """Keep what the live solve of obj just read (`pose`: its read of the pose, with what the lean or the general
    path read), where the next frames can solve from it (see the module)."""
    if pose.lean is not None:
        _remember_lean(obj, depsgraph, inputs, values, pose)
    elif pose.general is not None:
        _remember_limited(obj, depsgraph, inputs, values, pose)


def _remember_lean(obj, depsgraph, inputs: tuple, values: list[EffectorValues], pose: solving.PoseRead) -> None:
    """`remember` after the lean path."""
    read, gathered, result = pose.lean
    channels = read.channels
    if (
        not result.ok or read.limits is not None or read.influence is not None
        or obj.fabrik.start != 'FK'  # (from the previous solution: another start every frame)
        or gathered.problems or len(gathered.used) != len(values) or _unkeepable(channels)
    ):
        return
    animation = None
    if _animates(obj):
        animation = _animation(obj, read)
        if animation is None:
            return
    start = None
    if not read.local.parts and local_solve.placed_by_start(read.local, gathered.goals):
        start = local_solve.start_joints(read.local, read.rotations, read.translations, read.fixed)
    _keep(obj, depsgraph, inputs, values, pose, gathered, channels, read, start, animation, None)


def _remember_limited(obj, depsgraph, inputs: tuple, values: list[EffectorValues], pose: solving.PoseRead) -> None:
    """`remember` after the general path: where it moved a limited tree warm-started from the previous solution,
    which continuity mode moves by one settling step where it can (`fabrik.follows_limited`)."""
    problem = pose.general
    skeleton, goals, channels = problem.skeleton, problem.goals, problem.channels
    tree = moving_tree(skeleton, goals)
    settings = obj.fabrik
    if (
        not problem.result.ok or problem.result.missed or problem.influence is not None or problem.limit_problems
        or problem.solver != 'FABRIK' or settings.start != 'PREVIOUS' or len(problem.used) != len(values)
        # (warm: the first frame of all starts from the animator's pose, with other settings)
        or problem.settings != solving.solve_settings_of(settings, True, solving.rig_size(skeleton, tree))
        or any(goal.rotation is not None for goal in goals) or not fabrik.follows_limited(skeleton, tree, goals)
        or channels is None or _unkeepable(channels) or _animates(obj)
    ):
        return
    gathered = solving.Gathered(skeleton, goals, problem.used, {}, problem.began)
    _keep(obj, depsgraph, inputs, values, pose, gathered, channels, None, None, None, _Limited(problem, tree, channels))


def _unkeepable(channels) -> bool:
    """Whether the channels a solve wrote rule out a plan: bones IK stretch scaled, or entries held in memory."""
    entries = channels.entries
    return (entries is not None and entries[4].any()) or channels.held.in_memory


def _keep(obj, depsgraph, inputs, values, pose, gathered, channels, read, start, animation, limited) -> None:
    """Make the rig's plan, where every bone written holds an entry."""
    index = {name: i for i, name in enumerate(channels.held.keys())}  # (the solve may have added entries)
    if any(name not in index for name in channels.names):
        return
    _plans[obj.name] = Plan(
        obj, len(values), values, [value.solved() for value in values],
        rig.world_to_armature(obj.evaluated_get(depsgraph)), gathered, read, start, pose,
        len(index), [index[name] for name in channels.names], inputs[: len(inputs) - len(values)],
        obj.fabrik.solver, list(rig.limit_problems(obj)), animation, limited,
    )


def _animates(obj) -> bool:
    """Whether the rig has animation of its own (an action, NLA tracks or drivers)."""
    animation_data = obj.animation_data
    return animation_data is not None and bool(
        animation_data.action is not None or len(animation_data.nla_tracks) or len(animation_data.drivers)
    )


def _animation(obj, read) -> tuple[frozenset, int] | None:
    """An animated rig's F-curve paths and driver count (`Plan.animation`), where its animation reaches no chain
    bone's channel and no setting (those change what the full frame reads: None)."""
    animation_data = obj.animation_data
    if len(animation_data.nla_tracks):
        return None  # (a strip's action may animate anything)
    fcurve_paths = animdata.fcurve_paths(obj)
    paths = [*fcurve_paths, *(driver.data_path for driver in animation_data.drivers)]
    chain = tuple(f'pose.bones["{bpy.utils.escape_identifier(name)}"]' for name in read.channels.names)
    if any(path.startswith(chain) or path.startswith("fabrik") for path in paths):
        return None
    return fcurve_paths, len(animation_data.drivers)


def solve_frame(obj, depsgraph, updated, watched: bool) -> tuple | None:
    """Solve a frame of obj from its plan, where nothing the plan read can have changed (see the module): the
    live inputs as the full frame would have read them, with the channels as the solve left them (what live
    solving compares its next update with); None, having touched nothing, where the full frame must run.
    `updated` tells what the evaluation updated (`live._Updates`); `watched`, whether live solving saw the rig
    at the evaluation before."""
    plan = _plans.get(obj.name)
    if plan is None:
        return None
    began = time.perf_counter()
    if not watched or plan.obj != obj or updated.has(obj.data) or plan.effectors != len(obj.fabrik.effectors):
        return None
    held = held_bones(obj)  # (where the file keeps it now: an undo or a script may have replaced it)
    if len(held) != plan.held:
        return None  # (entries removed by a script: no tag either)
    pose = plan.pose
    if updated.has(obj):
        # Animation moved the rig (an edit would have updated its armature as well): what it moves is read again.
        if plan.animation is None:
            return None
        pose = _read_animated(plan, obj, depsgraph)
        if pose is None:
            return None
    gathered, read = plan.gathered, plan.read
    goals, tails = [], []
    try:
        for value, goal, properties in zip(plan.values, gathered.goals, plan.solved):
            world = solving.world_matrix(value.target, value.subtarget, depsgraph)
            point = (plan.to_armature @ world.translation)[:]
            pole, pole_world = goal.pole, None
            if pole is not None:
                pole_world = solving.world_matrix(value.pole_target, value.pole_subtarget, depsgraph)
                pole = (plan.to_armature @ pole_world.translation)[:]
            if not math.isfinite(sum(point) + (sum(pole) if pole is not None else 0.0)):
                return None  # the full frame says which
            goals.append(_moved(goal, point, pole))
            tails.append((comparable(world), comparable(pole_world), properties))
    except (ReferenceError, solving.EffectorError):
        return None  # a target removed meanwhile, or a target bone gone: the full frame says so
    limited = plan.limited
    solved = _solve(plan, goals) if limited is None else _follow(plan, obj, goals)
    if solved is None:
        return None
    solved, report = solved
    if limited is None:
        gathered = gathered._replace(goals=goals, began=began)
        result = solving.DeferredStatus(
            lambda: solving.lean_status(gathered, read, report, plan.solver, plan.limit_problems)
        )
        channels, bones = read.channels, read.tree.bones
    else:
        problem = replace(limited.problem, result=solving.RigStatus(), goals=goals, began=began)
        result = solving.DeferredStatus(lambda: solving.conclude_status(problem, report))
        channels, bones = limited.channels, problem.bones
    result.report = report
    values = solving.channel_values(channels.modes, solved, channels.current)
    channels.current = solving.write_channels(obj, channels.at, channels.modes, pose.arrays, channels.current, values)
    # The animator's pose under the write is as it was: only what was written is noted.
    held.vectors("written", plan.held_rows, channels.current)
    plan.pose = pose
    solving.remember_solution(obj.name, bones, solved)
    result.seconds = time.perf_counter() - began
    solving.status[obj.name] = result
    return plan.prefix + tuple(tails), pose.snapshot()


def _read_animated(plan: Plan, obj, depsgraph) -> solving.PoseRead | None:
    """Read again what animation moves of a rig, where it animates what it did (keys inserted on a chain bone
    update the rig as animation does): the pose, the chain bones' channels as the plan's and every chain usable
    as the full frame judges it (`solving.usable_goals`); the frames the chains hang from (the start joints made
    anew where they moved); the rig's transform. The pose read, or None where the full frame must run (it says
    why)."""
    read = plan.read
    animation_data = obj.animation_data
    if (
        animation_data is None or (animdata.fcurve_paths(obj), len(animation_data.drivers)) != plan.animation
        or len(animation_data.nla_tracks)
    ):
        return None
    pose = solving.PoseRead(obj, plan.pose.count)
    at = read.channels.at
    for name, size in {rig.rotation_channel(mode) for mode in read.channels.modes}:
        if (pose.channel(name, size)[at] != plan.pose.arrays[name][at]).any():
            return None  # (set by other means than a key: the full frame takes it for the animator's)
    if solving.usable_goals(obj, plan.gathered, pose)[1]:
        return None
    fixed = solving.hung_frames(obj, plan.gathered.skeleton, read.tree, read.local)
    if fixed is None:
        return None
    if fixed != read.fixed:
        read.fixed = fixed
        if plan.start is not None:
            plan.start = local_solve.start_joints(read.local, read.rotations, read.translations, fixed)
    world = obj.evaluated_get(depsgraph).matrix_world
    if comparable(world) != plan.prefix[1]:
        if solving.unusable_rig(obj, depsgraph) is not None:
            return None
        plan.to_armature = rig.world_to_armature(obj.evaluated_get(depsgraph))
        plan.prefix = plan.prefix[:1] + (comparable(world),) + plan.prefix[2:]
    return pose


def _follow(plan: Plan, obj, goals: list) -> tuple[list, object] | None:
    """A warm-started limited tree's frame: continuity mode's settling step from the rig the last frame left (made
    from the last solution on the first frame, as the full frame makes its start); the local rotations and the
    report, or None (the rig dropped) where the step does not reach and the whole solve must run."""
    limited = plan.limited
    problem = limited.problem
    skeleton = problem.skeleton
    if limited.rig is None:
        previous = solving.last_solution(obj.name)
        if previous is None or any(b not in previous for b in problem.bones):
            return None
        limited.rig = solving.followed_rig(obj, skeleton, limited.tree, previous)
    report = fabrik.follow_limited(skeleton, limited.tree, goals, limited.rig, problem.settings)
    if report is None or not math.isfinite(sum(map(sum, limited.rig.local))):
        limited.rig = None
        return None
    return list(limited.rig.local), report


def _moved(goal: Goal, target: tuple, pole: tuple | None) -> Goal:
    """The goal with a new target and pole (`dataclasses.replace`, spelled out: it runs per effector every frame)."""
    return Goal(
        goal.bone, target, goal.weight, goal.chain_length, goal.rotation, goal.rotation_weight, pole, goal.pole_angle,
        goal.stretch,
    )


def _solve(plan: Plan, goals: list) -> tuple[list, object] | None:
    """The lean solve of the plan's tree on new goals (as `solving._solve_read` solves it), from the start joints
    the plan keeps where it has them: the local rotations and the report; None where it must go the general path
    or is not finite."""
    read = plan.read
    if plan.start is None:
        outcome = local_solve.solve(read.local, goals, read.rotations, read.translations, read.fixed, read.settings)
    else:
        outcome = local_solve.solve_from_start(read.local, goals, read.rotations, plan.start, read.fixed, read.settings)
    if outcome is None or not math.isfinite(sum(map(sum, outcome[0]))):
        return None
    return outcome
