# SPDX-License-Identifier: GPL-3.0-or-later
"""Solve one armature object: gather its effectors, run the core solver, write the pose back."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import bpy
import numpy as np
from mathutils import Matrix, Vector

from ..core import DESCRIPTIONS, Goal, SOLVERS, SolveReport, SolveSettings, channels, local_solve, matrix_rows, quat, refine, stretch
from ..core.fabrik import chain_reach, moving_tree, open_cones_as_free
from ..core.problem import goal_reached, turned_off, validate_goals, validate_settings
from . import animdata, editable, integrity, rig
from .effector_values import EffectorValues
from .held import HeldBones, held_bones
from .held import forget as forget_held, remembered as held_remembered


@dataclass
class RigStatus:
    """What the last solve of one rig did, for the panel (kept in memory, never in the file).

    Three states, drawn differently: something is wrong with the input (`ok`
    False: the message says what), the solve stopped short of some target
    (`missed`: how far, and why), or every effector reached its target.
    """

    message: str = ""
    ok: bool = True
    #: Per effector index: a short status line.
    effectors: dict[int, str] = field(default_factory=dict)
    #: Per effector index that was solved: whether it reached its target (others could not be solved).
    reached: dict[int, bool] = field(default_factory=dict)
    report: SolveReport | None = None
    #: Per effector index that was solved: how far its tip ended from its target.
    misses: dict[int, float] = field(default_factory=dict)
    #: Wall time of the last solve including reading and writing the pose, in seconds.
    seconds: float = 0.0

    @property
    def missed(self) -> bool:
        """True when the solve ran but stopped short of some target: a warning, not success."""
        return self.ok and not all(self.reached.values())

    def kind(self, index: int) -> str:
        """One effector's state: 'REACHED', 'MISSED', 'ERROR' (it could not be solved, or the rig could not) or
        'NONE' (not solved yet)."""
        if index in self.reached:
            return 'REACHED' if self.reached[index] else 'MISSED'
        if index in self.effectors or not self.ok:
            return 'ERROR'
        return 'NONE'


#: Why a solve stopped short, in the user's words.
STOPPED_BY = {
    "unreachable": "target out of reach",
    "stalled": "stuck: no pose nearby gets closer",
    "max_iterations": "iteration cap hit",
}


#: Last status per armature object name.
status: dict[str, RigStatus] = {}

# For determinism the solve starts from this frame's FK pose, not from our own last write. The rig's
# `fabrik.held` (in the file, so a reload solves the same way) keeps per bone the rotation value we wrote and
# the FK value it replaced. If the bone still holds what we wrote, nothing else (animation, the user) has set
# it since, so the FK value is the held one -- or, for a keyed channel, what its animation gives this frame.


def forget(obj_name: str | None = None) -> None:
    """Drop remembered in-memory state for one rig, or for all (what the file holds stays)."""
    if obj_name is None:
        status.clear()
        again.clear()
        forget_held()
        _last_solution.clear()
        _cones_bound.clear()
        animdata.forget()
        return
    status.pop(obj_name, None)
    again.discard(obj_name)
    forget_held(obj_name)
    _last_solution.pop(obj_name, None)
    _cones_bound.pop(obj_name, None)
    animdata.forget(obj_name)


#: Rigs whose last solve was put off to the next update (`solve_object`): live solving must not take the pose
#: on screen as solved.
again: set[str] = set()


def remembered_rigs() -> set[str]:
    """Names of the rigs in-memory state is kept for."""
    return set(status) | set(_last_solution) | held_remembered() | set(_cones_bound) | animdata.remembered()


class EffectorError(ValueError):
    """An effector that cannot be solved, with a message for the user."""


def gather_goals(
    obj, depsgraph, skeleton, checked: list[EffectorValues] | None = None
) -> tuple[list[Goal], list[int], dict[int, str]]:
    """Goals (armature space) for the enabled effectors; problems are reported per effector, not raised.
    `checked` is the effectors as live solving read and checked them (with their problems and matrices), where
    it has."""
    to_armature = rig.world_to_armature(obj.evaluated_get(depsgraph) if depsgraph else obj)
    goals, used, problems = [], [], {}
    for index, effector in enumerate(checked if checked is not None else obj.fabrik.effectors):
        if not effector.enabled:
            problems[index] = "disabled"
            continue
        problem = effector.problem if checked is not None else integrity.effector_problem(obj, index, depsgraph)
        if problem:
            problems[index] = problem
            continue
        try:
            goals.append(_goal_of(obj, effector, depsgraph, skeleton, to_armature))
            used.append(index)
        except EffectorError as exc:
            problems[index] = str(exc)
    return goals, used, problems


def _goal_of(obj, effector, depsgraph, skeleton, to_armature: Matrix) -> Goal:
    """One effector as a core goal, or EffectorError saying what is wrong."""
    if not effector.bone:
        raise EffectorError("no tip bone set")
    if effector.bone not in skeleton.names:
        raise EffectorError(f"no bone '{effector.bone}' in '{obj.data.name}'")
    target = effector.target
    if target is None:
        raise EffectorError("no target object")
    bone = skeleton.index(effector.bone)
    chain = skeleton.path_to_root(bone)
    if effector.chain_length > len(chain):
        raise EffectorError(f"chain length {effector.chain_length} is longer than the {len(chain)} bones up to the root")
    moving = chain if effector.chain_length == 0 else chain[: effector.chain_length]
    moving_names = {skeleton.names[i] for i in moving}
    if target == obj:
        if not effector.subtarget:
            raise EffectorError("the target is the rig itself; pick one of its bones outside the chain")
        if effector.subtarget in moving_names:
            raise EffectorError(f"target bone '{effector.subtarget}' is part of the chain it should pull")
    elif _parented_to_chain(target, obj, moving_names):
        raise EffectorError(f"target '{target.name}' is parented to a bone of its own chain")
    world = _world_of(effector, "target", depsgraph)
    point = to_armature @ world.translation
    if not all(math.isfinite(c) for c in point):
        raise EffectorError(f"target '{target.name}' is not at a finite location")
    rotation = None
    if effector.use_rotation:
        local = (to_armature @ world).to_3x3()
        if not all(math.isfinite(v) for row in local for v in row) or abs(local.determinant()) < 1e-12:
            raise EffectorError(f"target '{target.name}' has no usable rotation (zero scale?)")
        rotation = tuple(local.normalized().to_quaternion().normalized())
    pole = None
    if effector.pole_target is not None:
        pole_world = _world_of(effector, "pole", depsgraph)
        pole = tuple(to_armature @ pole_world.translation)
        if not all(math.isfinite(c) for c in pole):
            raise EffectorError(f"pole target '{effector.pole_target.name}' is not at a finite location")
    return Goal(
        bone,
        tuple(point),
        float(effector.weight),
        int(effector.chain_length),
        rotation=rotation,
        rotation_weight=float(effector.rotation_weight),
        pole=pole,
        pole_angle=float(effector.pole_angle),
        stretch=bool(effector.use_stretch),
    )


def _world_of(effector, role: str, depsgraph) -> Matrix:
    """`world_matrix` of an effector's target (`role` "target") or pole ("pole"): as live solving read it with
    the effector's values (`EffectorValues`), else read now. (Attribute names spelled out: with a name built on
    each call the heap grew by about 40 blocks every 1000 frames in `benchmarks/live_memory.py`.)"""
    if role == "target":
        world = getattr(effector, "target_world", None)
        return world if world is not None else world_matrix(effector.target, effector.subtarget, depsgraph)
    world = getattr(effector, "pole_world", None)
    return world if world is not None else world_matrix(effector.pole_target, effector.pole_subtarget, depsgraph)


def world_matrix(target, subtarget: str, depsgraph) -> Matrix:
    """World matrix of an object, or of one of its bones (at the bone's head); EffectorError if the bone is missing."""
    evaluated = target.evaluated_get(depsgraph) if depsgraph else target
    world = evaluated.matrix_world
    if subtarget:
        if target.type != 'ARMATURE' or subtarget not in evaluated.pose.bones:
            raise EffectorError(f"'{target.name}' has no bone '{subtarget}'")
        world = world @ evaluated.pose.bones[subtarget].matrix
    return world


def _parented_to_chain(target, obj, moving_names: set[str]) -> bool:
    """True when target hangs (directly or through other objects) from a moving bone of obj."""
    child = target
    while child.parent is not None:
        if child.parent == obj and child.parent_type == 'BONE' and child.parent_bone in moving_names:
            return True
        child = child.parent
    return False


@dataclass
class Solution:
    """One solve of a rig, not yet written to its pose."""

    skeleton: object
    bones: list[int]
    #: Local rotations (relative to rest and parent, as pose bones hold them) of every bone, (n, 3, 3).
    local: np.ndarray
    fk: dict[int, np.ndarray]
    #: IK stretch: per bone whose scale it sets, the uniform scale channel value (1 where nothing stretched).
    scales: dict[int, float] = field(default_factory=dict)
    #: Per bone of `fk`: its FK rotation as a channel value in its rotation mode (what live off gives back).
    fk_values: dict[int, tuple[float, ...]] = field(default_factory=dict)
    #: Where an influence below 1 blended the solve with FK: the moving bones' solved rotations before it (what
    #: the next "Previous Solution" start continues from).
    unblended: dict[int, np.ndarray] | None = None
    #: The rotation channels the solve read, where it read them (the general path's write goes over them).
    channels: _Channels | None = None


# Per rig: the local rotations of the moving bones from its last solve, for "Previous Solution" starts
# (3x3 matrices, or unit quaternions where the free-tree path solved them).
_last_solution: dict[str, dict[int, np.ndarray | tuple[float, ...]]] = {}

#: Per rig whose open cones the lean path's free chain left at its last try: how many more solves go straight
#: to the general path (which gives the same answer either way, and tries the free chain first itself), so a
#: rig whose cones bind pays for the lean try once in `CONES_RETRY` solves, not at every one.
_cones_bound: dict[str, int] = {}
CONES_RETRY = 8


def as_matrix(rotation) -> np.ndarray:
    """A remembered local rotation (a unit quaternion, or a 3x3 matrix) as a 3x3 matrix."""
    return np.array(quat.to_matrix(as_quaternion(rotation))) if len(rotation) == 4 else rotation


def as_quaternion(rotation) -> tuple[float, ...]:
    """A remembered local rotation (a unit quaternion, or a 3x3 matrix) as a unit quaternion."""
    if isinstance(rotation, tuple):
        return rotation
    return tuple(rotation.tolist()) if len(rotation) == 4 else quat.from_matrix(rotation.tolist())


def solve_settings_of(settings, warm: bool, size: float) -> SolveSettings:
    """Core settings for a rig of this size: the tolerance is a fraction of it; starting from a previous
    solution favours continuity over exploring."""
    return SolveSettings(max_iterations=settings.iterations, tolerance=settings.tolerance * size, explore=not warm)


def rig_size(skeleton, tree) -> float:
    """The rig's size for tolerances: its longest effector chain's bones laid end to end (armature units)."""
    return max(chain_reach(tree, chain) for chain in tree.goal_chain)


@dataclass
class Problem:
    """Everything one solve of a rig needs, read from Blender; solving it touches nothing."""

    result: RigStatus
    skeleton: object
    goals: list[Goal]
    used: list[int]
    bones: list[int]
    fk: dict[int, np.ndarray]
    start: object
    settings: SolveSettings
    solver: str
    limit_problems: list[str]
    began: float
    #: IK stretch: per bone whose scale a stretch may set, whether it inherits its parent's scale in Blender.
    inherits_scale: dict[int, bool] = field(default_factory=dict)
    #: Per bone of `fk`: its FK rotation as a channel value in its rotation mode.
    fk_values: dict[int, tuple[float, ...]] = field(default_factory=dict)
    #: Per moving bone (in `bones` order), how much of the solve it takes (`influences`); None: all of it.
    influence: list[float] | None = None
    #: The rotation channels read for `fk` (kept for the write).
    channels: _Channels | None = None


def influences(obj, depsgraph, tree, used: list[int]) -> list[float] | None:
    """Per moving node, how much of the solve it takes: the rig's influence times the largest influence of the
    effectors whose chains hold it (evaluated: animation and drivers count); None when every node takes all."""
    settings = (obj.evaluated_get(depsgraph) if depsgraph is not None else obj).fabrik
    effectors = settings.effectors
    weights = [effectors[i].influence if i < len(effectors) else 1.0 for i in used]
    if settings.influence >= 1.0 and all(w >= 1.0 for w in weights):
        return None
    node = [0.0] * len(tree.bones)
    for g, chain in enumerate(tree.goal_chain):
        for k in chain:
            node[k] = max(node[k], weights[g])
    return [settings.influence * w for w in node]


def blended(fk: np.ndarray, solved: np.ndarray, weight: float) -> np.ndarray:
    """A local rotation `weight` of the way from the animator's (FK) to the solved one, along the shorter arc."""
    if weight >= 1.0:
        return solved
    q = quat.slerp(quat.from_matrix(fk.tolist()), quat.from_matrix(solved.tolist()), max(0.0, weight))
    return np.array(quat.to_matrix(q))


class Gathered(NamedTuple):
    """What every solve of a rig reads first: its skeleton and goals (`gather_goals`), and when reading began."""

    skeleton: object
    goals: list[Goal]
    used: list[int]
    problems: dict[int, str]
    began: float


def gather(obj, depsgraph=None, checked: list[EffectorValues] | None = None) -> Gathered:
    """Read a rig's skeleton and goals (raises ValueError for problems with the rig as a whole); `checked` as for
    `gather_goals`."""
    began = time.perf_counter()
    skeleton = rig.skeleton_of(obj)
    return Gathered(skeleton, *gather_goals(obj, depsgraph, skeleton, checked), began)


def prepare(
    obj,
    depsgraph=None,
    previous: dict[int, np.ndarray] | None = None,
    keep_fk: bool = True,
    gathered: Gathered | None = None,
    pose_read: PoseRead | None = None,
) -> tuple[RigStatus, Problem | None]:
    """Read one armature's solve from Blender: goals in armature space and the start pose.

    The solve starts from this frame's FK pose; with `previous` (or the rig's
    "Previous Solution" setting) the moving bones start where that solution
    left them. Without `keep_fk` the FK rotations of bones that start from
    `previous` are not read (nothing will stash them). Raises ValueError for
    problems with the rig as a whole. `gathered` is what `gather` read already,
    `pose_read` what the solve read of the pose (the channels are read from it,
    and a write of the solution sets its values there too).
    """
    settings = obj.fabrik
    skeleton, goals, used, problems, began = gathered or gather(obj, depsgraph)
    result = RigStatus(effectors=dict(problems))
    if not goals:
        result.message = "no effector to solve" if not problems else "no effector can be solved"
        result.ok = all(p.startswith("disabled") for p in problems.values())
        return result, None
    tree = moving_tree(skeleton, goals)
    if previous is None and settings.start == 'PREVIOUS':
        previous = _last_solution.get(obj.name)
        if previous is not None:
            previous = {b: as_matrix(m) for b, m in previous.items()}
    warm = previous is not None
    influence = influences(obj, depsgraph, tree, used)
    keep_fk = keep_fk or influence is not None  # (the blend needs every moving bone's FK rotation)
    read = [b for b in tree.bones if keep_fk or not warm or b not in previous]
    at = rig.pose_bone_order(obj)[read].tolist()
    channels = _read_channels(obj, [skeleton.names[b] for b in read], at, depsgraph, pose_read)
    fk_values = dict(zip(read, channels.fk_values))
    fk = dict(zip(read, channel_matrices(channels.modes, channels.fk_values)))
    rotations = dict(fk)
    if warm:
        moving = set(tree.bones)
        rotations.update({b: m for b, m in previous.items() if b in moving})
    start = start_pose(obj, skeleton, rotations)
    problem = Problem(
        result, skeleton, goals, used, list(tree.bones), fk, start, solve_settings_of(settings, warm, rig_size(skeleton, tree)),
        settings.solver, rig.limit_problems(obj), began,
        rig.inherits_scale(obj, skeleton, stretch.scalable(skeleton, goals)), fk_values, influence, channels,
    )
    return result, problem


def start_pose(obj, skeleton, rotations: dict[int, np.ndarray]):
    """The pose a solve starts from: as Blender last evaluated it, with these bones (skeleton indices) turned by
    their local rotations (and placed by their location channels) and the bones below following."""
    located = rig.pose_locations(obj)
    moved = located.any(axis=1)
    locations = {b: located[b] for b in rotations if moved[b]}
    return skeleton.with_local_rotations(rig.current_pose(obj, skeleton), rotations, locations)


def followed_rig(obj, skeleton, tree, rotations: dict):
    """The rig continuity mode moves a limited tree on (`fabrik.follow_limited`): the tree in its limits'
    coordinates, its bones at these local rotations (matrices or unit quaternions, the last solve's) and the
    rest of the pose as Blender last evaluated it (`start_pose`)."""
    start = start_pose(obj, skeleton, {b: as_matrix(rotations[b]) for b in tree.bones})
    return refine.AngleRig(skeleton, tree, start)


def fk_start_pose(obj, skeleton, names: list[str]):
    """`start_pose` with the named bones at the animator's rotations (those live solving replaced, `fk_channels`)."""
    channels = _read_channels(obj, names, _pose_bone_indices(obj, names))
    matrices = channel_matrices(channels.modes, channels.fk_values)
    return start_pose(obj, skeleton, {skeleton.index(name): m for name, m in zip(names, matrices)})


def conclude(problem: Problem, pose, report: SolveReport) -> tuple[RigStatus, Solution]:
    """The status and solution of a solved problem."""
    result = conclude_status(problem, report)
    skeleton = problem.skeleton
    scales = scale_channels(skeleton, stretch.scales(skeleton, pose), problem.inherits_scale)
    local = skeleton.local_rotations(pose)
    unblended = None
    if problem.influence is not None:
        unblended = {b: local[b].copy() for b in problem.bones}
        weight_of = dict(zip(problem.bones, problem.influence))
        for b in problem.bones:
            local[b] = blended(problem.fk[b], local[b], weight_of[b])
        scales = {b: 1.0 + (value - 1.0) * weight_of.get(b, 1.0) for b, value in scales.items()}
        _say_influence(result, problem.influence)
    return result, Solution(
        skeleton, problem.bones, local, problem.fk, scales, problem.fk_values, unblended, problem.channels
    )


class DeferredStatus(RigStatus):
    """A status put into words when first read: live playback solves a frame many times a second, the panel
    reads the status a few times. `conclude` makes the status; what is set on this one before (the report, the
    time) stays."""

    def __init__(self, conclude: Callable[[], RigStatus]) -> None:
        self.__dict__["_conclude"] = conclude

    def __getattribute__(self, name: str):
        # (every read, fields with a class default too: the first one concludes)
        values = object.__getattribute__(self, "__dict__")
        conclude = values.pop("_conclude", None)
        if conclude is not None:
            for key, value in conclude().__dict__.items():
                values.setdefault(key, value)
        return object.__getattribute__(self, name)


def _say_influence(result: RigStatus, influence: list[float]) -> None:
    """Add to the rig's status that the pose on screen is blended with FK (so a tip off its target is no miss)."""
    result.message += f" (influence {min(influence):.0%}" + (f" to {max(influence):.0%})" if max(influence) > min(influence) else ")")


def conclude_status(problem: Problem, report: SolveReport) -> RigStatus:
    """The status of a solved problem, per effector and as a whole."""
    result = problem.result
    tolerance = problem.settings.tolerance
    why = STOPPED_BY.get(report.stopped_by, report.stopped_by)
    tree = moving_tree(problem.skeleton, problem.goals)
    for k, index in enumerate(problem.used):
        miss = report.errors[k]
        angle = report.rotation_errors[k] if k < len(report.rotation_errors) else 0.0
        goal = problem.goals[k]
        span = chain_reach(tree, tree.goal_chain[k])  # (a rotation goal's angle counts as a distance at it)
        turned = turned_off(goal, angle, span, tolerance)
        result.reached[index] = goal_reached(goal, miss, angle, span, tolerance)
        result.misses[index] = miss
        if result.reached[index]:
            result.effectors[index] = f"reached (miss {miss:.2g})"
        elif turned and miss <= tolerance:
            result.effectors[index] = f"turned {math.degrees(angle):.2g}\u00b0 off: {why}"
        else:
            result.effectors[index] = f"misses by {miss:.2g}: {why}"
    result.report = report
    if report.converged:
        result.message = f"reached, {report.iterations} iterations"
    else:
        result.message = f"missed by {report.max_error:.2g} ({why}), {report.iterations} iterations"
    if problem.limit_problems:
        result.ok = False
        result.message = "; ".join(problem.limit_problems)
    result.seconds = time.perf_counter() - problem.began
    return result


def scale_channels(skeleton, scales: np.ndarray, inherits: dict[int, bool]) -> dict[int, float]:
    """Per bone of `inherits`, the uniform scale channel value that gives it `scales[b]` (its length over its
    rest length) in Blender, where it also takes its parent's scale when it inherits scale."""
    values = {}
    for b, inherited in inherits.items():
        p = skeleton.parents[b]
        values[b] = float(scales[b]) / (float(scales[p]) if inherited and p >= 0 else 1.0)
    return values


def compute(
    obj,
    depsgraph=None,
    previous: dict[int, np.ndarray] | None = None,
    keep_fk: bool = True,
    gathered: Gathered | None = None,
) -> tuple[RigStatus, Solution | None]:
    """Solve one armature's effectors without touching its pose (see `prepare` for where it starts)."""
    gathered = gathered or gather(obj, depsgraph)
    lean_previous = previous
    if lean_previous is None and obj.fabrik.start == 'PREVIOUS':
        lean_previous = _last_solution.get(obj.name)
    lean = _compute_free_tree(obj, depsgraph, gathered, lean_previous)
    if lean is not None:
        return lean
    return _compute_general(obj, depsgraph, previous, keep_fk, gathered)


def _compute_general(
    obj, depsgraph, previous: dict[int, np.ndarray] | None, keep_fk: bool, gathered: Gathered,
    pose_read: PoseRead | None = None,
) -> tuple[RigStatus, Solution | None]:
    """`compute` through `prepare` and the core solvers, for every rig (`pose_read`: as for `prepare`)."""
    result, problem = prepare(obj, depsgraph, previous, keep_fk, gathered, pose_read)
    if problem is None:
        return result, None
    try:
        pose, report = SOLVERS[problem.solver](problem.skeleton, problem.goals, problem.start, problem.settings)
    except ValueError as exc:  # a solver that cannot take this rig (the two-bone one on a longer chain, say)
        result.ok, result.message = False, f"{DESCRIPTIONS[problem.solver][0]}: {exc}"
        return result, None
    if pose_read is not None:
        pose_read.general = problem
    return conclude(problem, pose, report)


def solve_object(
    obj, depsgraph=None, hold: bool = True, checked: list[EffectorValues] | None = None, pose: PoseRead | None = None
) -> RigStatus:
    """Solve one armature's effectors and write the pose; return (and remember) its status. Raises on rig errors.

    With `hold` the animator's rotations under the solution are kept (live
    solving: off gives them back); without, the solved pose becomes the
    animator's own (a one-off solve while live solving is off).

    Input that cannot be solved (a linked rig, a transform or channel that is
    not a number, a bone above a chain scaled to zero) is a status, not an
    error: nothing is written, and the next solve after it is fixed works.
    `checked` is the effectors as live solving read and checked them for its
    inputs (`effector_values`), where it has; `pose`, what it read of the pose
    (the solve reads the rest into it, and leaves it holding the channels as
    the solve left them).
    """
    refused = editable.editable(obj) or unusable_rig(obj, depsgraph)
    if refused:
        result = status[obj.name] = RigStatus(message=refused, ok=False)
        return result
    gathered = gather(obj, depsgraph, checked)
    pose = pose or read_pose(obj)
    follow_held_renames(obj, gathered.skeleton.positions)
    gathered, refusals = usable_goals(obj, gathered, pose)  # once: both paths below start from it
    released = False
    if hold and not refusals:  # (a chain left out for bad input keeps its pose: nothing it should not change does)
        tree = moving_tree(gathered.skeleton, gathered.goals) if gathered.goals else None
        released = _release_others(obj, {gathered.skeleton.names[b] for b in tree.bones} if tree else set())
        if released:
            pose.forget()  # (channels given back: what was read of them is not what they hold)
    result = _solve_free_tree(obj, depsgraph, hold, gathered, pose)
    if result is not None:
        status[obj.name] = _put_off(obj, result) if released else result
        return status[obj.name]
    with np.errstate(invalid="ignore", divide="ignore"):  # what is not finite is checked below, and never written
        result, solution = _compute_general(obj, depsgraph, None, True, gathered, pose)
    if solution is not None and (unfinished := _not_finite(solution)):
        result = RigStatus(effectors=dict(gathered.problems), message=unfinished, ok=False)
        solution = None
    if solution is None and refusals and not gathered.goals:
        result.message = "; ".join(dict.fromkeys(refusals))  # nothing solved: say why, once per cause
        if hold:
            write_stretch(obj, gathered.skeleton, {}, pose)  # (what IK stretch wrote before goes back all the same)
    if solution is not None:
        skeleton = solution.skeleton
        _write_solution(obj, solution, hold)
        _last_solution[obj.name] = solution.unblended or {b: solution.local[b] for b in solution.bones}
        write_stretch(obj, skeleton, solution.scales, pose)
    status[obj.name] = _put_off(obj, result) if released else result
    return status[obj.name]


def _put_off(obj, result: RigStatus) -> RigStatus:
    """The status of a solve made while bones that left every chain got the animator's rotation back: chains
    may hang from them that Blender has not posed anew yet, so nothing counts as reached, and live solving
    solves again at the next update (`again`)."""
    again.add(obj.name)
    obj.update_tag()
    return RigStatus(
        effectors={k: m for k, m in result.effectors.items() if not result.reached.get(k)},
        message="the effectors changed: solving again at the next update", ok=result.ok,
    )


#: Blender's rotation_mode enum values of 'QUATERNION' and 'AXIS_ANGLE' (`rig.rotation_modes`).
_QUATERNION_MODE = rig.MODE_VALUES['QUATERNION']
_AXIS_ANGLE_MODE = rig.MODE_VALUES['AXIS_ANGLE']


@dataclass
class _FreeTree:
    """What the lean path read for one solve of a free tree: the moving bones' channels, their FK values and
    the solve's input, plain floats (see `_read_free_tree`)."""

    tree: object
    local: object
    #: Per node, its limit, where the tree's limits are open cones (the local tree is then the free one:
    #: `local_solve.solve_open`); None for a free tree.
    limits: tuple | None
    #: The moving nodes' rotation channels, held entries and FK values.
    channels: _Channels
    #: The FK rotations as unit quaternions, and the start (FK, or the previous solution where warm).
    fk_rotations: list[tuple[float, ...]]
    rotations: list[tuple[float, ...]]
    translations: list
    fixed: list
    settings: SolveSettings
    influence: list[float] | None


def _read_free_tree(
    obj, depsgraph, gathered: Gathered, previous: dict | None, pose: PoseRead | None = None
) -> _FreeTree | None:
    """Read a lean solve of a free tree (no limits, rotation goals or IK stretch; poles are fine), or of one
    chain whose limits are open cones solved from FK (`local_solve.solve_open`), in bulk; None for a rig the lean
    path does not cover. The moving bones start at `previous` where it has them; `pose` is what the solve has
    read of the pose already."""
    settings = obj.fabrik
    if settings.solver != "FABRIK":
        return None
    skeleton, goals = gathered.skeleton, gathered.goals
    if not goals:
        return None
    tree = moving_tree(skeleton, goals)
    limits = free = None
    if any(limit is not None for limit in tree.limits):
        free = open_cones_as_free(tree) if previous is None else None
        if free is None or not local_solve.applies_open(free, goals):
            return None
        if _cones_bound.get(obj.name, 0) > 0:
            _cones_bound[obj.name] -= 1
            return None
        limits = tree.limits
    elif not local_solve.applies(tree, goals):
        return None
    if stretch.applies(skeleton, goals):
        return None
    pose = pose or read_pose(obj)
    at = _pose_indices(obj, skeleton, tree)
    channels = _read_channels(obj, [skeleton.names[b] for b in tree.bones], at.tolist(), depsgraph, pose)
    fk_rotations = [
        channels.channel_to_quaternion(mode, value) for mode, value in zip(channels.modes, channels.fk_values)
    ]
    rotations = fk_rotations
    if previous is not None:
        rotations = [as_quaternion(previous[b]) if b in previous else r for b, r in zip(tree.bones, rotations)]
    translations = [tuple(t) if any(t) else None for t in pose.channel("location", 3)[at].tolist()]
    local = local_solve.local_tree(skeleton, free or tree)
    fixed = hung_frames(obj, skeleton, tree, local)
    if fixed is None:
        return None  # a bone above a chain scaled to zero or not a number: the general path says which
    solve_settings = solve_settings_of(settings, previous is not None, rig_size(skeleton, tree))
    validate_goals(skeleton, goals)
    validate_settings(solve_settings)
    return _FreeTree(
        tree, local, limits, channels, fk_rotations, rotations, translations, fixed, solve_settings,
        influences(obj, depsgraph, tree, gathered.used),
    )


def hung_frames(obj, skeleton, tree, local) -> list | None:
    """Per node of the moving tree, the (frame, head) of the fixed bone it hangs from (`fixed_frame`; None for a
    node with a moving parent, or a root bone), as posed now; None where one has no usable frame."""
    pose_bones = obj.pose.bones
    # (copies: each element read of a pose bone's own matrix goes through RNA again)
    hung_from = [pose_bones[skeleton.names[b]].matrix.copy() if p < 0 and b >= 0 else None
                 for p, b in zip(tree.parent, local.parent_bone)]
    if not all(m is None or usable_frame(m) for m in hung_from):
        return None
    return [None if m is None else fixed_frame(m) for m in hung_from]


def _solve_read(obj, gathered: Gathered, read: _FreeTree) -> tuple[RigStatus, list] | None:
    """Solve what `_read_free_tree` read: the status and each moving node's new local rotation (unit
    quaternions), or None where the general path must go on (it refines, or says which bone is not finite)."""
    if read.limits is None:
        solved = local_solve.solve(read.local, gathered.goals, read.rotations, read.translations, read.fixed, read.settings)
    else:
        solved = local_solve.solve_open(
            read.local, read.limits, gathered.goals, read.rotations, read.translations, read.fixed, read.settings
        )
        if solved is None:
            _cones_bound[obj.name] = CONES_RETRY
    if solved is None:
        return None  # FABRIK alone did not converge on a tree with offsets, or left a limit: the general path refines
    solved, report = solved
    if not math.isfinite(sum(map(sum, solved))):
        return None  # never written nor remembered: the general path says which bone
    return lean_status(gathered, read, report, obj.fabrik.solver, rig.limit_problems(obj)), solved


def lean_status(
    gathered: Gathered, read: _FreeTree, report: SolveReport, solver: str, limit_problems: list[str]
) -> RigStatus:
    """The status of a lean solve of what `_read_free_tree` read, with its report (`solver` and `limit_problems`:
    the rig's, as `Problem` has them)."""
    result = RigStatus(effectors=dict(gathered.problems))
    problem = Problem(
        result, gathered.skeleton, gathered.goals, gathered.used, list(read.tree.bones), {}, None, read.settings,
        solver, limit_problems, gathered.began,
    )
    conclude_status(problem, report)
    if read.influence is not None:
        _say_influence(result, read.influence)
    return result


def _shown(read: _FreeTree, solved: list) -> list:
    """The rotations to pose the moving bones with: the solve, blended with FK where an influence is below 1."""
    if read.influence is None:
        return solved
    return [
        q if w >= 1.0 else quat.slerp(fk, q, max(0.0, w)) for q, fk, w in zip(solved, read.fk_rotations, read.influence)
    ]


def _solve_free_tree(obj, depsgraph, hold: bool, gathered: Gathered, pose: PoseRead) -> RigStatus | None:
    """`solve_object` for the common case, with the fewest Blender calls; None (having touched nothing) for a rig
    it does not cover.

    It covers FABRIK on a free tree (no limits, rotation goals or IK stretch;
    poles are fine), and on one chain in open cones solved from FK, in any
    rotation mode: the moving bones' channels are read and written in bulk
    (one foreach_set per channel kind that changed),
    `core.local_solve` solves on plain floats, and what `fabrik.held` keeps is
    updated in bulk. The result is the general path's.
    """
    warm = obj.fabrik.start == 'PREVIOUS' and obj.name in _last_solution
    read = _read_free_tree(obj, depsgraph, gathered, _last_solution[obj.name] if warm else None, pose)
    if read is None:
        return None
    outcome = _solve_read(obj, gathered, read)
    if outcome is None:
        return None
    result, solved = outcome
    channels = read.channels
    values = channel_values(channels.modes, _shown(read, solved), channels.current)
    _write_and_hold(obj, channels, values, channels.fk_values, hold)
    remember_solution(obj.name, read.tree.bones, solved)
    if channels.entries is not None and channels.entries[4].any():
        write_stretch(obj, gathered.skeleton, {}, pose)  # bones stretched before get their own scale back
    result.seconds = time.perf_counter() - gathered.began
    if hold:
        pose.lean = (read, gathered, result)
    return result


def last_solution(obj_name: str) -> dict | None:
    """The local rotations (matrices or unit quaternions) per bone of the rig's last solve, where it keeps them."""
    return _last_solution.get(obj_name)


def remember_solution(obj_name: str, bones, solved: list) -> None:
    """Keep a solve's local rotations (unit quaternions) per bone, for the next solve to start from (Start From:
    Previous)."""
    _last_solution[obj_name] = dict(zip(bones, solved))


def channel_values(modes: list[str], solved: list, current: list) -> list:
    """Each solved local rotation (a unit quaternion) as a value of its bone's rotation channel, continuous with
    what the channel holds now (`current`: no sign or 2 pi jumps, as mathutils' make_compatible does). (On plain
    floats: quicker than on arrays for any number of bones, once the list of them is counted in.)"""
    if modes and modes.count('QUATERNION') == len(modes):
        return list(map(channels.compatible_quaternion, solved, current))
    return [channels.channel_from_quaternion(mode, q, now) for q, now, mode in zip(solved, current, modes)]


def write_channels(obj, at, modes: list[str], arrays: dict, current: list, values: list) -> list[tuple[float, ...]]:
    """Set the rotation channels of the pose bones at `at` (each in its mode) to `values` in bulk, one foreach_set
    per channel kind that changed; `arrays` and `current` are what `_rotation_values` read. A channel that
    already holds its value in single precision is left alone, so an unchanged pose does not tag the rig for an
    update. Returns the values the channels now hold. (Bones all in one mode, the common case, are compared and
    set as one array.)"""
    pose_bones = obj.pose.bones
    if modes and len(set(modes)) == 1:
        channel = rig.rotation_channel(modes[0])[0]
        array = arrays[channel]
        rows = np.array(values, dtype=np.float32)  # (rounded as the channel stores them)
        if not np.array_equal(rows, array[at]):
            array[at] = rows
            pose_bones.foreach_set(channel, array.ravel())
            _tag_written(obj)
        return rows.tolist()
    written = []
    changed = set()
    for k, (value, now, mode) in enumerate(zip(values, current, modes)):
        if rig.holds_already(now, value):
            written.append(now)
            continue
        value = rig.single_precision(value)
        channel = rig.rotation_channel(mode)[0]
        arrays[channel][at[k]] = value
        changed.add(channel)
        written.append(value)
    for channel in changed:
        pose_bones.foreach_set(channel, arrays[channel].ravel())
    if changed:
        _tag_written(obj)
    return written


def _tag_written(obj) -> None:
    """Tag the rig for the evaluation its pose write needs.

    foreach_set tags nothing. A transform tag evaluates the pose again and all
    that hangs from it (deforming meshes, bone children), as a data tag does,
    but less besides (measured alone on the 159-bone humanoid: 0.37 against
    0.55 ms for Blender's evaluation after the write).
    """
    obj.update_tag(refresh={'OBJECT'})


def _write_solution(obj, solution: Solution, hold: bool) -> None:
    """Pose the solved bones from their local rotations, in bulk, over the channels the solve read, and hold what
    they held (or, without `hold`, let it go: the solved pose becomes the animator's). `_not_finite` has
    refused a solution with anything that is not a number."""
    channels, bones = solution.channels, solution.bones
    # Every solved rotation as a quaternion at once, then each as its channel's value (in double precision:
    # mathutils' single-precision axis-angle drops turns under about 3e-4 rad).
    solved = matrix_rows.quaternions_from_matrices(solution.local[bones]).tolist()
    values = [
        channels.channel_from_quaternion(mode, tuple(q), now)
        for q, mode, now in zip(solved, channels.modes, channels.current)
    ]
    _write_and_hold(obj, channels, values, [solution.fk_values[b] for b in bones], hold)


def _write_and_hold(obj, channels: _Channels, values: list, fk_values: list, hold: bool) -> None:
    """Set the channels read to `values` in bulk, and hold the FK values under them, or without `hold` let
    them go."""
    written = write_channels(obj, channels.at, channels.modes, channels.arrays, channels.current, values)
    if hold:
        _hold_in_bulk(obj, channels.held, channels.names, channels.modes, written, fk_values, channels.entries)
    else:
        _let_go(obj, channels.names)


def _compute_free_tree(obj, depsgraph, gathered: Gathered, previous: dict | None) -> tuple[RigStatus, Solution] | None:
    """`compute` on the lean path (a bake's solve of one frame), or None for a rig it does not cover: the moving
    bones from the plain-float solve, every other bone as Blender posed it."""
    read = _read_free_tree(obj, depsgraph, gathered, previous)
    if read is None:
        return None
    outcome = _solve_read(obj, gathered, read)
    if outcome is None:
        return None
    result, solved = outcome
    skeleton = gathered.skeleton
    local = skeleton.local_rotations(rig.current_pose(obj, skeleton))
    bones = list(read.tree.bones)
    local[bones] = matrix_rows.quaternion_to_matrix(np.array(_shown(read, solved)))
    fk_values = dict(zip(bones, read.channels.fk_values))
    unblended = None
    if read.influence is not None:
        unblended = dict(zip(bones, matrix_rows.quaternion_to_matrix(np.array(solved))))
    return result, Solution(skeleton, bones, local, {}, {}, fk_values, unblended)


def unusable_rig(obj, depsgraph) -> str | None:
    """Why no effector of the rig can be solved before anything is read (its transform is not a number), or None."""
    world = (obj.evaluated_get(depsgraph) if depsgraph else obj).matrix_world
    if not _finite_matrix(world):
        return f"'{obj.name}' has a transform that is not a number: nothing to solve"
    if abs(world.to_3x3().determinant()) < 1e-12:
        return f"'{obj.name}' has zero scale on some axis, so its space is undefined: nothing to solve"
    return None


def usable_goals(obj, gathered: Gathered, pose: PoseRead) -> tuple[Gathered, list[str]]:
    """The gathered goals without those whose chain has a channel that is not a number, or hangs from a bone
    without a usable frame (scaled to zero, not a number); each one left out says why in its effector's line.
    Also the reasons, in effector order."""
    skeleton, goals, used, problems, began = gathered
    if not goals:
        return gathered, []
    pose_bones = obj.pose.bones
    # The pose's channels decide for the common case, each read once in bulk (the solve and live solving's
    # snapshot use them too): every one finite, every scale exactly 1 (whole arrays at once: small numpy
    # operations cost more inside a frame than alone).
    bad = {} if pose.all_finite() else _channels_not_finite(obj, pose)
    scales = pose.channel("scale", 3)
    # A NaN elsewhere in the rig (which compares as not scaled) must not hide a scaled bone in this chain.
    scaled = _scaled_bones(obj, skeleton, scales) if (scales != 1.0).any() else {}
    parents, usable = skeleton.parents, {}
    kept, refusals = [], []
    for goal, index in zip(goals, used):
        top, moving = goal.bone, [goal.bone]
        while parents[top] >= 0 and len(moving) != goal.chain_length:
            top = parents[top]
            moving.append(top)
        parent = parents[top] if goal.chain_length else -1
        reason = None
        if parent >= 0:
            if parent not in usable:
                usable[parent] = usable_frame(pose_bones[skeleton.names[parent]].matrix.copy())
            if not usable[parent]:
                reason = _why_no_frame(obj, skeleton, parent, bad)
        if reason is None and bad:
            first = next((b for b in reversed(moving) if b in bad), None)  # the topmost
            if first is not None:
                reason = f"bone '{skeleton.names[first]}' has a {bad[first]} that is not a number"
        if reason is None and scaled:
            # With IK Stretch on the solve reads the chain's scales as they are, but none can undo a zero.
            first = next((
                b for b in reversed(skeleton.path_to_root(goal.bone))
                if b in scaled and (not goal.stretch or min(map(abs, scaled[b])) < 1e-6)
            ), None)
            if first is not None:
                words = ", ".join(f"{v:.3g}" for v in scaled[first])
                reason = (
                    f"bone '{skeleton.names[first]}' is scaled ({words}): FABRIK solves bones at their rest size; "
                    "set its scale to 1 (IK Stretch grows chains)"
                )
        if reason is None:
            kept.append((goal, index))
        else:
            problems = {**problems, index: reason}
            refusals.append(reason)
    if not refusals:
        return gathered, []
    return Gathered(skeleton, [g for g, _ in kept], [i for _, i in kept], problems, began), refusals


def _scaled_bones(obj, skeleton, scales: np.ndarray) -> dict[int, tuple[float, ...]]:
    """Per bone (skeleton index) whose scale channel is not 1, other than what IK stretch wrote: the scale.
    `scales` is every pose bone's scale channel, (n, 3)."""
    off = np.abs(scales - 1.0).max(axis=1) > 1e-5
    if not off.any():
        return {}
    held = held_bones(obj)
    out = {}
    for b, pose_index in enumerate(rig.pose_bone_order(obj).tolist()):
        if not off[pose_index]:
            continue
        name = skeleton.names[b]
        entry = held.get(name)
        scale = tuple(scales[pose_index].tolist())
        if entry is not None and entry.scaled and _same(scale, entry.written_scale):
            continue  # IK stretch's own
        out[b] = scale
    return out


def _channels_not_finite(obj, pose: PoseRead) -> dict[int, str]:
    """Per bone (skeleton index) with a channel that is not a number: which ('rotation', 'location', 'scale'),
    the rotation in the bone's own mode; from the channels as the solve read them."""

    def finite(name: str, size: int) -> np.ndarray:
        return np.isfinite(pose.channel(name, size)).all(axis=1)

    modes = pose.modes()
    rotation_ok = np.where(
        modes == _QUATERNION_MODE, finite("rotation_quaternion", 4),
        np.where(modes == _AXIS_ANGLE_MODE, finite("rotation_axis_angle", 4), finite("rotation_euler", 3)),
    )
    checks = (("rotation", rotation_ok), ("location", finite("location", 3)), ("scale", finite("scale", 3)))
    if all(ok.all() for _, ok in checks):
        return {}
    order = rig.pose_bone_order(obj)
    bad = {}
    for what, ok in reversed(checks):  # a bone with several shows its rotation's
        bad.update({int(b): what for b in np.flatnonzero(~ok[order])})
    return bad


def usable_frame(matrix) -> bool:
    """Whether a pose matrix gives a frame: finite, no axis scaled to (nearly) zero (NaN fails the comparison)."""
    return abs(matrix.to_3x3().determinant()) > 1e-12 and _finite_matrix(matrix)


def _finite_matrix(matrix) -> bool:
    """Whether every entry of a matrix is a finite number (a NaN or an infinity makes the sum none)."""
    return math.isfinite(sum(map(sum, matrix)))


def _why_no_frame(obj, skeleton, bone: int, bad: dict[int, str]) -> str:
    """Why the chain hanging from this bone cannot be solved, naming its topmost cause."""
    pose_bones = obj.pose.bones
    for b in reversed(skeleton.path_to_root(bone)):
        matrix = pose_bones[skeleton.names[b]].matrix
        if b in bad:
            return f"bone '{skeleton.names[b]}' above the chain has a {bad[b]} that is not a number: nothing to solve"
        if not usable_frame(matrix):
            if all(_finite(row) for row in matrix):
                return f"bone '{skeleton.names[b]}' above the chain is scaled to zero: nothing to solve"
            return f"bone '{skeleton.names[b]}' above the chain has a pose that is not a number: nothing to solve"
    return f"bone '{skeleton.names[bone]}' above the chain has no usable pose: nothing to solve"


def _not_finite(solution: Solution) -> str | None:
    """Why a solution must not be written (a rotation that is not a number, the animator's or the solve's), or None."""
    names = solution.skeleton.names
    for b in solution.bones:
        if not _finite(solution.fk_values.get(b, ())):
            return f"bone '{names[b]}' is keyed to a rotation that is not a number on this frame: nothing written"
    finite = np.isfinite(solution.local[solution.bones]).all(axis=(1, 2))
    if not finite.all():
        b = solution.bones[int(np.argmin(finite))]
        return f"the solve gave bone '{names[b]}' a rotation that is not a number: nothing written"
    return None


def _pose_indices(obj, skeleton, tree) -> np.ndarray:
    """Where each moving node's bone sits among obj.pose.bones (cached with the skeleton)."""
    key = ("pose_indices", tree.bones)
    at = skeleton._cache.get(key)
    if at is None:
        at = rig.pose_bone_order(obj)[list(tree.bones)]
        skeleton._cache[key] = at
    return at


def fixed_frame(matrix) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A fixed bone's pose matrix as (frame quaternion, head), its axes made unit as `rig.current_pose` does."""
    rows = [tuple(matrix[i][:3]) for i in range(3)]
    columns = [math.sqrt(sum(rows[i][j] ** 2 for i in range(3))) for j in range(3)]
    frame = [[rows[i][j] / columns[j] for j in range(3)] for i in range(3)]
    return quat.from_matrix(frame), (matrix[0][3], matrix[1][3], matrix[2][3])


def _new_entries(obj, held: HeldBones, names: list[str]) -> list:
    """Held entries for these bones, noting which bone each is (so it follows a rename: `follow_held_renames`)."""
    entries = held.add(names)
    bones = obj.data.bones
    for entry, name in zip(entries, names):
        index = bones.find(name)
        if index >= 0:
            entry.index, entry.head = index, bones[index].head_local
    return entries


def follow_held_renames(obj, bone_names=None) -> None:
    """Held entries of bones renamed since follow them (the same place among the bones, the same rest head).
    `bone_names`, when the caller has them, are the armature's bone names (a set or dict, for the quick check)."""
    held = held_bones(obj)
    bones = obj.data.bones
    names = held.keys()
    known = bone_names or bones
    if not names or all(name in known for name in names):
        return
    for entry in held:
        if entry.name in bones or not 0 <= entry.index < len(bones):
            continue
        bone = bones[entry.index]
        if bone.name not in names and (bone.head_local - Vector(entry.head)).length < 1e-5 * (1.0 + bone.length):
            entry.name = bone.name


def _held_arrays(held: HeldBones):
    """The held entries in bulk: (index by name, rotated, written (m, 4), fk (m, 4), scaled, set()), or None when
    there are none."""
    if not len(held):
        return None
    rotated = held.column("rotated").astype(bool)
    written, fk = held.column("written").copy(), held.column("fk").copy()
    scaled = held.column("scaled").astype(bool)
    index = {name: i for i, name in enumerate(held.keys())}
    # An entry that is not finite (from a file saved before they were refused) holds nothing: the channel is the
    # animator's, so a rig whose NaN was cleared solves again.
    rotated &= np.isfinite(written).all(axis=1) & np.isfinite(fk).all(axis=1)
    # The last item collects the entries found rotated in the bone's mode (so they are not read twice).
    return index, rotated, written, fk, scaled, set()


def _fk_in_bulk(obj, held: HeldBones, names, modes, current, entries, depsgraph=None) -> list[tuple[float, ...]]:
    """`fk_channel_values` from channels and held entries read in bulk (`modes`: each bone's rotation mode); the
    depsgraph, when there is one, tells the frame keyed channels are evaluated at."""
    if entries is None:
        return list(current)
    index, rotated, written, fk, _, matched = entries
    rotated, written, fk = rotated.tolist(), written.tolist(), fk.tolist()
    held_modes = None
    values = []
    keyed = None
    for name, mode, value in zip(names, modes, current):
        i = index.get(name)
        size = len(value)
        if i is not None and rotated[i] and _same(value, written[i][:size]):
            if held_modes is None:
                held_modes = held.modes()
            if held_modes[i] == mode:
                matched.add(i)
                value = tuple(fk[i][:size])
                if keyed is None:
                    keyed = _keyed_channels(obj, depsgraph)
                if keyed:
                    value = _animated(keyed, name, rig.rotation_channel(mode)[0], value)
        values.append(value)
    return values


def _hold_in_bulk(obj, held, names, modes, written, fk_values, entries) -> None:
    """Keep in the file, per bone, the rotation value written and the FK value it replaced, set in bulk (entries
    `_fk_in_bulk` matched need no other write)."""
    index = entries[0] if entries is not None else {}
    if any(name not in index for name in names):
        _new_entries(obj, held, [name for name in names if name not in index])
        entries = _held_arrays(held)
        index = entries[0]
    matched = entries[5]
    unmatched = {}
    for name, mode in zip(names, modes):
        i = index[name]
        if i not in matched:
            unmatched[i] = mode
    if unmatched:
        held.column("rotated")[list(unmatched)] = 1
        held.set_strings("mode", unmatched)
    rows = [index[name] for name in names]
    held.vectors("written", rows, written)
    held.vectors("fk", rows, fk_values)


def _same(a, b, tolerance: float = 1e-6) -> bool:
    """Whether two channel values agree (both single precision in Blender, so ours come back exactly); a value
    that is not a number agrees with nothing."""
    for x, y in zip(a, b):  # (a loop, not all() over a generator: this runs for every moving bone every frame)
        if not abs(x - y) <= tolerance:
            return False
    return True


def _finite(value) -> bool:
    """Whether every component of a value is a finite number."""
    return all(math.isfinite(x) for x in value)


def _let_go(obj, names: list[str]) -> None:
    """Forget the held rotations of these bones: what they hold now is the animator's."""
    held = held_bones(obj)
    for name in names:
        entry = held.get(name)
        if entry is not None and entry.rotated:
            entry.rotated = False


def write_stretch(obj, skeleton, scales: dict[int, float], pose: PoseRead | None = None) -> None:
    """Write IK stretch as the bones' uniform scale; bones stretched before and no longer get their own scale back
    (the animator's, kept with the rig: 1 unless they set another). `pose`, the solve's read of the pose, reads
    the scale again when next asked.

    Bones whose scale stays 1 and that we did not stretch are never touched.
    """
    if pose is not None:
        pose.forget("scale")
    wanted = {skeleton.names[b]: value for b, value in scales.items()}
    held = held_bones(obj)
    names = held.keys()
    for i in np.flatnonzero(held.column("scaled")).tolist():  # (every frame: the flags in bulk)
        if abs(wanted.get(names[i], 1.0) - 1.0) > 1e-9:
            continue  # still stretched: written below
        entry = held[i]
        pose_bone = obj.pose.bones.get(entry.name)
        if pose_bone is not None and _same(pose_bone.scale, entry.written_scale):
            pose_bone.scale = entry.fk_scale
        entry.scaled = False
    stretched = {}
    for name, value in wanted.items():
        if abs(value - 1.0) <= 1e-9:
            continue
        stretched[skeleton.index(name)] = value
        entry = held.get(name)
        if entry is None:
            entry = _new_entries(obj, held, [name])[0]
        scale = tuple(obj.pose.bones[name].scale)
        if not (entry.scaled and _same(scale, entry.written_scale)):
            entry.fk_scale = scale  # the bone does not hold our last stretch: its scale is the animator's
        entry.scaled = True
    rig.write_scales(obj, skeleton, stretched)
    for b, value in stretched.items():
        entry = held[skeleton.names[b]]
        if not _same(entry.written_scale, obj.pose.bones[skeleton.names[b]].scale, 0.0):
            entry.written_scale = tuple(obj.pose.bones[skeleton.names[b]].scale)


def _release_others(obj, moving: set[str]) -> bool:
    """Give the bones that left every chain (a chain made shorter, an effector removed or switched off) the
    animator's rotation back, where they still hold what live solving wrote, and stop holding them; whether a
    channel changed."""
    held = held_bones(obj)
    if not len(held):
        return False
    rotated = held.column("rotated").tolist()  # (every frame: in bulk, not an attribute read per entry)
    others = [name for name, was in zip(held.keys(), rotated) if was and name not in moving]
    if not others:
        return False
    changed = _give_back_rotations(obj, others)
    for name in others:
        held[name].rotated = False
    return changed


def _give_back_rotations(obj, names: list[str]) -> bool:
    """Put the animator's rotation back into each named bone's channel where it still holds what live solving
    wrote (`fk_channel_values`); whether a channel changed. Bones gone since have nothing to give back."""
    pose_bones = obj.pose.bones
    changed = False
    for name, (mode, value) in fk_channels(obj, [name for name in names if name in pose_bones]).items():
        pose_bone = pose_bones[name]
        channel = rig.rotation_channel(mode)[0]
        if _finite(value) and not _same(getattr(pose_bone, channel), value, 0.0):
            setattr(pose_bone, channel, value)
            changed = True
    return changed


def give_back(obj) -> None:
    """Put back the animator's values in every channel live solving wrote and that still holds what it wrote
    (the others have been set since, by animation or by hand, and keep that); then forget what was held."""
    follow_held_renames(obj)
    held = held_bones(obj)
    _give_back_rotations(obj, [entry.name for entry in held if entry.rotated])
    for entry in held:
        pose_bone = obj.pose.bones.get(entry.name)
        if pose_bone is not None and entry.scaled and _same(pose_bone.scale, entry.written_scale):
            pose_bone.scale = entry.fk_scale
    held.clear()
    _last_solution.pop(obj.name, None)


def stashed_fk(obj, bone_name: str) -> tuple[tuple[float, ...], np.ndarray] | None:
    """(the rotation value live solving last wrote, the FK rotation it replaced) for a bone, if any."""
    entry = held_bones(obj).get(bone_name)
    pose_bone = obj.pose.bones.get(bone_name)
    if entry is None or not entry.rotated or pose_bone is None or entry.mode != pose_bone.rotation_mode:
        return None
    if not (_finite(entry.written) and _finite(entry.fk)):
        return None
    size = rig.rotation_channel(entry.mode)[1]
    return tuple(entry.written)[:size], channel_matrix(entry.mode, tuple(entry.fk)[:size])


def fk_channel_values(obj, names: list[str]) -> dict[str, tuple[float, ...]]:
    """Per named bone, its FK rotation this frame as a value of its rotation channel, ignoring our own last write.

    A bone that holds what live solving wrote has the FK value that write
    replaced, except where animation keys the channel: there the FK value is
    what the animation gives this frame (it is re-evaluated on every frame, so
    the held value must not override it).
    """
    return {name: value for name, (_, value) in fk_channels(obj, names).items()}


def fk_channels(obj, names: list[str], depsgraph=None) -> dict[str, tuple[str, tuple[float, ...]]]:
    """`fk_channel_values` with each bone's rotation mode: (mode, value) per named bone, read in bulk (the
    depsgraph, when given, tells the frame keyed channels are evaluated at)."""
    channels = _read_channels(obj, names, _pose_bone_indices(obj, names), depsgraph)
    return {name: (mode, value) for name, mode, value in zip(names, channels.modes, channels.fk_values)}


def _pose_bone_indices(obj, names: list[str]) -> list[int]:
    """Where each named bone sits among obj.pose.bones (KeyError for one that is not there)."""
    pose_bones = obj.pose.bones
    at = [pose_bones.find(name) for name in names]
    if any(i < 0 for i in at):
        raise KeyError(f"no bone '{names[at.index(-1)]}' in '{obj.name}'")
    return at


#: Pose-bone channels that make a pose (the rotation of every mode, location, scale) and their sizes.
POSE_CHANNELS = (
    ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4), ("location", 3), ("scale", 3)
)


