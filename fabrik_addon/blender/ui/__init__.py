# SPDX-License-Identifier: GPL-3.0-or-later
"""What the user sees and clicks: panels, the viewport overlay, operators, presets and the properties' update
callbacks."""
