# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a hand (palm plus five fingers, a bone tree) whose fingertips reach for five targets.

The finger bases are not connected to the palm's tip, and the thumb pulls
twice as hard as the other fingers where they share the palm.
"""

from __future__ import annotations

import os
import sys

import bpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rigbuild  # noqa: E402

FRAMES = range(1, 49)
FINGERS = ("thumb", "index", "middle", "ring", "pinky")


def hand_bones() -> list:
    """Palm along +Y, five three-bone fingers spread along X."""
    bones = [("palm", (0.0, 0.0, 0.0), (0.0, 0.8, 0.0), None, False)]
    for f, finger in enumerate(FINGERS):
        x = (f - 2) * 0.22
        parent = "palm"
        for j in range(3):
            head, tail = (x, 0.9 + 0.25 * j, 0.0), (x, 0.9 + 0.25 * (j + 1), 0.0)
            name = f"{finger}{j}"
            bones.append((name, head, tail, parent, j > 0))
            parent = name
    return bones


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("Hand", hand_bones())
    for f, finger in enumerate(FINGERS):
        x = (f - 2) * 0.22
        target = rigbuild.make_target(f"{finger}_target", (x, 1.55, 0.3), size=0.05)
        rigbuild.key_circle(target, (x, 1.45, 0.25), 0.12, frames, axis='YZ', turns=1.0 + 0.25 * f)
        rigbuild.add_effector(rig, f"{finger}2", target, chain_length=4, weight=2.0 if finger == "thumb" else 1.0)
    rig.fabrik.live = True
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames.start, frames.stop - 1
    return rig


if __name__ == "__main__":
    build()
