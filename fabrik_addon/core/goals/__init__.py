# SPDX-License-Identifier: GPL-3.0-or-later
"""What a solve is asked besides a tip's place: poles, IK stretch, the floor and a root that moves."""
