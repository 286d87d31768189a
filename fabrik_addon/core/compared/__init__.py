# SPDX-License-Identifier: GPL-3.0-or-later
"""The solvers beside FABRIK, for comparison: CCD, the Jacobian's transpose and damped least squares, the exact two-
bone solution."""
