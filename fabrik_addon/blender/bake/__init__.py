# SPDX-License-Identifier: GPL-3.0-or-later
"""Baking: a frame range solved and keyed in bulk."""
