# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a hand (palm plus five fingers, a bone tree) that closes its fingertips on a ball and opens again.

The finger bases are not connected to the palm's tip, every finger's chain
runs through the palm (chain length 4), and the thumb pulls twice as hard as
the other fingers where they share it. The joints carry a hand's limits, set
with Blender's own IK settings: each knuckle flexes (X, -10..90 degrees) and
spreads (Z, -20..20) but does not twist; the middle and distal joints are
hinges (X only, 0..100 and 0..80), so a finger curls one way only; the
thumb's base turns further both ways; the palm, which every chain shares,
may tip a little. Each fingertip's path lies in its finger's own plane, on
poses inside these limits.

Run with Blender's Python module: `.venv/bin/python samples/hand.py` saves the
scene to out/samples/hand.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/hand.py` (options
after `--`).
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

import bpy  # noqa: E402,F401  (the bpy module makes mathutils importable)
from mathutils import Vector  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (1.0, 0.55, 0.25)
BAKE_WARM_START = True
FINGERS = ("thumb", "index", "middle", "ring", "pinky")

#: The ball the hand closes on, just above the fingers: center and radius.
BALL_CENTER = Vector((0.0, 0.95, 0.5))
BALL_RADIUS = 0.45
#: IK settings (rigbuild.set_limits' arguments, degrees) of a finger's knuckle, middle and distal joint. Every
#: bone's X axis is world X (the fingers run along +Y with no roll), so positive X curls a finger up, towards the ball.
FINGER_LIMITS = (
    {"lock": "Y", "x": (-10, 90), "z": (-20, 20)},
    {"lock": "YZ", "x": (0, 100)},
    {"lock": "YZ", "x": (0, 80)},
)
#: The thumb: a wider base (it swings across the palm), then two hinges.
THUMB_LIMITS = (
    {"lock": "Y", "x": (-20, 90), "z": (-45, 45)},
    {"lock": "YZ", "x": (0, 90)},
    {"lock": "YZ", "x": (-10, 80)},
)
#: The palm (the wrist): tips up to 15 degrees each way, no twist.
PALM_LIMITS = {"lock": "Y", "x": (-15, 15), "z": (-15, 15)}
#: Distance between neighbouring fingers.
SPREAD = 0.19
#: How far below the ball's front each fingertip touches it, in degrees.
CONTACT_BELOW = 20.0


def hand_bones() -> list:
    """Palm along +Y, five three-bone fingers spread along X."""
    bones = [("palm", (0.0, 0.0, 0.0), (0.0, 0.8, 0.0), None, False)]
    for f, finger in enumerate(FINGERS):
        x = (f - 2) * SPREAD
        parent = "palm"
        for j in range(3):
            head, tail = (x, 0.9 + 0.25 * j, 0.0), (x, 0.9 + 0.25 * (j + 1), 0.0)
            name = f"{finger}{j}"
            bones.append((name, head, tail, parent, j > 0))
            parent = name
    return bones


def grip_points(f: int) -> tuple[Vector, Vector]:
    """Where finger f's tip aims with the hand open, and where it touches the ball with the hand closed."""
    x = (f - 2) * SPREAD
    open_tip = Vector((x, 1.5, 0.25))
    # On the ball's front, in the finger's own plane (x stays), so each finger curls straight up onto it.
    r = math.sqrt(BALL_RADIUS ** 2 - x * x)
    below = math.radians(CONTACT_BELOW)
    contact = Vector((x, BALL_CENTER.y + r * math.cos(below), BALL_CENTER.z - r * math.sin(below)))
    return open_tip, contact


def closing(frame: int, frames: range, f: int) -> float:
    """How far finger f has closed at a frame, 0 (open) to 1 (on the ball): once round the frames, pinky first."""
    t = (frame - frames.start) / max(1, len(frames)) - 0.03 * (4 - f)
    return 0.5 - 0.5 * math.cos(2.0 * math.pi * t)


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("Hand", hand_bones())
    rigbuild.add_bone_box(rig, "palm", 1.0, 0.08, color=rigbuild.SAND)
    rigbuild.add_bone_meshes(rig, [b.name for b in rig.data.bones if b.name != "palm"], radius=0.045, taper=0.8,
                             color=rigbuild.SAND, joint=1.1)
    # The palm, which every finger's chain shares, may tip a little (a cone) but not twist.
    rigbuild.set_limits(rig, "palm", **PALM_LIMITS)
    for finger in FINGERS:
        for j, limits in enumerate(THUMB_LIMITS if finger == "thumb" else FINGER_LIMITS):
            rigbuild.set_limits(rig, f"{finger}{j}", **limits)
    rigbuild.add_sphere("Ball", BALL_CENTER, BALL_RADIUS, color=(0.2, 0.45, 0.85, 1.0), segments=32)
    for f, finger in enumerate(FINGERS):
        target = rigbuild.make_target(f"{finger}_target", grip_points(f)[0], size=0.05)
        open_tip, contact = grip_points(f)
        rigbuild.key_path(
            target, frames, lambda frame, f=f, a=open_tip, b=contact: a.lerp(b, closing(frame, frames, f))
        )
        rigbuild.add_effector(rig, f"{finger}2", target, chain_length=4, weight=2.0 if finger == "thumb" else 1.0)
    rig.fabrik.live = True
    rigbuild.use_frames(frames)
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
