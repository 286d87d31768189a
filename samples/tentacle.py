# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample: a 40-bone tentacle, every joint inside a swing cone, whose tip follows a target round a circle.

Each bone may tip over by at most CONE degrees about its X and Z axes
(Blender's IK limits with use_ik_limit_x/z), so the tentacle has to spread
a bend along its whole length. Blender's own IK gives up on chains this long
(see the README's benchmarks); FABRIK reaches.

Run with Blender's Python module: `.venv/bin/python samples/tentacle.py` saves the
scene to out/samples/tentacle.blend (`--save PATH`, `--no-save`, `--help`); or inside
Blender with the add-on enabled: `blender --python samples/tentacle.py` (options
after `--`).
"""

from __future__ import annotations

import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # (Blender's --python adds no folder)
from samples import rigbuild  # noqa: E402

FRAMES = range(1, 49)
TOLERANCE = 1e-3
VIEW = (1.0, -1.4, 0.5)
BAKE_WARM_START = True

COUNT = 40
LENGTH = 0.1
#: Largest swing per joint about X and about Z, in degrees.
CONE = 20.0


def build(frames: range = FRAMES):
    """Build the scene; return the rig."""
    rig = rigbuild.make_armature("Tentacle", rigbuild.chain_bones(COUNT, LENGTH, prefix="seg"))
    for pose_bone in rig.pose.bones:
        rigbuild.set_limits(rig, pose_bone.name, x=(-CONE, CONE), z=(-CONE, CONE))
    # Thick at the root, thin at the tip.
    radii = {f"seg{i}": 0.12 * (1.0 - 0.8 * i / COUNT) for i in range(COUNT)}
    rigbuild.add_bone_meshes(rig, radii=radii, taper=0.95, color=(0.55, 0.25, 0.6, 1.0), segments=10)
    rigbuild.use_frames(frames)
    # A horizontal circle at two thirds of the tentacle's height: the tip has to sweep round while it bends.
    target = rigbuild.make_target("TentacleTarget", (0.0, 0.0, 2.4), size=0.1)
    rigbuild.key_motion(target, 'CIRCLE', 1.5, frames, plane='XY')
    rigbuild.add_effector(rig, f"seg{COUNT - 1}", target)
    rig.fabrik.live = True
    return rig


if __name__ == "__main__":
    rigbuild.main(build)
