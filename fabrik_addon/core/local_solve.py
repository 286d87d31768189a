# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK on a free tree from local rotations to local rotations, in plain floats.

The live path's common case: the moving bones have no limits, and the goals
are positions only (no rotation goal, pole or IK stretch): `applies` and
`batch.supports(...)` are True. There a solve needs no numpy at all: forward
kinematics from the bones' local rotations (quaternions) places the joints,
FABRIK's own passes move them by the same stopping rules as `fabrik.solve`,
and each bone's new local rotation comes out relative to its parent.

* A connected tree carries no frames: each bone's new frame is its start
  frame turned the shortest way onto its new direction (as
  `matrix_rows.swung_frames` does). One chain pulled at its tip runs the paper's
  two passes as they are written (`fabrik.solve_chain`).
* A tree with bones hanging off their parents' tails (a hand's fingers off
  the palm) carries every bone's frame through the passes, as `fabrik.solve`
  does there. Where FABRIK's descent does not converge, `fabrik.solve` hands
  the pose to its refinement: `solve` then returns None and the caller takes
  the general path.
* One chain whose limits are open cones, solved from FK (`solve_open`): the
  free chain's passes, kept where every joint ends inside its limit, as
  `fabrik.solve` first tries there; else None, and the general path goes on.

The result equals `fabrik.solve` followed by `Skeleton.local_rotations`; on a
handful of bones it costs a fraction of it, since nothing builds whole-pose
arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from . import limits as joint_limits
from . import pole, quat, refine
from .fabrik import (
    SLOW_WINDOW, Joints, MovingTree, _bend_if_straight_at, _part_way, backward_reaching, branch_weights,
    components, forward_reaching, goal_errors, is_two_bone_chain, joined_report, pulled_at_tip, settle_two_bones,
    solve_chain,
)
from .limits import JointLimit
from .problem import Goal, Progress, SolveReport, SolveSettings
from .quat import Quat
from .skeleton import Skeleton
from .vec import Vec, add, dist, perpendicular, scale, sub

__all__ = [
    "LocalTree", "applies", "applies_open", "goes_on", "local_tree", "placed_by_start", "solve", "solve_from_start",
    "solve_on", "solve_open", "swung_frames", "tracked_rotations", "with_start_twist",
]


@dataclass(frozen=True)
class LocalTree:
    """What forward kinematics of a moving tree needs from the skeleton, per node (cached per goal layout)."""

    tree: MovingTree
    #: Per node, its rest frame in its parent's rest frame (its rest frame for a root bone).
    rest: tuple[Quat, ...]
    #: Per node, its rest head from its parent's head in the parent's rest frame (armature space for a root).
    head: tuple[Vec, ...]
    #: Per node, its parent bone (-1 for a root): for a base node, the fixed bone it hangs from.
    parent_bone: tuple[int, ...]
    #: Where the goals fall into groups that share no bones (`fabrik.components`), each group's goal indices,
    #: node indices and tree; empty for one group.
    parts: tuple[tuple[tuple[int, ...], tuple[int, ...], LocalTree], ...] = ()


def local_tree(skeleton: Skeleton, tree: MovingTree) -> LocalTree:
    """The forward-kinematics data of a moving tree's nodes (cached on the skeleton)."""
    key = ("local_tree", id(tree))  # (not its bones: two goal layouts can move the same bones; trees are cached too)
    cached = skeleton._cache.get(key)
    if cached is None:
        groups = components(tree)
        parts = []
        if len(groups) > 1:
            for group in groups:
                part, nodes = tree.part(group)
                parts.append((tuple(group), tuple(nodes), _local_tree_of(skeleton, part, ())))
        cached = _local_tree_of(skeleton, tree, tuple(parts))
        skeleton._cache[key] = cached
    return cached


def _local_tree_of(skeleton: Skeleton, tree: MovingTree, parts: tuple) -> LocalTree:
    """A moving tree's forward-kinematics data, read from the skeleton."""
    return LocalTree(
        tree,
        tuple(skeleton.rest_relative[b] for b in tree.bones),
        tuple(tuple(skeleton.head_in_parent[b].tolist()) for b in tree.bones),
        tuple(skeleton.parents[b] for b in tree.bones),
        parts,
    )


