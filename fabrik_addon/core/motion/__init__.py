# SPDX-License-Identifier: GPL-3.0-or-later
"""Captured motion: a clip's pose put on a rig through the two rests, bone roles from names, and the frames where a
foot is planted."""
