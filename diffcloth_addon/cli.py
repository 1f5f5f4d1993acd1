"""Headless batch commands: blender -b scene.blend -c diffcloth optimize [options], and
blender -b -c diffcloth summary REPORT_OR_FOLDER... [--output summary.md|.csv|.json].

Exit codes: 0 success, 1 the job failed (one line on stderr says why), 2 bad arguments, 3 optimized
and saved but the --preview picture could not be drawn (one line on stderr says why; the .blend and
the report are written, the report names the failure). Outputs are written to temporary files and
renamed into place only when all of them exist, so a failed run leaves no partial files behind; its
--report alone is written, with the error.
summary merges such reports (one per shot, e.g. from a Flamenco job: flamenco/) into one table;
its exit code is 0 only if every shot succeeded.
"""

import argparse
import csv
import io
import json
import math
import os
import sys
import time

import bpy
import numpy as np

from . import bake, operators, preview, reach, runner
from .errors import InputError
from .results import render_positions


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"diffcloth: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser():
    p = _Parser(
        prog="blender -b scene.blend -c diffcloth", description="DiffCloth batch commands (keyframe-controlled cloth)."
    )
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    o = sub.add_parser(
        "optimize",
        help="optimize the scene's cloth to its keyframed targets and bake it",
        description="Optimize the cloth's parameters (as set up in the scene's DiffCloth panel) "
        "so it passes through its keyframed targets, bake the result to shape keys "
        "and save.",
    )
    o.add_argument("blend", nargs="?", help="the .blend to open (default: the file Blender opened)")
    o.add_argument(
        "--cloth",
        help="run this cloth alone (default: the scene's only cloth, or all of them together where the scene's "
        "Cloths Together is on; with it off, several cloths need --cloth)",
    )
    o.add_argument("--max-iter", type=int, help="optimizer iterations at most (default: the scene's setting)")
    o.add_argument(
        "--stop-within",
        type=float,
        metavar="MM",
        help="stop once every target's mean distance is within this many mm (default: the scene's Stop Within)",
    )
    o.add_argument("--output", help="save the optimized scene here (default: overwrite the opened .blend)")
    o.add_argument("--report", help="write a JSON report: loss history, optimized parameters, timings")
    o.add_argument("--preview", help="write a PNG contact sheet: targets (red) vs. result (blue), loss curve")
    s = sub.add_parser(
        "summary",
        prog="blender -b -c diffcloth summary",
        help="merge per-shot reports into one table",
        description="One row per shot (the report's file name): each key's mean (largest) distance, "
        "iterations, time, exit code and status. Exit code 0 only if every shot succeeded.",
    )
    s.add_argument(
        "reports",
        nargs="+",
        metavar="REPORT_OR_FOLDER",
        help="a report of optimize --report (a missing one shows as 'no report'), or a folder: its .json files",
    )
    s.add_argument(
        "--output", type=_table_path, help="also write the table here: .md, .csv or .json (by its extension)"
    )
    return p


def _table_path(path):
    if os.path.splitext(path)[1].lower() not in (".md", ".csv", ".json"):
        raise argparse.ArgumentTypeError(f"'{path}' must end in .md, .csv or .json")
    return path


class JobError(Exception):
    pass


# optimize's exit code when everything but the --preview picture was written
PREVIEW_FAILED = 3


def _writable(path, what):
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise JobError(f"cannot write the {what} '{path}': folder '{folder}' does not exist or is not writable")