def applies(tree: MovingTree, goals: Sequence[Goal]) -> bool:
    """True for a free tree (no limits) pulled by position goals, with or without poles (the case this module
    solves).

    IK stretch is the caller's to rule out (it depends on the skeleton's stretch factors).
    """
    return bool(goals) and all(limit is None for limit in tree.limits) and all(g.rotation is None for g in goals)


def applies_open(free: MovingTree, goals: Sequence[Goal]) -> bool:
    """True for the case `solve_open` solves: one chain pulled at its tip by a position goal of some weight,
    without a pole (`free`: the tree without its open cones, `fabrik.open_cones_as_free`)."""
    return (
        applies(free, goals) and pulled_at_tip(free, goals) and goals[0].weight > 0.0 and goals[0].pole is None
    )


def start_joints(
    local: LocalTree,
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
) -> tuple[list[Quat], list[Vec], list[Vec]]:
    """Forward kinematics of the moving nodes: their frames, heads and tails.

    `rotations` and `translations` are each node's local rotation and location
    channel (None for none); `fixed` gives each base node whose bone has a
    parent that parent's frame and head (None for root bones), as Blender
    composes them: pose = parent pose @ (parent rest^-1 @ rest) @ basis.
    """
    # (quaternion products written out: on every live frame this runs once per moving bone, and the calls of
    # quat.mul, rotate and y_axis cost more than their arithmetic)
    tree = local.tree
    frames: list[Quat] = []
    heads: list[Vec] = []
    tails: list[Vec] = []
    for k, p in enumerate(tree.parent):
        rest = local.rest[k]
        offset = local.head[k]
        t = translations[k]
        if t is not None:
            offset = add(offset, quat.rotate(rest, t))
        aw, ax, ay, az = rest
        bw, bx, by, bz = rotations[k]
        # relative = rest * rotation
        w = aw * bw - ax * bx - ay * by - az * bz
        x = aw * bx + ax * bw + ay * bz - az * by
        y = aw * by - ax * bz + ay * bw + az * bx
        z = aw * bz + ax * by - ay * bx + az * bw
        if p >= 0:
            parent_frame, parent_head = frames[p], heads[p]
        else:
            parent = fixed[k]
            parent_frame, parent_head = parent if parent is not None else (None, None)
        if parent_frame is None:
            head = offset
        else:
            # frame = parent frame * relative
            aw, ax, ay, az = parent_frame
            w, x, y, z = (
                aw * w - ax * x - ay * y - az * z,
                aw * x + ax * w + ay * z - az * y,
                aw * y - ax * z + ay * w + az * x,
                aw * z + ax * y - ay * x + az * w,
            )
            # head = parent head + the offset turned by the parent frame (quat.rotate)
            vx, vy, vz = offset
            tx, ty, tz = 2.0 * (ay * vz - az * vy), 2.0 * (az * vx - ax * vz), 2.0 * (ax * vy - ay * vx)
            head = (
                parent_head[0] + (vx + aw * tx + ay * tz - az * ty),
                parent_head[1] + (vy + aw * ty + az * tx - ax * tz),
                parent_head[2] + (vz + aw * tz + ax * ty - ay * tx),
            )
        n = math.sqrt(w * w + x * x + y * y + z * z)
        w, x, y, z = w / n, x / n, y / n, z / n
        frames.append((w, x, y, z))
        heads.append(head)
        length = tree.length[k]
        # tail = head + the frame's Y axis (quat.y_axis) times the bone's length
        tails.append((
            head[0] + 2.0 * (x * y - w * z) * length,
            head[1] + (1.0 - 2.0 * (x * x + z * z)) * length,
            head[2] + 2.0 * (y * z + w * x) * length,
        ))
    return frames, heads, tails


def solve(
    local: LocalTree,
    goals: Sequence[Goal],
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
    settings: SolveSettings,
    window: int = 0,
) -> tuple[list[Quat], SolveReport] | None:
    """Solve the goals from the nodes' local rotations; return their new local rotations (unit quaternions, node
    order) and the report, as `fabrik.solve` would give them (see `start_joints` for the arguments).

    None on a tree with offsets where FABRIK's descent alone does not converge (`fabrik.solve` goes on there),
    and where a node hangs from its moving parent through bones that do not move. A `window` makes one free
    chain pulled at its tip hand over as `fabrik.iterate_chain` does.
    """
    if local.parts:  # chains that share no bones: each stops when it has reached, as `fabrik.solve` does
        return _solve_apart(local, goals, rotations, translations, fixed, settings)
    if not placed_by_start(local, goals):
        return None  # a node hangs from its moving parent through fixed bones: `start_joints` does not place it
    start = start_joints(local, rotations, translations, fixed)
    return solve_from_start(local, goals, rotations, start, fixed, settings, window)


