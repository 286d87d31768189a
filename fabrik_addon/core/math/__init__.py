# SPDX-License-Identifier: GPL-3.0-or-later
"""Numbers the solvers are written in: 3-vectors and quaternions on plain floats, rotations as numpy rows, small
least-squares systems, and rotation channel values."""