class PoseRead:
    """A rig's pose channels as one solve reads them: each channel of every pose bone read once, in bulk, when
    first asked for, and the rotation modes. The solve's rotation write sets its values in these arrays as well,
    and what is written by other means is forgotten (read again when next asked for), so after a solve they are
    the channels as it left them, which live solving keeps to compare its next update with (`snapshot`)."""

    def __init__(self, obj, count: int | None = None) -> None:
        self.pose_bones = obj.pose.bones
        #: How many pose bones there are (counting them walks them all: a solve knows from the skeleton it read).
        self.count = len(self.pose_bones) if count is None else count
        self.arrays: dict[str, np.ndarray] = {}
        self._modes: np.ndarray | None = None
        #: Where the solve went the lean path holding the animator's pose: what it read, (`_FreeTree`,
        #: `Gathered`, status), for live solving to solve the next frames from (`steady`).
        self.lean: tuple | None = None
        #: Where it went the general path: the `Problem` it solved, for the same.
        self.general: Problem | None = None

    def channel(self, name: str, size: int) -> np.ndarray:
        """One channel of every pose bone, (count, size)."""
        values = self.arrays.get(name)
        if values is None:
            values = np.empty(self.count * size, dtype=np.float32)
            self.pose_bones.foreach_get(name, values)
            values = self.arrays[name] = values.reshape(self.count, size)
        return values

    def modes(self) -> np.ndarray:
        """Every pose bone's rotation mode (`rig.rotation_modes`)."""
        if self._modes is None:
            self._modes = rig.rotation_modes(self.pose_bones, self.count)
        return self._modes

    def all_finite(self) -> bool:
        """Whether every channel of every pose bone is a number (any mode's rotation: a NaN in a channel the
        bone's mode does not use fails this, and is looked at more closely)."""
        return math.isfinite(sum(float(self.channel(name, size).sum()) for name, size in POSE_CHANNELS))

    def forget(self, *channels: str) -> None:
        """Read these channels (by default every channel and the modes) again when next asked: they were set by
        other means than the solve's rotation write."""
        if channels:
            for name in channels:
                self.arrays.pop(name, None)
            return
        self.arrays.clear()
        self._modes = None

    def snapshot(self) -> bytes:
        """The pose channels and rotation modes as one comparable value."""
        return b"".join([self.channel(name, size).tobytes() for name, size in POSE_CHANNELS] + [self.modes().tobytes()])