def placed_by_start(local: LocalTree, goals: Sequence[Goal]) -> bool:
    """Whether `start_joints` places the tree's nodes as the passes need them: not where the tree carries frames
    and a node hangs from its moving parent through bones that do not move."""
    tree = local.tree
    if not (tree.needs_frames or any(g.pole is not None for g in goals)):
        return True
    return all(p < 0 or local.parent_bone[k] == tree.bones[p] for k, p in enumerate(tree.parent))


def solve_from_start(
    local: LocalTree,
    goals: Sequence[Goal],
    rotations: Sequence[Quat],
    start: tuple[list[Quat], list[Vec], list[Vec]],
    fixed: Sequence[tuple[Quat, Vec] | None],
    settings: SolveSettings,
    window: int = 0,
) -> tuple[list[Quat], SolveReport] | None:
    """`solve` of a tree in one part that `placed_by_start`, from the frames, heads and tails `start_joints` gave
    for these rotations (which a caller solving the same start pose on other targets keeps)."""
    tree = local.tree
    frames, heads, tails = start
    joints = _joints(tree, list(heads), list(tails))
    poled = any(g.pole is not None for g in goals)
    if tree.needs_frames or poled:
        _carry_frames(tree, joints, frames, poled)
        # As `fabrik.solve`: a tree with offsets hands over to the refinement once FABRIK crawls; with poles
        # FABRIK goes on (and where it stops short, tries again less carefully: the general path's).
        report = _iterate_framed(tree, joints, goals, settings, pole.holds(tree, joints, goals, settings.tolerance) if poled else [])
        if not report.converged:
            return None
        final = joints.frames if joints.carried is None else swung_frames(tree, joints.frames, joints, joints.carried)
        return tracked_rotations(local, final, fixed), report
    report, moved = _iterate(tree, joints, goals, settings, window)
    if not moved:  # reached at the start: the pose stays as it was
        return [quat.normalized(q) for q in rotations], report
    return tracked_rotations(local, swung_frames(tree, frames, joints), fixed), report


def goes_on(local: LocalTree, goals: Sequence[Goal]) -> bool:
    """Whether `solve_on` solves this tree: a free connected tree in one part, pulled by position goals without
    poles (the case where each bone's frame is its start frame swung, nothing carried through the passes)."""
    tree = local.tree
    return not local.parts and not tree.needs_frames and applies(tree, goals) and all(g.pole is None for g in goals)


def solve_on(
    local: LocalTree, goals: Sequence[Goal], start: tuple[list[Quat], list[Vec], list[Vec]], settings: SolveSettings
) -> tuple[tuple[list[Quat], list[Vec], list[Vec]], SolveReport]:
    """`solve` where `goes_on`, from the nodes' frames, heads and tails as they are (`start_joints` of the start
    rotations: in a continuous solve, what the previous frame's solve left where nothing above the tree moved
    since): the new frames (each start frame swung onto its solved direction), heads and tails, and the
    report. `tracked_rotations` gives the local rotations of those frames."""
    tree = local.tree
    frames, heads, tails = start
    joints = _joints(tree, list(heads), list(tails))
    report, moved = _iterate(tree, joints, goals, settings)
    if not moved:
        return start, report
    return (swung_frames(tree, frames, joints), joints.heads, joints.tails), report


def solve_open(
    local: LocalTree,
    limits: Sequence[JointLimit | None],
    goals: Sequence[Goal],
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
    settings: SolveSettings,
) -> tuple[list[Quat], SolveReport] | None:
    """`solve` for a chain whose limits are open cones, in the case `applies_open` accepts (`local` is of the tree
    without them: `fabrik.open_cones_as_free`), as `fabrik.solve` starts on it: the free chain's passes, handing
    over once they crawl. Their answer where they converge with every joint inside its limit (a leaf's twist,
    which moves no goal, back at its start's, as `refine.start_twists` reads it); None where not (the general
    path goes on from there).

    Each node's local rotation here is the one its limit reads (relative to its
    parent's frame and its rest), so the limits are checked on the result as it is.
    """
    tree = local.tree
    outcome = solve(local, goals, rotations, translations, fixed, settings, SLOW_WINDOW)
    if outcome is None or not outcome[1].converged:
        return None
    solved, report = outcome
    for k, limit in enumerate(limits):
        if limit is None:
            continue
        if not joint_limits.allows(limit, solved[k]):
            return None
        if not tree.children[k]:  # (a leaf: its twist moves no goal)
            solved[k] = with_start_twist(limit, solved[k], rotations[k])
    return solved, report


