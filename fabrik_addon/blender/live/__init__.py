# SPDX-License-Identifier: GPL-3.0-or-later
"""Live solving: the handlers, and one solve of a rig (one read, one solve, one write)."""
