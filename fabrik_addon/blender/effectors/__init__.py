# SPDX-License-Identifier: GPL-3.0-or-later
"""Effectors: their goals read from the scene, kept pointing at what the user meant, pinned, and made from Blender's
IK constraints."""
