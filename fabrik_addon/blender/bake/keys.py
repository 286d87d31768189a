# SPDX-License-Identifier: GPL-3.0-or-later
"""Keys written in bulk: one F-curve's keys at once, linear, and where a clean-up asks, only the keys linear
interpolation between the others cannot give back; an object's location keyed along a path."""

from __future__ import annotations

import bpy
import numpy as np

from ..rig import animdata

__all__ = ["check_cleanup", "key_path", "needed_keys", "write_keys"]


def write_keys(fcurve, frames: np.ndarray, values: np.ndarray, span: tuple[float, float], spare=()) -> None:
    """Replace the F-curve's keys within span by (frames, values), in bulk; keys outside, and keys on the
    frames in `spare` (frames the bake has no value for), keep every byte."""
    points = fcurve.keyframe_points
    count = len(points)
    new = np.empty(2 * len(frames), dtype=np.float32)
    new[0::2], new[1::2] = frames, values
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    if count == 0:  # a fresh curve: nothing to keep
        points.add(len(frames))
        points.foreach_set("co", new)
        points.foreach_set("interpolation", np.full(len(frames), linear, dtype=np.int32))
        fcurve.update()
        return
    co = np.empty(2 * count, dtype=np.float32)
    points.foreach_get("co", co)
    inside = (co[0::2] >= span[0] - 1e-4) & (co[0::2] <= span[1] + 1e-4)
    for frame in spare:
        inside &= np.abs(co[0::2] - frame) > 1e-4
    # Blender recomputes automatic handles of neighbours when keys change; put the kept keys' handles back after.
    kept = {}
    for i in np.flatnonzero(~inside):
        point = points[int(i)]
        kept[round(float(co[2 * i]), 4)] = (tuple(point.handle_left), tuple(point.handle_right))
    for i in reversed(np.flatnonzero(inside)):
        points.remove(points[int(i)], fast=True)
    before = len(points)
    points.add(len(frames))
    all_co = np.empty(2 * len(points), dtype=np.float32)
    points.foreach_get("co", all_co)
    all_co[2 * before:] = new
    points.foreach_set("co", all_co)
    interpolation = np.empty(len(points), dtype=np.int32)
    points.foreach_get("interpolation", interpolation)
    interpolation[before:] = linear
    points.foreach_set("interpolation", interpolation)
    fcurve.update()
    if kept:
        for point in points:
            handles = kept.get(round(point.co[0], 4))
            if handles is not None:
                point.handle_left, point.handle_right = handles


def needed_keys(frames: np.ndarray, values: np.ndarray, tolerance: float) -> np.ndarray:
    """Which keys linear interpolation between the kept ones cannot reproduce within tolerance (first and last stay)."""
    keep = np.zeros(len(frames), dtype=bool)
    keep[0] = keep[-1] = True
    anchor = 0
    for i in range(1, len(frames) - 1):
        # Could a straight line from the anchor to the next key stand in for every key since the anchor?
        t = (frames[anchor + 1:i + 1] - frames[anchor]) / (frames[i + 1] - frames[anchor])
        line = values[anchor] + t * (values[i + 1] - values[anchor])
        if np.abs(line - values[anchor + 1:i + 1]).max() > tolerance:
            keep[i] = True
            anchor = i
    return keep


def check_cleanup(cleanup) -> None:
    """ValueError unless a clean-up tolerance is a finite number of 0 or more (a NaN would drop every key between
    the first and the last)."""
    real = isinstance(cleanup, (int, float, np.integer, np.floating)) and not isinstance(cleanup, bool)
    if not (real and np.isfinite(cleanup) and cleanup >= 0.0):
        raise ValueError(f"the clean-up tolerance must be a finite number of 0 or more, not {cleanup!r}")


def key_path(obj: bpy.types.Object, frames: list[int], points: np.ndarray) -> None:
    """Key obj's location at each frame to the matching row of points, replacing its location keys in that span."""
    animdata.ensure_action(obj, False, f"{obj.name}Action")
    collection = animdata.fcurves(obj, create=True)
    frame_array = np.asarray(frames, dtype=np.float64)
    span = (float(frames[0]), float(frames[-1]))
    for axis in range(3):
        # One key per frame, so the in-between interpolation hardly matters; write_keys makes them linear.
        fcurve = animdata.ensure_fcurve(collection, "location", axis, "Object Transforms")
        write_keys(fcurve, frame_array, points[:, axis], span)
