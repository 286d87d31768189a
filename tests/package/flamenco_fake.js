// SPDX-License-Identifier: GPL-3.0-or-later
// A small fake of Flamenco's job compiler (the Manager runs job types in Go's goja engine, which Node cannot
// load): the globals and the `author` API that farm/fabrik_bake.js uses, shaped as Flamenco 3.x documents them.
//
//   node tests/package/flamenco_fake.js farm/fabrik_bake.js '{"settings": {...}}'
//
// prints {"job_type": JOB_TYPE, "tasks": [...]} or {"error": "<what compileJob threw>"} as JSON.

"use strict";
const fs = require("fs");
const nodePath = require("path");
const vm = require("vm");

const [script, jobJson] = process.argv.slice(2);
const tasks = [];

class Task {
  constructor(name, type) {
    if (!String(name).trim() || !String(type).trim()) throw new Error("author.Task needs a name and a type");
    this.name = String(name).trim();
    this.type = String(type).trim();
    this.commands = [];
    this.dependencies = [];
  }
  addCommand(command) { this.commands.push(command); }
  addDependency(task) { this.dependencies.push(task.name); }
}

const author = {
  Task: (name, type) => new Task(name, type),
  Command: (name, parameters, steps = 0) => ({name: name, parameters: parameters, steps: steps}),
};

const job = Object.assign({name: "test job", priority: 50, metadata: {}, settings: {}}, JSON.parse(jobJson));
job.addTask = (task) => tasks.push(task);

// Flamenco's `path` works on forward slashes; its stem drops the last extension.
const flamencoPath = {
  basename: (p) => nodePath.posix.basename(p),
  dirname: (p) => nodePath.posix.dirname(p),
  join: (...parts) => nodePath.posix.join(...parts),
  stem: (p) => nodePath.posix.basename(p, nodePath.posix.extname(p)),
};

const sandbox = {author: author, path: flamencoPath, process: {cwd: () => "/", platform: "linux"},
                 print: () => {}, alert: () => {}};
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(script, "utf8") + "\nthis.JOB_TYPE = JOB_TYPE;", sandbox, {filename: script});
try {
  sandbox.compileJob(job);
  console.log(JSON.stringify({job_type: sandbox.JOB_TYPE, tasks: tasks}));
} catch (error) {
  console.log(JSON.stringify({error: String(error)}));
}
