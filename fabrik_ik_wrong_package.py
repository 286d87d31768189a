# SPDX-License-Identifier: GPL-3.0-or-later
"""Notice for the extension zip installed as a legacy add-on (Blender 3.4 to 4.1): says which zip to install.

Blender 4.2+ installs the extension zip as an extension and never imports this file. Older Blender unpacks the
zip straight into its add-ons folder, where this is the one module it lists: the name and warning in the add-on
list say what happened, and enabling it fails with the same instructions instead of doing nothing.
tools/build.py checks that the zip name below matches the manifest's version.
"""

bl_info = {
    "name": "FABRIK IK (wrong package: install fabrik_ik-0.1.0-legacy.zip)",
    "author": "FABRIK for Blender developers",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "Edit > Preferences > Add-ons",
    "description": "This is the zip for Blender 4.2 and newer; for this Blender install fabrik_ik-0.1.0-legacy.zip",
    "warning": "Wrong package for this Blender: remove it and install fabrik_ik-0.1.0-legacy.zip",
    "category": "Animation",
}

#: What the extension zip put into the add-ons folder beside this file, for the user to delete.
UNPACKED = ("fabrik_ik_wrong_package.py", "__init__.py", "blender_manifest.toml", "README.md", "fabrik_addon")


def instructions() -> str:
    """What to do, naming the files to delete in this add-ons folder."""
    import os

    folder = os.path.dirname(os.path.abspath(__file__))
    present = [name for name in UNPACKED if os.path.exists(os.path.join(folder, name))]
    return (
        "This is FABRIK IK's extension zip, for Blender 4.2 and newer; this Blender installs add-ons the older "
        "way, so nothing was installed. Install fabrik_ik-0.1.0-legacy.zip instead (Preferences > Add-ons > "
        f"Install), and delete from {folder} what this zip unpacked there: {', '.join(present) or 'nothing left'}."
    )


def register() -> None:
    """Refuse to enable: Blender shows the error, with what to do, and leaves the add-on off."""
    raise RuntimeError(instructions())


def unregister() -> None:
    """Nothing was registered."""
