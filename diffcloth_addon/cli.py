"""Headless batch command: blender -b scene.blend -c diffcloth optimize [options].

Exit codes: 0 success, 1 the job failed (one line on stderr says why), 2 bad arguments.
Outputs are written to temporary files and renamed into place only when everything succeeded,
so a failed run leaves no partial files behind.
"""

import argparse
import json
import math
import os
import sys
import time

import bpy
import numpy as np

from . import convert, operators, preview, runner


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"diffcloth: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser():
    p = _Parser(prog="blender -b scene.blend -c diffcloth",
                description="DiffCloth batch commands (keyframe-controlled cloth).")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    o = sub.add_parser("optimize", help="optimize the scene's cloth to its keyframed targets and bake it",
                       description="Optimize the cloth's parameters (as set up in the scene's DiffCloth panel) "
                                   "so it passes through its keyframed targets, bake the result to shape keys "
                                   "and save.")
    o.add_argument("blend", nargs="?", help="the .blend to open (default: the file Blender opened)")
    o.add_argument("--cloth", help="name of the cloth object (needed when the scene has several)")
    o.add_argument("--max-iter", type=int, help="optimizer iterations at most (default: the scene's setting)")
    o.add_argument("--stop-within", type=float, metavar="MM", help="stop once every target's mean distance is within "
                   "this many mm (default: the scene's Stop Within)")
    o.add_argument("--output", help="save the optimized scene here (default: overwrite the opened .blend)")
    o.add_argument("--report", help="write a JSON report: loss history, optimized parameters, timings")
    o.add_argument("--preview", help="write a PNG contact sheet: targets (red) vs. result (blue), loss curve")
    return p


class JobError(Exception):
    pass


def _writable(path, what):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise JobError(f"cannot write the {what} '{path}': folder '{folder}' does not exist or is not writable")


def _jsonable(value):
    arr = np.asarray(value)
    if arr.size <= 64:
        return arr.tolist()
    return {"shape": list(arr.shape), "rms": float(np.sqrt(np.mean(arr ** 2))), "max_abs": float(np.abs(arr).max())}


def optimize(args):
    t0 = time.perf_counter()
    if args.blend:
        if not os.path.isfile(args.blend):
            raise JobError(f"no such .blend file: '{args.blend}'")
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(args.blend))
    if not bpy.data.filepath:
        raise JobError("no .blend to work on: pass one (blender -b scene.blend -c diffcloth optimize)")
    if args.max_iter is not None and args.max_iter < 1:
        raise JobError("--max-iter must be at least 1")
    if args.stop_within is not None and not (math.isfinite(args.stop_within) and args.stop_within > 0):
        raise JobError("--stop-within must be a positive distance in mm")
    output = args.output or bpy.data.filepath
    for path, what in ((output, "output"), (args.report, "report"), (args.preview, "preview")):
        if path:
            _writable(path, what)
    context = bpy.context
    try:
        # headless, the file's saved selection is no choice: several cloths need --cloth
        setup, job = operators.prepare(context, "optimize", args.cloth, args.max_iter, use_active=False,
                                       within=args.stop_within and args.stop_within * 1e-3)
        for warning in setup.warnings:
            print(f"diffcloth: warning: {warning}", flush=True)
        t_gather = time.perf_counter()
        run = runner.Inline(job).start()
        t_opt = time.perf_counter()
        for info in run.wait()[0]:
            print(f"diffcloth: {operators.progress_text(setup, info)}, {info['elapsed']:.1f} s", flush=True)
        result = operators.finish(context, setup, run)
    except (convert.InputError, ValueError) as err:
        raise JobError(str(err)) from None
    print(f"diffcloth: {operators.summary(setup, result)}", flush=True)

    pending = []  # (temporary, final) renamed only when all outputs exist
    try:
        tmp = output + ".diffcloth-tmp.blend"
        bpy.ops.wm.save_as_mainfile(filepath=tmp, copy=True)
        pending.append((tmp, output))
        if args.preview:
            traj = result.trajectory
            frames = sorted(setup.loss.targets)
            preview.write(args.preview + ".tmp", [(f + setup.start, f, setup.loss.targets[f], traj.x[f]) for f in frames],
                          setup.scene.cloth.tris, setup.scene.colliders,
                          [result.initial_loss] + [h["loss"] for h in result.history])
            pending.append((args.preview + ".tmp", args.preview))
        t_write = time.perf_counter()
        if args.report:
            report = {
                "blend": bpy.data.filepath, "output": os.path.abspath(output), "cloth": setup.cloth_obj.name,
                "frames": [setup.start, setup.end], "targets": setup.target_frames,
                "parameters": {k: _jsonable(v) for k, v in result.params.items()},
                "initial_loss": result.initial_loss, "final_loss": result.loss,
                "normalized_loss": result.normalized_loss, "reason": result.reason,
                "iterations": len(result.history), "evaluations": result.evaluations,
                "keyframes_mm": {f + setup.start: dict(zip(("mean_before", "largest_before", "mean_after",
                                                             "largest_after"), np.round(np.array(d) * 1e3, 2).tolist()))
                                 for f, d in result.keyframes.items()},
                "max_control_g": result.scene.max_control_acceleration() / operators.G,
                "history": result.history,
                "timings_s": {"read_scene": t_gather - t0, "optimize": t_opt - t_gather,
                              "write": t_write - t_opt, "total": time.perf_counter() - t0},
            }
            with open(args.report + ".tmp", "w") as f:
                json.dump(report, f, indent=1)
            pending.append((args.report + ".tmp", args.report))
        for tmp_path, final in pending:
            os.replace(tmp_path, final)
    except OSError as err:
        for tmp_path, _ in pending:
            if os.path.exists(tmp_path):
                os.remove(tmp_path)
        raise JobError(f"cannot write outputs: {err}") from None
    return 0


def execute(argv):
    """Entry point for bpy.utils.register_cli_command; returns the exit code."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return optimize(args)
    except JobError as err:
        print(f"diffcloth: error: {err}", file=sys.stderr)
        return 1
