# SPDX-License-Identifier: GPL-3.0-or-later
"""Sample rigs, and the rig builders the samples, the tests, the benchmarks and the demo share (`rigbuild`,
`rig_classes`): imported as `samples.<name>` with the checkout on the path."""
