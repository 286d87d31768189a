# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test configuration."""

import os

from hypothesis import settings

# CI explores the same examples every run (a red CI must be reproducible);
# local runs explore new ones and remember failures in .hypothesis/.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
