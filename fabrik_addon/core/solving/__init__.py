# SPDX-License-Identifier: GPL-3.0-or-later
"""How a rig is solved: the plan, its parts' stages, the exact limb, and the solvers side by side."""
