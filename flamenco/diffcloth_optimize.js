// SPDX-License-Identifier: GPL-3.0-or-later

// DiffCloth Optimize: a Flamenco 3 job type (job compiler script), job type name "diffcloth-optimize".
// Install: copy this file into the `scripts` folder next to the flamenco-manager executable (docs/farm.md).
// Every Worker's Blender needs the DiffCloth extension installed and enabled: the tasks run its
// batch commands through Flamenco's `blender-render` command, as `{blender} {blenderArgs} -c diffcloth ...`:
//   output-folder  creates the output folder (Flamenco 3.8 has no make-directory command; Blender does it)
//   optimize-SHOT  one per shot: optimize, bake and save SHOT.blend, SHOT.json (report), SHOT.png (preview)
//   summary        after every shot task: merges the reports into summary.md (and prints it to the task log)
// The Manager compiles a job without reading the shared storage, so the shots are listed, not found:
// `shots` names their .blend files, separated by ';'; when it is empty, the job's one shot is the file
// submitted from Blender (`blendfile`, set by the Flamenco add-on).

const JOB_TYPE = {
    label: "DiffCloth Optimize",
    description: "Optimize each shot's DiffCloth cloth to its keyframed targets, bake it, and summarize the shots",
    settings: [
        { key: "shots", type: "string",
          description: "The shots' .blend files on the shared storage, separated by ';' (a folder is not expanded: list its .blend files). Empty: the file submitted from Blender" },
        { key: "cloth", type: "string",
          description: "Run this cloth object alone (empty: each shot's cloths, together where Cloths Together is on)" },
        { key: "max_iter", type: "int32", default: 0, propargs: {min: 0},
          description: "Optimizer iterations at most (0: each shot's own setting)" },
        { key: "stop_within_mm", type: "float", default: 0, propargs: {min: 0},
          description: "Stop once every key's mean distance is within this many mm (0: each shot's own Stop Within)" },
        { key: "output_dir", type: "string", subtype: "dir_path", required: true,
          description: "Folder for the optimized shots (SHOT.blend), their reports (SHOT.json) and previews (SHOT.png), and summary.md" },

        // Set by the Flamenco add-on to the submitted (packed) file; the shot when `shots` is empty.
        { key: "blendfile", type: "string", description: "Path of the Blend file submitted from Blender", visible: "web" },
    ]
};

// Makes the output folder on the Worker; the folder is the last command-line argument (after `--`),
// so that the Manager's variables are expanded in it like in any other path.
const py_make_folder = "import os, sys; os.makedirs(sys.argv[-1], exist_ok=True)";

function compileJob(job) {
    const settings = job.settings;
    const shots = shotList(settings);
    if (!settings.output_dir) {
        throw "no output_dir setting!";
    }
    const outputDir = path.join(settings.output_dir);

    const folderTask = author.Task("output-folder", "blender");
    folderTask.addCommand(blenderCommand([
        "--python-exit-code", "1", "--python-expr", py_make_folder, "--", outputDir,
    ]));
    job.addTask(folderTask);

    const names = new Map();
    const reports = [];
    const shotTasks = [];
    for (const shot of shots) {
        const name = path.stem(shot);
        if (names.has(name)) {
            throw `two shots are named "${name}" (${names.get(name)}, ${shot}): their outputs would overwrite each other`;
        }
        names.set(name, shot);
        if (path.join(path.dirname(shot)) == outputDir) {
            throw `the output folder is the folder of shot "${shot}": its optimized copy would overwrite it`;
        }
        const report = path.join(outputDir, `${name}.json`);
        reports.push(report);

        const task = author.Task(`optimize-${name}`, "blender");
        task.addCommand(blenderCommand(["-c", "diffcloth", "optimize", shot,
            "--output", path.join(outputDir, `${name}.blend`),
            "--report", report,
            "--preview", path.join(outputDir, `${name}.png`),
        ].concat(optimizeOptions(settings))));
        task.addDependency(folderTask);
        job.addTask(task);
        shotTasks.push(task);
    }

    // Runs only once every shot task completed (a failed shot fails its task, and so the job).
    const summaryTask = author.Task("summary", "blender");
    summaryTask.addCommand(blenderCommand(["-c", "diffcloth", "summary"].concat(reports,
        ["--output", path.join(outputDir, "summary.md")])));
    for (const task of shotTasks) {
        summaryTask.addDependency(task);
    }
    job.addTask(summaryTask);
}

// The shots' .blend files: `shots` split at ';', or else the submitted `blendfile`.
function shotList(settings) {
    const listed = (settings.shots || "").split(";").map((s) => s.trim()).filter((s) => s != "");
    const shots = listed.length > 0 ? listed : [settings.blendfile].filter((s) => s);
    if (shots.length == 0) {
        throw "no shots: list their .blend files in the shots setting (separated by ';'), or submit one from Blender";
    }
    for (const shot of shots) {
        if (!shot.toLowerCase().endsWith(".blend")) {
            throw `shot "${shot}" is not a .blend file: list the shots' .blend files (the Manager cannot list a folder)`;
        }
    }
    return shots;
}

function optimizeOptions(settings) {
    const options = [];
    if (settings.cloth) {
        options.push("--cloth", settings.cloth);
    }
    if (settings.max_iter > 0) {
        options.push("--max-iter", String(settings.max_iter));
    }
    if (settings.stop_within_mm > 0) {
        options.push("--stop-within", String(settings.stop_within_mm));
    }
    return options;
}

// Flamenco's blender-render command runs `{exe} {exeArgs} {argsBefore} {blendfile} {args}`; the shot
// is opened by the batch command itself (a missing file fails with a clear message), so no blendfile.
function blenderCommand(args) {
    return author.Command("blender-render", {
        exe: "{blender}",
        exeArgs: "{blenderArgs}",
        argsBefore: [],
        blendfile: "",
        args: args,
    });
}
