# SPDX-License-Identifier: GPL-3.0-or-later
"""What the viewport overlay draws, as segments and labels in world space: built by plain functions from the
evaluated rig and its last status, with no GPU (tests read them in background mode; `overlay` draws them)."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import bpy
from mathutils import Matrix, Quaternion, Vector

from ...core import Skeleton
from ...core.math import quat
from ..effectors import effector_goals, pins
from ..rig import animdata, armature, memory
from ..rig.status import RigStatus

#: Line colours (RGBA) per effector status: the tip reached its target, it misses by more than the tolerance,
#: the effector could not be solved (a setup error), or no solve has run yet.
STATUS_COLORS = {
    'REACHED': (0.15, 0.95, 0.3, 1.0),
    'MISSED': (1.0, 0.85, 0.0, 1.0),
    'ERROR': (1.0, 0.1, 0.1, 1.0),
    'NONE': (0.7, 0.7, 0.7, 1.0),
}
POLE_COLOR = (0.35, 0.7, 1.0, 1.0)
REACH_COLOR = (0.55, 0.55, 1.0, 0.6)
CONE_COLOR = (0.85, 0.45, 1.0, 0.9)
TWIST_COLOR = (0.2, 0.95, 0.95, 0.9)
TRACE_COLOR = (1.0, 1.0, 1.0, 0.6)
PIN_COLOR = (1.0, 0.55, 0.1, 1.0)
CIRCLE_SEGMENTS = 48
CONE_SAMPLES = 32
ARC_SAMPLES = 16
#: Cone and twist drawings as fractions of the bone's length.
CONE_SIZE = 0.6
TWIST_RADIUS = 0.3
#: The cross at each target, as a fraction of the chain's reach.
MARKER_SIZE = 0.05
#: The pin's square, in the world's XY plane.
_SQUARE = ((1, 1, 0), (-1, 1, 0), (-1, -1, 0), (1, -1, 0))


@dataclass
class Segment:
    """One straight line in world space."""

    kind: str
    a: Vector
    b: Vector
    color: tuple[float, float, float, float]
    #: The effector index it belongs to, or the bone name for limits.
    owner: object = None


@dataclass
class Label:
    """Text drawn next to a world point."""

    position: Vector
    text: str
    color: tuple[float, float, float, float]


@dataclass
class Drawing:
    """Everything the overlay draws for one rig."""

    segments: list[Segment] = field(default_factory=list)
    labels: list[Label] = field(default_factory=list)

    def of(self, kind: str) -> list[Segment]:
        """The segments of one kind."""
        return [s for s in self.segments if s.kind == kind]


@dataclass
class EffectorView:
    """What the overlay needs of one enabled effector, read from the evaluated rig, in world space."""

    index: int
    bone: str
    status: str
    tip: Vector | None = None
    target: Vector | None = None
    pole: Vector | None = None
    #: The chain's bones, tip first (as far up as its chain length reaches).
    chain: list[str] = field(default_factory=list)
    #: The head of the chain's first bone, and the joint halfway along the chain (where the pole line starts).
    base: Vector | None = None
    middle: Vector | None = None
    #: The chain's bones and the gaps between them, laid end to end.
    reach: float = 0.0
    #: How firmly a pin holds the target (0: not pinned); `target` is then where the pin holds it.
    pin: float = 0.0


def effector_status(rig_status: RigStatus, index: int) -> str:
    """'REACHED', 'MISSED', 'ERROR', 'DISABLED' or 'NONE' (not solved yet) for one effector from the rig's last
    status."""
    return 'NONE' if rig_status is None else rig_status.kind(index)


def _world_point(obj: bpy.types.Object, subtarget: str, depsgraph: bpy.types.Depsgraph) -> Vector | None:
    """Where an effector's target or pole is (an object, or an armature's bone head), or None."""
    if obj is None:
        return None
    try:
        point = effector_goals.world_matrix(obj, subtarget, depsgraph).translation.copy()
    except (ValueError, KeyError):
        return None
    return point if all(math.isfinite(c) for c in point) else None


def read_effectors(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, rig_status: RigStatus) -> list[EffectorView]:
    """The enabled effectors of an armature, placed in world space from its evaluated pose."""
    evaluated = obj.evaluated_get(depsgraph) if depsgraph is not None else obj
    world = evaluated.matrix_world
    views = []
    for index, effector in enumerate(obj.fabrik.effectors):
        status = effector_status(rig_status, index)
        if not effector.enabled or status == 'DISABLED':  # off, by its checkbox or the rig's switch: not drawn
            continue
        view = EffectorView(index, effector.bone, status)
        views.append(view)
        view.target = _world_point(effector.target, effector.subtarget, depsgraph)
        if view.target is not None and pins.problem(effector) is None and effector.pin > 0.0:
            view.pin = effector.pin
            view.target = view.target.lerp(Vector(effector.pin_location), effector.pin)
        view.pole = _world_point(effector.pole_target, effector.pole_subtarget, depsgraph)
        tip_bone = evaluated.pose.bones.get(effector.bone) if effector.bone else None
        if tip_bone is None:
            continue
        names = armature.chain_bones(obj, effector.bone, effector.chain_length)  # base first
        chain = [evaluated.pose.bones[name] for name in names]
        view.chain = names[::-1]  # tip first
        view.tip = world @ tip_bone.tail
        heads = [world @ b.head for b in chain]
        tails = [world @ b.tail for b in chain]
        view.base = heads[0]
        view.middle = heads[len(heads) // 2]
        view.reach = sum((t - h).length for h, t in zip(heads, tails))
        view.reach += sum((heads[i + 1] - tails[i]).length for i in range(len(heads) - 1))
    return views


def readout_text(view: EffectorView, rig_status: RigStatus, live: bool = True) -> str:
    """The effector's readout: its miss, the solve's iterations and time; or what is wrong; or, with live solving
    off (after a bake, say), that the pose shown is the rig's own animation."""
    if rig_status is None:
        return f"{view.bone}: {'not solved yet' if live else 'live solving off'}"
    if view.status == 'ERROR':
        return f"{view.bone}: {rig_status.effectors.get(view.index) or rig_status.message}"
    report = rig_status.report
    miss = rig_status.misses.get(view.index)
    parts = [view.bone]
    if miss is not None:
        parts.append(f"miss {miss:.2g}")
    if report is not None:
        parts.append(f"{report.iterations} it")
    parts.append(f"{rig_status.seconds * 1000.0:.2f} ms")
    return "  ".join(parts)