def with_start_twist(limit: JointLimit, solved: Quat, start: Quat) -> Quat:
    """A limited leaf's solved local rotation with the twist it started with (a leaf's twist moves no position
    goal), as `refine.start_twists` reads it: both read into the limit's coordinates."""
    sx, sz, _ = refine.limited_angles(limit, quat.IDENTITY, solved)
    return quat.from_swing_twist(sx, sz, refine.limited_angles(limit, quat.IDENTITY, start)[2])


def _solve_apart(
    local: LocalTree,
    goals: Sequence[Goal],
    rotations: Sequence[Quat],
    translations: Sequence[Vec | None],
    fixed: Sequence[tuple[Quat, Vec] | None],
    settings: SolveSettings,
) -> tuple[list[Quat], SolveReport] | None:
    """`solve` for each group of goals on its own part of the tree (see `LocalTree.parts`), the reports joined;
    None where any part needs the general path."""
    out: list[Quat] = list(rotations)
    reports = []
    for group, nodes, part in local.parts:
        solved = solve(
            part, [goals[g] for g in group], [rotations[k] for k in nodes], [translations[k] for k in nodes],
            [fixed[k] for k in nodes], settings,
        )
        if solved is None:
            return None
        for k, q in zip(nodes, solved[0]):
            out[k] = q
        reports.append(solved[1])
    return out, joined_report([group for group, _, _ in local.parts], reports, len(goals))


def _carry_frames(tree: MovingTree, joints: Joints, frames: list[Quat], poled: bool) -> None:
    """Give the joints the bones' start frames and each unconnected bone's offset from its parent's tail in the
    parent's frame, and which frames the passes carry (as `fabrik.Joints` does for a tree that needs frames)."""
    joints.frames = list(frames)
    joints.carried = tree.carried_frames(poled)
    for k, p in enumerate(tree.parent):
        if p >= 0 and not tree.connected[k]:
            joints.offset[k] = quat.rotate(quat.conj(frames[p]), sub(joints.heads[k], joints.tails[p]))


def _iterate_framed(
    tree: MovingTree, joints: Joints, goals: Sequence[Goal], settings: SolveSettings, holds: list[pole.PoleHold]
) -> SolveReport:
    """`fabrik._solve_from` (careful) for a free tree carrying frames, with position goals and the poles' holds:
    each iteration that does not lower the error is undone and tried again reaching part of the way. Without
    poles it hands over after `fabrik.SLOW_WINDOW` iterations that do not halve the error, as `fabrik.solve`
    does there."""
    count = len(goals)
    window = 0 if any(g.pole is not None for g in goals) else SLOW_WINDOW
    targets = [tuple(float(c) for c in g.target) for g in goals]
    for chain, goal in zip(tree.goal_chain, goals):
        _bend_if_straight_at(tree, joints, chain, goal, settings.tolerance)
    if is_two_bone_chain(tree, goals) and settle_two_bones(tree, joints, targets[0]):
        # On its target in its pole's plane, as `fabrik._solve_from` leaves it: the passes would not move it.
        errors = [dist(joints.tails[1], targets[0])]
        return SolveReport(0, errors, True, "converged", rotation_errors=[0.0])
    weights = [float(g.weight) for g in goals]
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    branch = branch_weights(tree, weights)
    tolerance = settings.tolerance
    errors = goal_errors(tree, joints, goals, node_of_goal)
    report = SolveReport(0, errors, False, "max_iterations", rotation_errors=[0.0] * count)
    progress = Progress(settings, sum(errors))
    best_joints, best_errors = joints.snapshot(), errors
    pulling = [g for g, goal in enumerate(goals) if goal.weight > 0.0]
    history = [sum(errors[g] for g in pulling)]
    step = 1.0
    for iteration in range(1, settings.max_iterations + 1):
        aims = targets
        if step < 1.0:
            aims = [_part_way(joints.tails[node_of_goal[g]], t, step) for g, t in enumerate(targets)]
        forward_reaching(tree, joints, aims, weights, branch, [])
        for hold in holds:
            pole.turn_about_pole(tree, joints, hold)
        backward_reaching(tree, joints, None)
        errors = goal_errors(tree, joints, goals, node_of_goal)
        report.iterations = iteration
        if max(errors) <= tolerance:
            best_joints, best_errors = None, errors
            report.converged, report.stopped_by = True, "converged"
            break
        if progress.improves(sum(errors)):
            best_joints, best_errors = joints.snapshot(), errors
            step = min(1.0, 2.0 * step)
        else:
            if progress.stalled:
                report.stopped_by = "stalled"
                break
            joints.restore(best_joints)
            step *= 0.5
        if window:
            history.append(min(history[-1], sum(errors[g] for g in pulling)))
            if iteration >= window and history[-1] > 0.5 * history[iteration - window]:
                report.stopped_by = "handover"
                break
    if best_joints is not None:
        joints.restore(best_joints)
    report.errors = best_errors
    return report


