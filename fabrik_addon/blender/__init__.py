# SPDX-License-Identifier: GPL-3.0-or-later
"""The bridge to Blender: properties, rig reading and pose writing, operators, panels, handlers."""