def read_pose(obj) -> PoseRead:
    """A `PoseRead` of a rig whose structure the caller has just read (`rig.skeleton_of`)."""
    return PoseRead(obj, len(rig.pose_bone_order(obj)))


@dataclass
class _Channels:
    """Some bones' rotation channels as one bulk read found them (`_read_channels`), kept for a bulk write."""

    #: Per bone: its index among the pose bones, name, rotation mode and channel value.
    at: list[int]
    names: list[str]
    modes: list[str]
    #: Each rotation channel kind read: (number of pose bones, size) values.
    arrays: dict[str, np.ndarray]
    current: list[tuple[float, ...]]
    #: What `fabrik.held` keeps, in bulk (`_held_arrays`; its last item: the entries the FK read matched).
    held: object
    entries: tuple | None
    #: Per bone, its FK value (`fk_channel_values`).
    fk_values: list[tuple[float, ...]]


def _read_channels(obj, names: list[str], at: list[int], depsgraph=None, pose: PoseRead | None = None) -> _Channels:
    """The named bones' rotation channels (at these pose-bone indices), modes and FK values, read in bulk (from
    `pose`, where the solve has read some already)."""
    pose = pose or PoseRead(obj)
    modes = [rig.MODE_NAMES[m] for m in pose.modes()[at].tolist()]
    arrays = pose.arrays
    current = _rotation_values(pose, at, modes)
    held = held_bones(obj)
    entries = _held_arrays(held)
    fk_values = _fk_in_bulk(obj, held, names, modes, current, entries, depsgraph)
    return _Channels(at, names, modes, arrays, current, held, entries, fk_values)