def tracked_rotations(local: LocalTree, frames: list[Quat], fixed: Sequence[tuple[Quat, Vec] | None]) -> list[Quat]:
    """Each node's local rotation from its frame (armature space): relative to its parent's frame (or the fixed
    bone's it hangs from) and its rest."""
    # (the products written out, as in `start_joints`: once per moving bone every frame)
    tree = local.tree
    out: list[Quat] = []
    for k, p in enumerate(tree.parent):
        parent = frames[p] if p >= 0 else (fixed[k][0] if fixed[k] is not None else None)
        aw, ax, ay, az = local.rest[k]
        if parent is not None:
            # zero = parent * rest (quat.mul)
            pw, px, py, pz = parent
            aw, ax, ay, az = (
                pw * aw - px * ax - py * ay - pz * az,
                pw * ax + px * aw + py * az - pz * ay,
                pw * ay - px * az + py * aw + pz * ax,
                pw * az + px * ay - py * ax + pz * aw,
            )
        # conj(zero) * frame, normalized
        ax, ay, az = -ax, -ay, -az
        fw, fx, fy, fz = frames[k]
        w = aw * fw - ax * fx - ay * fy - az * fz
        x = aw * fx + ax * fw + ay * fz - az * fy
        y = aw * fy - ax * fz + ay * fw + az * fx
        z = aw * fz + ax * fy - ay * fx + az * fw
        n = math.sqrt(w * w + x * x + y * y + z * z)
        out.append((w / n, x / n, y / n, z / n))
    return out


def _joints(tree: MovingTree, heads: list[Vec], tails: list[Vec]) -> Joints:
    """FABRIK's working state for a free connected tree, built from plain floats."""
    joints = Joints.__new__(Joints)
    joints.heads, joints.tails = heads, tails
    joints.base = [heads[k] if p < 0 else None for k, p in enumerate(tree.parent)]
    joints.offset = [None] * len(tree.bones)
    joints.frames = None
    joints.carried = None
    joints.zero = []
    return joints


def _iterate(
    tree: MovingTree, joints: Joints, goals: Sequence[Goal], settings: SolveSettings, window: int = 0
) -> tuple[SolveReport, bool]:
    """`fabrik._solve_from` (careful, no handover) for a free connected tree: the joints end where it leaves them.
    A `window` (one chain pulled at its tip only) hands over as `fabrik.iterate_chain` does.

    Returns the report and whether the pose moved (not when the start already reaches every goal).
    """
    count = len(goals)
    for chain, goal in zip(tree.goal_chain, goals):
        _bend_if_straight_at(tree, joints, chain, goal, settings.tolerance)
    tolerance = settings.tolerance
    if pulled_at_tip(tree, goals):  # the paper's own case, without the tree's bookkeeping
        error = dist(joints.tails[-1], goals[0].target)
        if error <= tolerance:
            return SolveReport(0, [error], True, "converged", rotation_errors=[0.0]), False
        paper = solve_chain(tree, joints, goals, settings, window)
        if paper is not None:
            return paper, True
    targets = [tuple(float(c) for c in g.target) for g in goals]
    weights = [float(g.weight) for g in goals]
    node_of_goal = [tree.bones.index(g.bone) for g in goals]
    branch = branch_weights(tree, weights)
    errors = goal_errors(tree, joints, goals, node_of_goal)
    if max(errors) <= tolerance:
        return SolveReport(0, errors, True, "converged", rotation_errors=[0.0] * count), False
    report = SolveReport(0, errors, False, "max_iterations", rotation_errors=[0.0] * count)
    progress = Progress(settings, sum(errors))
    best_joints, best_errors = joints.snapshot(), errors
    for iteration in range(1, settings.max_iterations + 1):
        forward_reaching(tree, joints, targets, weights, branch, [])
        backward_reaching(tree, joints, None)
        errors = goal_errors(tree, joints, goals, node_of_goal)
        report.iterations = iteration
        if max(errors) <= tolerance:
            best_joints, best_errors = None, errors
            report.converged, report.stopped_by = True, "converged"
            break
        if progress.improves(sum(errors)):
            best_joints, best_errors = joints.snapshot(), errors
        elif progress.stalled:
            report.stopped_by = "stalled"
            break
    if best_joints is not None:
        joints.restore(best_joints)
    report.errors = best_errors
    return report, True


