# SPDX-License-Identifier: GPL-3.0-or-later
# The add-on's defaults: FABRIK, 200 iterations, tolerance 1e-4 of the rig's size, each frame from its own pose.
import bpy

settings = bpy.context.object.fabrik

settings.solver = 'FABRIK'
settings.iterations = 200
settings.tolerance = 0.0001
settings.start = 'FK'
