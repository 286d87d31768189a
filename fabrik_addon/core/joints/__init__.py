# SPDX-License-Identifier: GPL-3.0-or-later
"""The joints' own coordinates: a tree posed by its limited angles, refined and settled in them."""
