// SPDX-License-Identifier: GPL-3.0-or-later
// Flamenco job type "FABRIK Bake": bakes the FABRIK IK of an armature in a list of .blend files, headless.
//
// Copy this file into the `scripts` folder beside `flamenco-manager` (Flamenco 3.7+ picks it up without a
// restart), then press "Refresh from Manager" in Blender's Flamenco panel. Each file is baked by the add-on's
// command line inside the worker's Blender, where the add-on must be installed and enabled:
//
//   blender -b -y --python-exit-code 1 --python-expr "<run the add-on's main()>" -- bake FILE --object RIG ...
//
// One task per file, the files in parallel. A file is not split into chunks of frames: every task saves the
// whole file, and the frames of a bake read the animation its earlier frames keyed.

const JOB_TYPE = {
  label: "FABRIK Bake",
  description: "Bake FABRIK IK into keyframes in a list of .blend files, headless",
  settings: [
    {key: "bake_files", type: "string", required: true, visible: "submission",
     description: "The .blend files to bake, separated by ';' or new lines; each may end in its own frame "
       + "range after a space ('/shots/sh010.blend 1-250'), else Frames applies"},
    {key: "armature", type: "string", required: true, default: "",
     description: "Name of the armature object to bake (the same in every file)"},
    {key: "frames", type: "string", default: "",
     description: "Frames for files without their own: 1-250, 1-250:2 (every second), 17; empty: each "
       + "file's scene range"},
    {key: "start", type: "string", choices: ["rig", "fk", "previous"], default: "rig",
     description: "Where each frame's solve starts: as the rig's live solving, this frame's pose, or the "
       + "previous frame's solution (continuous)"},
    {key: "cleanup", type: "float", default: 0.0, propargs: {min: 0.0},
     description: "Drop keys their neighbours reproduce within this tolerance (0: keep every key)"},
    {key: "new_action", type: "bool", default: false, description: "Key into a new action"},
    {key: "output_suffix", type: "string", default: ".baked",
     description: "Saved as <file><suffix>.blend beside each file (empty: the file itself is overwritten)"},
    {key: "addon_module", type: "string", default: "bl_ext.user_default.fabrik_ik",
     description: "The add-on's module in the worker's Blender: bl_ext.<repository>.fabrik_ik for the "
       + "extension (4.2+), fabrik_ik for the legacy add-on (3.4 to 4.1)"},
  ],
};

// FIRST[-LAST or ..LAST][:STEP], as the add-on's command line reads --frames.
const FRAMES = /^\s*(-?\d+)\s*(?:(?:-|\.\.)\s*(-?\d+))?\s*(?::\s*(\d+))?\s*$/;

function compileJob(job) {
  const settings = job.settings;
  const armature = String(settings.armature || "").trim();
  if (!armature) throw "FABRIK Bake: name the armature to bake";
  if (!["rig", "fk", "previous"].includes(settings.start || "rig")) {
    throw `FABRIK Bake: start must be rig, fk or previous, not '${settings.start}'`;
  }
  const cleanup = Number(settings.cleanup || 0);
  if (!Number.isFinite(cleanup) || cleanup < 0) throw "FABRIK Bake: the clean-up tolerance must be 0 or more";
  const files = bakeFiles(String(settings.bake_files || ""), String(settings.frames || ""));
  if (files.length === 0) throw "FABRIK Bake: list at least one .blend file";

  const options = ["--object", armature, "--start", settings.start || "rig"];
  if (cleanup > 0) options.push("--cleanup", String(cleanup));
  if (settings.new_action) options.push("--new-action");
  const expression = runnerExpression(String(settings.addon_module || "bl_ext.user_default.fabrik_ik"));

  for (const file of files) {
    const out = outputPath(file.path, String(settings.output_suffix ?? ".baked"));
    const name = file.frames ? `bake ${path.basename(file.path)} ${file.frames}` : `bake ${path.basename(file.path)}`;
    const task = author.Task(name, "blender");
    const args = ["--python-expr", expression, "--", "bake", file.path, ...options, "--out", out];
    if (file.frames) args.push("--frames", file.frames);
    task.addCommand(author.Command("blender-render", {
      exe: "{blender}",
      exeArgs: "{blenderArgs}",
      argsBefore: ["--python-exit-code", "1"],
      blendfile: "",  // the add-on's command line opens the file itself
      args: args,
    }));
    job.addTask(task);
  }
}

// The .blend files and their frame ranges ('' = the file's scene range), checked.
function bakeFiles(text, defaultFrames) {
  const files = [];
  for (const entry of text.split(/[;\n]/).map((part) => part.trim()).filter((part) => part)) {
    const space = entry.lastIndexOf(" ");
    let file = entry;
    let frames = defaultFrames.trim();
    if (space > 0 && FRAMES.test(entry.slice(space + 1))) {
      file = entry.slice(0, space).trim();
      frames = entry.slice(space + 1);
    }
    if (!file.toLowerCase().endsWith(".blend")) throw `FABRIK Bake: '${file}' is not a .blend file`;
    checkFrames(frames);
    if (files.some((other) => other.path === file)) {
      throw `FABRIK Bake: '${file}' is listed twice (one bake per file: give it one range)`;
    }
    files.push({path: file, frames: frames});
  }
  return files;
}

// Throws unless frames is empty or a range the add-on's command line takes.
function checkFrames(frames) {
  if (!frames) return;
  const match = FRAMES.exec(frames);
  if (!match) throw `FABRIK Bake: frames must look like 1-250, 1-250:2 or 17, not '${frames}'`;
  const first = Number(match[1]);
  const last = match[2] === undefined ? first : Number(match[2]);
  if (last < first) throw `FABRIK Bake: '${frames}' starts after it ends`;
  if (match[3] !== undefined && Number(match[3]) < 1) throw `FABRIK Bake: the step of '${frames}' must be 1 or more`;
}

// <folder>/<stem><suffix>.blend, or the file itself for an empty suffix.
function outputPath(file, suffix) {
  if (!suffix) return file;
  return path.join(path.dirname(file), path.stem(file) + suffix + ".blend");
}

// Python run by the worker's Blender: the add-on's command line on the arguments after '--'.
function runnerExpression(module) {
  if (!/^[A-Za-z_][\w.]*$/.test(module)) throw `FABRIK Bake: '${module}' is not a Python module name`;
  return `import sys; from ${module}.fabrik_addon.__main__ import main; `
    + "sys.exit(main(sys.argv[sys.argv.index('--') + 1:]))";
}