def circle(center: Vector, radius: float, axes: tuple[Vector, Vector], segments: int = CIRCLE_SEGMENTS) -> list[Vector]:
    """Points round a closed circle in the plane of two unit axes (the first point repeated at the end)."""
    u, v = axes
    points = []
    for i in range(segments + 1):
        angle = 2.0 * math.pi * i / segments
        points.append(center + radius * (math.cos(angle) * u + math.sin(angle) * v))
    return points


def polyline(kind: str, points: list[Vector], color, owner=None) -> list[Segment]:
    """Segments joining consecutive points."""
    return [Segment(kind, points[i], points[i + 1], color, owner) for i in range(len(points) - 1)]


def reach_circles(center: Vector, radius: float, facing: Matrix | None = None) -> list[list[Vector]]:
    """The reach as one circle facing the view (`facing`: the view's rotation), or as three circles in the
    world's axis planes."""
    if facing is not None:
        facing = facing.to_3x3()
        return [circle(center, radius, (facing.col[0].normalized(), facing.col[1].normalized()))]
    x, y, z = Vector((1, 0, 0)), Vector((0, 1, 0)), Vector((0, 0, 1))
    return [circle(center, radius, pair) for pair in ((x, y), (y, z), (z, x))]


def swing_direction(swing_x: float, swing_z: float) -> Vector:
    """The bone's Y axis tipped over by a swing given as a rotation vector (swing_x, 0, swing_z)."""
    angle = math.hypot(swing_x, swing_z)
    if angle < 1e-12:
        return Vector((0.0, 1.0, 0.0))
    ux, uz = swing_x / angle, swing_z / angle
    return Vector((-uz * math.sin(angle), math.cos(angle), ux * math.sin(angle)))


