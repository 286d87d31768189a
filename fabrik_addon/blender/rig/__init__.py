# SPDX-License-Identifier: GPL-3.0-or-later
"""An armature as the solver sees it: its skeleton, settings, pose channels, what live solving holds and the
differences between Blender versions."""
