# SPDX-License-Identifier: GPL-3.0-or-later
"""What every solver shares: the skeleton and its joint limits, the goals, settings and report, the tree types, and
the stopping rules."""
