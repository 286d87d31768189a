# SPDX-License-Identifier: GPL-3.0-or-later
"""Package root for Blender: hands register/unregister on from `fabrik_addon`.

Blender's extension builder wants an `__init__.py` beside `blender_manifest.toml`;
`bl_info` lets the same files install as a legacy add-on on Blender 3.4+.
"""

bl_info = {
    "name": "FABRIK IK",
    "author": "FABRIK for Blender developers",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "3D Viewport > Sidebar > FABRIK",
    "description": "FABRIK inverse kinematics for chains and trees, live and baked",
    "category": "Animation",
}

from .fabrik_addon import register, unregister  # noqa: E402

__all__ = ["register", "unregister"]