def swing_boundary(limit, samples: int = CONE_SAMPLES) -> list[tuple[float, float]]:
    """The edge of a limit's allowed swings (swing_x, swing_z), closed: the elliptical cone's rim, quadrant by
    quadrant (an arc there and back for a hinge), or the box of ranges when they leave out the rest direction."""
    lo_x, hi_x = limit.swing_range("x")
    lo_z, hi_z = limit.swing_range("z")
    if not (lo_x <= 0.0 <= hi_x and lo_z <= 0.0 <= hi_z):
        corners = [(lo_x, lo_z), (hi_x, lo_z), (hi_x, hi_z), (lo_x, hi_z), (lo_x, lo_z)]
        edge = samples // 4
        return [
            (a[0] + (b[0] - a[0]) * i / edge, a[1] + (b[1] - a[1]) * i / edge)
            for a, b in zip(corners, corners[1:]) for i in range(edge)
        ] + [corners[0]]
    points = []
    for i in range(samples + 1):
        angle = 2.0 * math.pi * i / samples
        c, s = math.cos(angle), math.sin(angle)
        points.append(((hi_x if c >= 0.0 else -lo_x) * c, (hi_z if s >= 0.0 else -lo_z) * s))
    return points


def rest_frame(evaluated, pose_bone: bpy.types.PoseBone) -> Matrix:
    """The world frame (4x4) a bone's limits are measured in: its rest orientation carried by its parent's
    pose, at its posed head."""
    bone = pose_bone.bone
    if pose_bone.parent is None:
        frame = evaluated.matrix_world @ bone.matrix_local
    else:
        parent = pose_bone.parent
        frame = evaluated.matrix_world @ parent.matrix @ parent.bone.matrix_local.inverted_safe() @ bone.matrix_local
    frame = frame.copy()
    frame.translation = evaluated.matrix_world @ pose_bone.head
    return frame


