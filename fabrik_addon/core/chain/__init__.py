# SPDX-License-Identifier: GPL-3.0-or-later
"""FABRIK on chains and trees: the paper's passes, where they start, and the pose they leave."""
