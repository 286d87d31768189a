# SPDX-License-Identifier: GPL-3.0-or-later
"""Text fitted to a panel: lines wrapped to the room it has, measured with the interface font, so the whole
message can be read; and the property layout of Blender's own panels (`split`)."""

from __future__ import annotations

from typing import Callable, NamedTuple

import bpy

__all__ = ["Room", "draw_wrapped", "room_for", "split", "wrap"]


#: Pixels of a sidebar line that text cannot use at interface scale 1: the tab column (22), the panel's left
#: margin with an icon (44) and its right margin (12).
MARGIN_PIXELS = 78
#: The narrowest room a line gets, in pixels at scale 1 (a sidebar dragged narrower cuts, as Blender's own do).
MIN_PIXELS = 60
#: Characters per line when the region's width is not known (as when a panel is drawn outside a UI).
DEFAULT_CHARS = 40


def wrap(text: str, width: float, measure: Callable[[str], float] = len) -> list[str]:
    """`text` as lines at most `width` wide (by `measure`: characters, or pixels of the interface font), broken
    at spaces; a word wider than a line starts a line of its own and is cut where it must be. At least one
    line, so an empty text still takes its row."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and measure(line + " " + word) <= width:
            line += " " + word
            continue
        if line:
            lines.append(line)
        while len(word) > 1 and measure(word) > width:
            cut = 1  # the longest start of the word that fits, at least one character
            while cut < len(word) - 1 and measure(word[:cut + 1]) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line or not lines:
        lines.append(line)
    return lines


class Room(NamedTuple):
    """How wide a label line may be (`width`, in the units `measure` gives a text)."""

    width: float
    measure: Callable[[str], float]

    def lines(self, text: str) -> list[str]:
        """The text wrapped to this room."""
        return wrap(text, self.width, self.measure)


def room_for(context: bpy.types.Context, reserve: float = MARGIN_PIXELS) -> Room:
    """The room for a label line in the region being drawn: its width less `reserve` pixels (margins, an icon),
    both scaled as the interface is, measured with the interface font; DEFAULT_CHARS characters when the
    region is not known (a panel drawn outside a UI)."""
    region = getattr(context, "region", None)
    width = getattr(region, "width", 0) or 0
    preferences = getattr(context, "preferences", None)
    if width <= 1 or preferences is None:
        return Room(DEFAULT_CHARS, len)
    # (system.ui_scale includes the display's DPI; view.ui_scale the user's setting)
    scale = getattr(preferences.system, "ui_scale", 0.0) or preferences.view.ui_scale or 1.0
    return Room(max(MIN_PIXELS * scale, width - reserve * scale), _font_measure(preferences, scale))


def _font_measure(preferences, scale: float) -> Callable[[str], float]:
    """The width in pixels of a text in the interface's label font at this scale."""
    import blf  # (here: no fonts are loaded in background mode)

    points = preferences.ui_styles[0].widget.points * scale
    try:
        blf.size(0, points)
    except TypeError:  # (Blender before 4.0 also takes the dpi)
        blf.size(0, points, 72)
    return lambda text: blf.dimensions(0, text)[0]


def draw_wrapped(
    layout: bpy.types.UILayout, text: str, room: Room, icon: str = 'NONE', alert: bool = False, active: bool = True
):
    """A message as label lines that fit the room: the icon on the first, the rest indented under it; red for
    `alert`, greyed out unless `active`."""
    column = layout.column(align=True)
    column.alert = alert
    column.active = active
    for number, line in enumerate(room.lines(text)):
        column.label(text=line, icon=icon if number == 0 else ('BLANK1' if icon != 'NONE' else 'NONE'))
    return column


def split(layout: bpy.types.UILayout):
    """Labels left of their values and keyframe dots beside animatable values, as Blender's property panels."""
    layout.use_property_split = True
    layout.use_property_decorate = True
    return layout
