# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a six-bone arm whose tip follows a target around a circle.

Run with Blender's Python module: `.venv/bin/python samples/chain.py` saves the
scene to out/samples/chain.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/chain.py` (options
after `--`).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

import bpy  # noqa: E402

FRAMES = range(1, 49)


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("Arm", rigbuild.chain_bones(6, 0.5, prefix="arm"))
    target = rigbuild.make_target("ArmTarget", (1.0, 0.0, 1.5))
    # A circle inside the arm's reach of 3.0 (at full stretch FABRIK converges slowly).
    rigbuild.key_circle(target, (0.0, 0.0, 1.5), 1.0, frames, axis='XZ')
    rigbuild.add_effector(rig, "arm5", target)
    rig.fabrik.live = True
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = frames.start, frames.stop - 1
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
