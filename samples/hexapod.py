# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a hexapod walking forward with an alternating tripod gait: six three-bone legs on one body.

The rig (the armature object) glides forward at a steady speed while each
foot's target stays planted on the ground during its stance and lifts and
swings forward during its swing; the two tripods (front and rear legs of one
side with the middle leg of the other) take turns. Each leg is its own chain
of three bones under the body (chain length 3), so the body is never pulled.
Targets live in world space, so this also shows targets and rig moving
independently.

Run with Blender's Python module: `.venv/bin/python samples/hexapod.py` saves the
scene to out/samples/hexapod.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/hexapod.py` (options
after `--`).
"""

from __future__ import annotations

import math
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (1.0, -0.9, 0.75)
BAKE_WARM_START = True

#: Height of the body above the ground.
HEIGHT = 0.6
#: How far the body moves per gait cycle (so each foot steps this far once per cycle), and how high a foot lifts.
STRIDE, LIFT = 0.4, 0.15
#: Gait cycles over the frame range.
CYCLES = 2
#: Leg rows along the body (y) and sides (x sign, name suffix); the rig walks towards +Y.
ROWS = (("front", 0.5), ("mid", 0.0), ("rear", -0.5))
SIDES = ((-1.0, "L"), (1.0, "R"))
#: The legs of the first tripod; the others step half a cycle later.
TRIPOD = {"front_L", "mid_R", "rear_L"}


def hexapod_bones() -> list:
    """A body along +Y and, per leg, a coxa out sideways, a femur up and out, a tibia down to the ground."""
    bones = [("body", (0.0, -0.6, HEIGHT), (0.0, 0.6, HEIGHT), None, False)]
    for row, y in ROWS:
        for sign, side in SIDES:
            leg = f"{row}_{side}"
            hip, knee_in = (sign * 0.25, y, HEIGHT), (sign * 0.55, y, HEIGHT)
            knee = (sign * 0.95, y, HEIGHT + 0.25)
            foot = (sign * 1.15, y, 0.0)
            bones += [
                (f"coxa_{leg}", hip, knee_in, "body", False),
                (f"femur_{leg}", knee_in, knee, f"coxa_{leg}", True),
                (f"tibia_{leg}", knee, foot, f"femur_{leg}", True),
            ]
    return bones


def body_offset(frame: int, frames: range) -> float:
    """How far forward (+Y) the body has moved at a frame."""
    period = len(frames) / CYCLES
    return STRIDE * (frame - frames.start) / period


def foot_position(leg: str, neutral: tuple[float, float], frame: int, frames: range) -> tuple[float, float, float]:
    """World position of one foot: planted for half a cycle, then lifted and swung forward by a stride.

    Planted feet sit where the body will be over them at mid-stance, so the
    body passes from a quarter stride behind to a quarter stride ahead.
    """
    period = len(frames) / CYCLES
    offset = 0.0 if leg in TRIPOD else 0.5
    u = (frame - frames.start) / period + offset
    step = math.floor(u)
    phase = u - step
    x, y = neutral
    planted = y + STRIDE * (step + 0.75 - offset)
    if phase >= 0.5:
        return x, planted, 0.0
    s = phase / 0.5
    eased = s * s * (3.0 - 2.0 * s)
    previous = planted - STRIDE
    return x, previous + (planted - previous) * eased, LIFT * math.sin(math.pi * s)


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("Hexapod", hexapod_bones())
    rigbuild.add_bone_box(rig, "body", 0.55, 0.22, color=(0.25, 0.5, 0.35, 1.0))
    legs = [b.name for b in rig.data.bones if b.name != "body"]
    rigbuild.add_bone_meshes(rig, legs, radius=0.05, taper=0.6, color=(0.3, 0.3, 0.32, 1.0), joint=1.2)
    rigbuild.add_ground()
    rigbuild.key_path(rig, frames, lambda frame: (0.0, body_offset(frame, frames), 0.0))
    for row, y in ROWS:
        for sign, side in SIDES:
            leg = f"{row}_{side}"
            neutral = (sign * 1.15, y)
            target = rigbuild.make_target(f"foot_{leg}", (neutral[0], neutral[1], 0.0), size=0.06)
            rigbuild.key_path(
                target, frames, lambda frame, leg=leg, neutral=neutral: foot_position(leg, neutral, frame, frames)
            )
            rigbuild.add_effector(rig, f"tibia_{leg}", target, chain_length=3)
    rig.fabrik.live = True
    rigbuild.use_frames(frames)
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