def _rotation_values(pose: PoseRead, at: list[int], modes: list[str]) -> list[tuple[float, ...]]:
    """The rotation channel values of the pose bones at these indices, each in its mode (only the channel kinds
    the modes use are read)."""
    return [tuple(pose.channel(*rig.rotation_channel(mode))[i].tolist()) for mode, i in zip(modes, at)]


def _keyed_channels(obj, depsgraph=None) -> tuple | None:
    """(the F-curves of the rig's active action, this frame, the data paths they animate) when it has any, else
    an empty tuple. The frame is the depsgraph's scene's; without one, that of the first scene the rig is in
    (`users_scene` searches them all)."""
    collection = animdata.fcurves(obj)
    if collection is None or not len(collection):
        return ()
    paths = animdata.fcurve_paths(obj, collection)
    if depsgraph is not None:
        return collection, depsgraph.scene.frame_current_final, paths
    return collection, obj.users_scene[0].frame_current_final if obj.users_scene else 0.0, paths


def _animated(keyed: tuple, name: str, channel: str, value: tuple[float, ...]) -> tuple[float, ...]:
    """The channel value with each keyed component replaced by what its F-curve gives this frame."""
    collection, frame, paths = keyed
    path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].{channel}'
    if path not in paths:
        return value
    result = list(value)
    for index in range(len(value)):
        fcurve = collection.find(path, index=index)
        if fcurve is not None and not fcurve.mute:
            result[index] = fcurve.evaluate(frame)
    return tuple(result)


def channel_matrices(modes: list[str], values: list[tuple[float, ...]]) -> np.ndarray:
    """`channel_matrix` of many values at once, (n, 3, 3)."""
    quaternions = [channels.channel_to_quaternion(mode, value) for mode, value in zip(modes, values)]
    return matrix_rows.quaternion_to_matrix(np.array(quaternions).reshape(-1, 4))


def channel_matrix(mode: str, value: tuple[float, ...]) -> np.ndarray:
    """A rotation channel value in the given mode as a 3x3 matrix."""
    return np.array(channels.channel_to_matrix(mode, value))  # double precision, as Blender reads the value