def limit_segments(evaluated, bones: list[str], skeleton: Skeleton) -> list[Segment]:
    """Swing cones (arcs for hinges) and twist ranges of the limited bones among `bones`, in world space."""
    segments = []
    for name in bones:
        if name not in skeleton.names:
            continue
        limit = skeleton.limits[skeleton.index(name)] if skeleton.limits is not None else None
        pose_bone = evaluated.pose.bones.get(name)
        if limit is None or pose_bone is None:
            continue
        frame = rest_frame(evaluated, pose_bone)
        location, rotation, scale = frame.decompose()
        turn = rotation.to_matrix()
        world_head = evaluated.matrix_world @ pose_bone.head
        length = (evaluated.matrix_world @ pose_bone.tail - world_head).length
        if limit.limits_swing:
            size = CONE_SIZE * length
            rim = [location + size * (turn @ swing_direction(x, z)) for x, z in swing_boundary(limit)]
            segments += polyline('cone', rim, CONE_COLOR, name)
            for point in rim[: -1: max(1, len(rim) // 8)]:
                segments.append(Segment('cone', location, point, CONE_COLOR, name))
        if limit.lock_y or limit.use_limit_y:
            lo, hi = limit.twist_range()
            # The bone's swing now, without its twist: the twist range is drawn about the bone as it points.
            posed = (evaluated.matrix_world @ pose_bone.matrix).to_quaternion()
            local = rotation.inverted() @ posed
            swing_x, swing_z, twist = quat.swing_twist(tuple(local))
            swing = Quaternion(quat.from_swing_twist(swing_x, swing_z, 0.0)).to_matrix()
            axes = turn @ swing
            center = location + axes.col[1] * (0.5 * length)
            radius = TWIST_RADIUS * length
            if hi - lo < 1e-9:
                hi = lo + 1e-3  # a locked twist: a short tick
            arc = [center + radius * (axes @ Vector((math.cos(t), 0.0, -math.sin(t))))
                   for t in (lo + (hi - lo) * i / ARC_SAMPLES for i in range(ARC_SAMPLES + 1))]
            segments += polyline('twist', arc, TWIST_COLOR, name)
            segments.append(Segment('twist', center, arc[0], TWIST_COLOR, name))
            segments.append(Segment('twist', center, arc[-1], TWIST_COLOR, name))
            now = center + radius * 1.3 * (axes @ Vector((math.cos(twist), 0.0, -math.sin(twist))))
            segments.append(Segment('twist', center, now, TWIST_COLOR, name))
    return segments


def marker(point: Vector, size: float, color, owner) -> list[Segment]:
    """A small three-axis cross at a point."""
    return [Segment('marker', point - size * axis, point + size * axis, color, owner)
            for axis in (Vector((1, 0, 0)), Vector((0, 1, 0)), Vector((0, 0, 1)))]


def build(
    obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph, rig_status: RigStatus, options,
    facing: Matrix | None = None, traces: dict | None = None, views: list[EffectorView] | None = None
) -> Drawing:
    """What the overlay draws for one armature, given its last solve's status (`status.statuses`) and the
    switches in `options` (show_targets, show_poles, show_reach, show_limits, show_trace, show_readout).
    `facing` is the view's rotation for the reach circle; `traces` maps effector index to recent tip points;
    `views` is what `read_effectors` gave, when read already."""
    drawing = Drawing()
    if views is None:
        views = read_effectors(obj, depsgraph, rig_status)
    evaluated = obj.evaluated_get(depsgraph) if depsgraph is not None else obj
    for view in views:
        color = STATUS_COLORS[view.status]
        if options.show_targets and view.tip is not None:
            # A cross at the target (the line has no length once the tip is on it), or at the tip without one.
            size = MARKER_SIZE * max(view.reach, 1e-3)
            if view.target is not None:
                drawing.segments.append(Segment('target', view.tip, view.target, color, view.index))
                drawing.segments += marker(view.target, size, color, view.index)
                if view.pin > 0.0:  # a square on the ground around the pinned target, as large as the pin is firm
                    corners = [view.target + 2.0 * size * view.pin * Vector(c) for c in _SQUARE]
                    drawing.segments += polyline('pin', corners + corners[:1], PIN_COLOR, view.index)
            else:
                drawing.segments += marker(view.tip, size, color, view.index)
        if options.show_poles and view.pole is not None and view.middle is not None:
            drawing.segments.append(Segment('pole', view.middle, view.pole, POLE_COLOR, view.index))
        if options.show_reach and view.base is not None and view.reach > 0.0:
            for points in reach_circles(view.base, view.reach, facing):
                drawing.segments += polyline('reach', points, REACH_COLOR, view.index)
        if options.show_trace and traces and len(traces.get(view.index, ())) > 1:
            drawing.segments += polyline('trace', list(traces[view.index]), TRACE_COLOR, view.index)
        if options.show_readout and view.tip is not None:
            drawing.labels.append(Label(view.tip, readout_text(view, rig_status, obj.fabrik.live), color))
    if options.show_limits:
        try:
            skeleton = armature.skeleton_of(obj)
        except ValueError:
            skeleton = None  # a rig the solver refuses has no limits to show; the panel says why
        if skeleton is not None:
            drawing.segments += limit_segments(evaluated, limited_bones(obj, views, options), skeleton)
    return drawing


def limited_bones(obj: bpy.types.Object, views: list[EffectorView], options) -> list[str]:
    """The chain bones whose limits are drawn: every chain's, the active effector's chain's, or the selected
    ones among them (`options.limits_of`: 'ALL', 'ACTIVE', 'SELECTED')."""
    scope = getattr(options, "limits_of", 'ALL')
    if scope == 'ACTIVE':
        views = [view for view in views if view.index == obj.fabrik.active_effector]
    bones = list(dict.fromkeys(name for view in views for name in view.chain))
    if scope == 'SELECTED':
        bones = [name for name in bones if animdata.is_selected(obj.pose.bones[name])]
    return bones


def record_trace(obj: bpy.types.Object, views: list[EffectorView], length: int) -> dict[int, deque]:
    """Add each tip's place to its trace when it moved; the rig's traces by effector index."""
    traces = {}
    kept = memory.of(obj).traces  # (per effector index: the tip's recent world positions, oldest first)
    for view in views:
        trace = kept.get(view.index)
        if trace is None or trace.maxlen != length:
            trace = kept[view.index] = deque(trace or (), maxlen=length)
        if view.tip is not None and (not trace or (trace[-1] - view.tip).length > 1e-6 * max(view.reach, 1.0)):
            trace.append(view.tip.copy())
        traces[view.index] = trace
    return traces


def stacked_below(x: float, y: float, placed: list[tuple[float, float]], line: float) -> float:
    """Where a readout goes so that it covers none placed before it: below any that starts within a line's
    height of it (two effectors on one tip bone, or tips close on screen)."""
    while any(abs(x - px) < 8 * line and abs(y - py) < line for px, py in placed):
        y -= line
    return y
