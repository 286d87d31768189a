# SPDX-License-Identifier: GPL-3.0-or-later
# Final bakes: many iterations and a tight tolerance, each frame from its own pose.
import bpy

settings = bpy.context.object.fabrik

settings.solver = 'FABRIK'
settings.iterations = 500
settings.tolerance = 1e-06
settings.start = 'FK'