def _jsonable(value):
    arr = np.asarray(value)
    if arr.size <= 64:
        return arr.tolist()
    return {"shape": list(arr.shape), "rms": float(np.sqrt(np.mean(arr**2))), "max_abs": float(np.abs(arr).max())}


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
        # headless, the file's saved selection is no choice: several cloths run together, or need --cloth
        setup, job = operators.prepare(
            context,
            "optimize",
            args.cloth,
            args.max_iter,
            use_active=False,
            within=args.stop_within and args.stop_within * 1e-3,
        )
        for warning in setup.warnings:
            print(f"diffcloth: warning: {warning}", flush=True)
        t_gather = time.perf_counter()
        run = runner.Inline(job).start()
        t_opt = time.perf_counter()
        for info in run.wait()[0]:
            print(f"diffcloth: {operators.progress_text(setup, info)}, {info['elapsed']:.1f} s", flush=True)
        with bake.written_as(output):  # the file read keeps its own caches
            result = operators.finish(context, setup, run)
    except (InputError, ValueError) as err:
        raise JobError(str(err)) from None
    print(f"diffcloth: {operators.summary(setup, result)}", flush=True)
    far = reach.unreachable_keys(setup)
    for part, frame, r in far:
        print(f"diffcloth: warning: {reach.message(part, frame, r)}", flush=True)

    pending = []  # (temporary, final) renamed only when all outputs exist
    try:
        tmp = output + ".diffcloth-tmp.blend"
        with bake.written_as(output):  # its caches under the name it is renamed to
            bpy.ops.wm.save_as_mainfile(filepath=tmp, copy=True)
        pending.append((tmp, output))
        preview_error = args.preview and _draw_preview(args.preview + ".tmp", setup, result)
        if args.preview and not preview_error:
            pending.append((args.preview + ".tmp", args.preview))
        t_write = time.perf_counter()
        if args.report:
            report = {
                "exit_code": PREVIEW_FAILED if preview_error else 0,
                "blend": bpy.data.filepath,
                "output": os.path.abspath(output),
                "cloth": setup.cloth_name,
                "cloths": [part.cloth_name for part, _ in setup.written],
                "frames": [setup.start, setup.end],
                "targets": setup.target_frames,
                "parameters": {k: _jsonable(v) for k, v in result.params.items()},
                "initial_loss": result.initial_loss,
                "final_loss": result.loss,
                "normalized_loss": result.normalized_loss,
                "reason": result.reason,
                "iterations": len(result.history),
                "evaluations": result.evaluations,
                "keyframes_mm": {
                    f + setup.start: dict(
                        zip(
                            ("mean_before", "largest_before", "mean_after", "largest_after"),
                            np.round(np.array(d) * 1e3, 2).tolist(),
                        )
                    )
                    for f, d in result.keyframes.items()
                },
                "max_control_g": result.scene.max_control_acceleration() / operators.G,
                # keys out of the cloth's reach: the stretch they ask, the nearest pose's distance, colliders entered or slid on
                "unreachable_keys": {
                    f: {
                        "target": reach.target_of(part, f),
                        "stretch_largest": r.demand,
                        "stretch_p95": r.demand_p95,
                        "fabric_stretch": r.fabric,
                        "closest_mean_mm": r.closest[0] * 1e3,
                        "closest_largest_mm": r.closest[1] * 1e3,
                        "inside": {
                            setup.collider_names[c]: dict(vertices=n, deepest_mm=d * 1e3)
                            for c, (n, d) in r.inside.items()
                        },
                        "slides": {
                            setup.collider_names[c]: dict(vertices=n, farthest_mm=d * 1e3)
                            for c, (n, d) in r.slides.items()
                        },
                    }
                    for part, f, r in far
                },
                "history": result.history,
                **({"preview_error": preview_error} if preview_error else {}),
                "timings_s": {
                    "read_scene": t_gather - t0,
                    "optimize": t_opt - t_gather,
                    "write": t_write - t_opt,
                    "total": time.perf_counter() - t0,
                },
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
    if preview_error:
        print(f"diffcloth: error: {preview_error} (the optimized .blend and the report are saved)", file=sys.stderr)
        return PREVIEW_FAILED
    return 0


def _draw_preview(path, setup, result):
    """Write the preview PNG at path; None, or what went wrong: a picture that cannot be drawn must
    not cost the optimization, whose .blend and report are saved all the same."""
    try:
        shown = render_positions(setup, result.trajectory.x)  # the cloth, not its proxy
        frames = sorted(setup.loss.targets)
        preview.write(
            path,
            [(f + setup.start, f, _keyed(setup.loss, f, shown[f]), shown[f]) for f in frames],
            setup.render_tris,
            setup.scene.colliders,
            [result.initial_loss] + [h["loss"] for h in result.history],
        )
    except Exception as err:  # anything Blender's renderer or the image writer raises
        if os.path.exists(path):
            os.remove(path)
        return f"the preview could not be drawn: {type(err).__name__}: {err}"
    return None


def _keyed(loss, frame, shown):
    """A key's target where it poses the cloths, the cloths as shown where it does not (cloths run
    together keyed apart)."""
    target, keyed = loss.targets[frame].copy(), getattr(loss, "loss", loss).keyed  # an EmbeddedLoss's own
    if frame in keyed:
        unkeyed = np.ones(len(target), bool)
        unkeyed[keyed[frame]] = False
        target[unkeyed] = shown[unkeyed]
    return target


def _shot(path):
    """One shot's row, named after its report file; a missing or unreadable report is a failed row."""
    row = {
        "shot": os.path.splitext(os.path.basename(path))[0],
        "keys_mm": {},
        "iterations": None,
        "time_s": None,
        "exit_code": None,
        "status": "no report",
        "report": os.path.abspath(path),
    }
    try:
        with open(path) as f:
            report = json.load(f)
        code = (
            report.get("exit_code", 0 if "final_loss" in report else None)  # older reports: written on success only
            if isinstance(report, dict)
            else None
        )
        if code is None:
            raise ValueError("not a DiffCloth report")
        row.update(exit_code=code, time_s=report.get("timings_s", {}).get("total"))
        if code not in (0, PREVIEW_FAILED):
            return {**row, "status": f"failed: {report.get('error', 'no error given')}"}
        keys = {int(f): (d["mean_after"], d["largest_after"]) for f, d in report["keyframes_mm"].items()}
        missing = f"; {report['preview_error']}" if code == PREVIEW_FAILED else ""
        far = sorted(int(f) for f in report.get("unreachable_keys", {}))
        beyond = f"; frame {', '.join(map(str, far))} out of the cloth's reach" if far else ""
        return {
            **row,
            "keys_mm": {f: keys[f] for f in sorted(keys)},
            "iterations": report["iterations"],
            "status": f"ok: {operators.reason_text(report['reason'])}{beyond}{missing}",
        }
    except FileNotFoundError:
        return row
    except (OSError, ValueError, KeyError, TypeError) as err:
        return {**row, "exit_code": None, "status": f"unreadable report: {err!s}"}


def _table(rows, fmt):
    def cells(row):
        keys = ", ".join(f"frame {f} {mean:.2f} ({largest:.2f})" for f, (mean, largest) in row["keys_mm"].items())
        return [
            row["shot"],
            keys,
            "" if row["iterations"] is None else str(row["iterations"]),
            "" if row["time_s"] is None else f"{row['time_s']:.1f}",
            "" if row["exit_code"] is None else str(row["exit_code"]),
            row["status"],
        ]

    head = ["shot", "keys: mean (largest) mm", "iterations", "time s", "exit code", "status"]
    if fmt == ".json":
        return (
            json.dumps(
                {"shots": rows, "succeeded": sum(r["exit_code"] == 0 for r in rows), "total": len(rows)}, indent=1
            )
            + "\n"
        )
    if fmt == ".csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([head] + [cells(r) for r in rows])
        return out.getvalue()
    return "".join(
        "| " + " | ".join(c.replace("|", "\\|") for c in line) + " |\n"
        for line in [head, ["---"] * len(head)] + [cells(r) for r in rows]
    )


def summary(args):
    paths, own = [], args.output and os.path.abspath(args.output)
    for path in args.reports:
        if os.path.isdir(path):
            found = sorted(
                p
                for p in (os.path.join(path, n) for n in os.listdir(path) if n.lower().endswith(".json"))
                if os.path.abspath(p) != own
            )
            if not found:
                raise JobError(f"no .json reports in the folder '{path}'")
            paths += found
        else:
            paths.append(path)
    if args.output:
        _writable(args.output, "summary")
    rows = [_shot(path) for path in paths]
    print(_table(rows, ".md"), end="", flush=True)
    if args.output:
        try:
            with open(args.output + ".tmp", "w", newline="") as f:
                f.write(_table(rows, os.path.splitext(args.output)[1].lower()))
            os.replace(args.output + ".tmp", args.output)
        except OSError as err:
            raise JobError(f"cannot write the summary: {err}") from None
    failed = [r["shot"] for r in rows if r["exit_code"] != 0]
    if failed:
        print(
            f"diffcloth: error: {len(failed)} of {len(rows)} shots failed or have no report: {', '.join(failed)}",
            file=sys.stderr,
        )
    return 1 if failed else 0


def execute(argv):
    """Entry point for bpy.utils.register_cli_command; returns the exit code."""
    try:
        args = parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    t0 = time.perf_counter()
    try:
        return summary(args) if args.command == "summary" else optimize(args)
    except JobError as err:
        print(f"diffcloth: error: {err}", file=sys.stderr)
        if args.command == "optimize" and args.report:  # a failed shot still leaves its report, for summary
            blend = os.path.abspath(args.blend) if args.blend else bpy.data.filepath
            try:
                with open(args.report + ".tmp", "w") as f:
                    json.dump(
                        {
                            "exit_code": 1,
                            "error": str(err),
                            "blend": blend,
                            "timings_s": {"total": time.perf_counter() - t0},
                        },
                        f,
                        indent=1,
                    )
                os.replace(args.report + ".tmp", args.report)
            except OSError:
                pass  # its folder is what failed: the line above says so
        return 1
