"""A DiffCloth job (simulate or optimize) run by core, no bpy here: in Blender's own process for
execute() (blender -b, scripts, tests), or in a worker process for the UI, where this file runs as
a script under Blender's Python so the solver never holds Blender's GIL:

    python worker.py ROOT PACKAGE JOB RESULT CANCEL

ROOT is the extension's folder, loaded as the package PACKAGE (the name Blender gave it, so the
pickled core objects of JOB resolve to the same classes); progress goes to stdout as one JSON
object per line; the outcome is pickled to RESULT ({"result": …} or {"error": message}); the run
stops, keeping the best design, once the file CANCEL exists.
"""

import dataclasses
import importlib.util
import json
import os
import pickle
import sys
import types


def run(core, job, report, cancelled):
    """The job's result: the motion (x at frames, step_x at integrator steps) of a simulation, or
    core's OptimizeResult with the best design's motion as result.trajectory and
    result.keyframes {frame: (mean, largest distance before, mean, largest after)} in metres and
    result.reach {frame: core.KeyReach} (optimize). job["guess"]: step positions of the last run's motion, to follow its branch
    where the cloth buckles (None: from scratch)."""
    guess = job.get("guess")
    if job["kind"] == "simulate":
        traj = core.simulate(
            job["scene"], lambda done, frames: report({"frame": done, "frames": frames}), guess, keep_factors=False
        )
        # positions only, as below, and what Self Collisions cost
        return types.SimpleNamespace(x=traj.x, step_x=traj.step_x, self_collision_s=traj.stats.self_collision_seconds)
    loss = job["loss"]
    result = core.optimize(
        job["scene"],
        loss,
        job["params"],
        max_iter=job["max_iter"],
        callback=lambda info: report(info) or cancelled(),
        guess=guess,
        within=job["within"],
    )
    refine = job.get("refine")
    if refine and result.reason != "stopped":  # Refine: the design carried to the cloth itself
        result, loss = (
            core.refine(
                result,
                loss.embedding,
                job["scene"],
                refine["scene"],
                refine["loss"],
                refine["params"],
                refine["iterations"],
                callback=lambda info: report(info) or cancelled(),
                within=job["within"],
            ),
            refine["loss"],
        )
    # what the artist reads: per keyframe, the mean and largest distance before and after, and
    # what it asks of the fabric's stretch, on the cloth's own mesh (per cloth, of cloths run together)
    keyframes = {f: result.initial_distances[f] + after for f, after in loss.distances(result.trajectory.x).items()}
    embedding = getattr(loss, "embedding", None)
    render = result.trajectory.x if embedding is None else embedding.apply(result.trajectory.x)
    parts = job.get("parts") or [(0, render.shape[1], job["render_tris"], loss)]
    # where the scene simulates the keyed mesh itself, a missed key is also placed at rest in it
    simulated = embedding is None
    reach = [
        {}
        if keys is None
        else core.key_reach(
            tris, render[:, lo:hi], keys.targets, scene=result.scene, placed=(render, lo) if simulated else None
        )
        for lo, hi, tris, keys in parts
    ]
    # positions only: the trajectory's factorizations stay in this process
    trajectory = types.SimpleNamespace(x=result.trajectory.x, step_x=result.trajectory.step_x)
    out = dataclasses.replace(
        result, trajectory=trajectory, keyframes=keyframes, reach=reach[0] if len(reach) == 1 else {}
    )
    out.part_reach = reach  # per cloth run together (together.per_cloth)
    return out


def progress_line(info):
    """The scalars and the keys' distances of a progress dict, as one line of JSON."""
    return json.dumps({k: v for k, v in info.items() if isinstance(v, (int, float, str)) or k == "distances"})


def _load_core(root, package):
    """Import ROOT as PACKAGE (with empty parents, e.g. bl_ext.user_default) and return its core."""
    parts = package.split(".")
    for i in range(1, len(parts)):
        sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    spec = importlib.util.spec_from_file_location(
        package, os.path.join(root, "__init__.py"), submodule_search_locations=[root]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module
    spec.loader.exec_module(module)
    return importlib.import_module(package + ".core")


def main(argv):
    root, package, job_path, result_path, cancel_path = argv
    core = _load_core(root, package)
    with open(job_path, "rb") as f:
        job = pickle.load(f)
    try:
        out = {
            "result": run(
                core, job, lambda info: print(progress_line(info), flush=True), lambda: os.path.exists(cancel_path)
            )
        }
    except (ValueError, core.SimulationError) as err:
        out = {"error": str(err)}
    with open(result_path + ".tmp", "wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(result_path + ".tmp", result_path)  # whole or absent


if __name__ == "__main__":
    main(sys.argv[1:])
