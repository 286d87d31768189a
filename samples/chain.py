# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a six-bone arm whose tip follows a target around a circle.

Run with the bpy module (`python samples/chain.py`) or inside Blender
(`blender --python samples/chain.py`), with the add-on enabled.
"""

from __future__ import annotations

import os
import sys

import bpy

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

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
