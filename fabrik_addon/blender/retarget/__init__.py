# SPDX-License-Identifier: GPL-3.0-or-later
"""Retargeting a captured clip: the mapping, what the two rests give, the clip's pose on the rig, and the work that
keys it."""