def _swung_half_round(frame: Quat, a: Vec, b: Vec) -> Quat:
    """The frame turned from its Y axis a onto unit b nearly opposite (a.b below -1 + 1e-6), as
    `matrix_rows.swung_frames` turns it there: a half turn about its X axis made perpendicular to a, then the short
    rest. (`swung_frames` turns every other frame itself.)"""
    x = quat.x_axis(frame)
    kd = a[0] * x[0] + a[1] * x[1] + a[2] * x[2]
    k = (x[0] - kd * a[0], x[1] - kd * a[1], x[2] - kd * a[2])
    n = (k[0] * k[0] + k[1] * k[1] + k[2] * k[2]) ** 0.5
    k = scale(k, 1.0 / n) if n > 1e-9 else perpendicular(a)
    turn = quat.mul(quat.arc((-a[0], -a[1], -a[2]), b, k), (0.0, k[0], k[1], k[2]))
    return quat.normalized(quat.mul(turn, frame))


def swung_frames(
    tree: MovingTree, frames: list[Quat], joints: Joints, carried: Sequence[bool] | None = None
) -> list[Quat]:
    """Each node's start frame turned the shortest way onto its solved direction (as `matrix_rows.swung_frames`);
    the frames of nodes the passes `carried` (`Joints.carried`) as they are (as `Joints.final_frames`)."""
    # (the common turn and its product written out, as in `start_joints`: once per moving bone every frame)
    heads, tails = joints.heads, joints.tails
    solved: list[Quat] = []
    for k, frame in enumerate(frames):
        if carried is not None and carried[k]:
            solved.append(frame)
            continue
        fw, fx, fy, fz = frame
        head, tail = heads[k], tails[k]
        inverse = 1.0 / tree.length[k]
        bx, by, bz = (tail[0] - head[0]) * inverse, (tail[1] - head[1]) * inverse, (tail[2] - head[2]) * inverse
        n = 1.0 / math.sqrt(bx * bx + by * by + bz * bz)
        bx, by, bz = bx * n, by * n, bz * n
        # a: the frame's Y axis (quat.y_axis), the bone's start direction
        ax, ay, az = 2.0 * (fx * fy - fw * fz), 1.0 - 2.0 * (fx * fx + fz * fz), 2.0 * (fy * fz + fw * fx)
        d = ax * bx + ay * by + az * bz
        if d >= -1.0 + 1e-6:
            # the frame turned by quat.arc(a, b): (1 + a.b, a x b), normalized, then the product normalized
            tw, tx, ty, tz = 1.0 + d, ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx
            n = math.sqrt(tw * tw + tx * tx + ty * ty + tz * tz)
            tw, tx, ty, tz = tw / n, tx / n, ty / n, tz / n
            w = tw * fw - tx * fx - ty * fy - tz * fz
            x = tw * fx + tx * fw + ty * fz - tz * fy
            y = tw * fy - tx * fz + ty * fw + tz * fx
            z = tw * fz + tx * fy - ty * fx + tz * fw
            n = math.sqrt(w * w + x * x + y * y + z * z)
            frame = (w / n, x / n, y / n, z / n)
        else:
            frame = _swung_half_round(frame, (ax, ay, az), (bx, by, bz))
        solved.append(frame)
    return solved
