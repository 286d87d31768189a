# SPDX-License-Identifier: GPL-3.0-or-later
# Quick feedback while posing: few iterations, a looser tolerance, each solve from the last one.
import bpy

settings = bpy.context.object.fabrik

settings.solver = 'FABRIK'
settings.iterations = 10
settings.tolerance = 0.001
settings.start = 'PREVIOUS'
