"""Run a job (worker.run) for the operators, apart from the scene: the main thread copies the
inputs out before start() and writes results only after the run has finished, so a cancelled or
failed run leaves the scene untouched. No bpy here.

- Inline: in this process, synchronously; what execute() uses (blender -b, scripts, tests).
- Process: in a worker process under Blender's own Python (sys.executable, with this process's
  sys.path, so the extension's bundled wheels), which the modal UI path uses: the solver's Python
  loops then never hold the GIL Blender's panels and timers need. A thread reads its progress
  lines into a queue that the operator's timer drains; stop_all() ends every worker (closing the
  file or Blender).
"""

import json
import os
import pickle
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from .. import core as dc
from . import worker

_RUNNING: set["Process"] = set()


class Inline:
    def __init__(self, job):
        self.job, self.result, self.error = job, None, None
        self.infos = []
        self.cancelled = False

    def start(self):
        try:
            self.result = worker.run(dc, self.job, self.infos.append, lambda: self.cancelled)
        except (ValueError, dc.SimulationError) as err:
            self.error = str(err)
        return self

    def cancel(self):
        self.cancelled = True

    def drain(self):
        """Progress dicts since the last call, and whether the run has finished (always)."""
        infos, self.infos = self.infos, []
        return infos, True

    wait = drain


class Process:
    def __init__(self, job):
        self.folder = tempfile.mkdtemp(prefix="diffcloth-run-")
        self.paths = {name: os.path.join(self.folder, name) for name in ("job", "result", "cancel", "stderr")}
        with open(self.paths["job"], "wb") as f:
            pickle.dump(job, f, protocol=pickle.HIGHEST_PROTOCOL)
        self.result = self.error = self.proc = None
        self.lines = queue.Queue()

    def start(self):
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        package = __package__.rpartition(".")[0]  # the extension, e.g. bl_ext.user_default.diffcloth
        # one BLAS thread from the start (core limits it while it runs, but idle pool threads of a
        # multi-threaded BLAS spin on the core Blender needs)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
            **{var: "1" for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")},
        }
        with open(self.paths["stderr"], "wb") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-u",
                    os.path.abspath(worker.__file__),
                    root,
                    package,
                    self.paths["job"],
                    self.paths["result"],
                    self.paths["cancel"],
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        _RUNNING.add(self)
        threading.Thread(target=self._read, name="DiffCloth worker output", daemon=True).start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:  # not one of ours (a library writing to stdout)
                pass
        self.proc.wait()
        self.lines.put(None)

    def drain(self):
        """Progress dicts since the last call, and whether the run has finished."""
        infos = []
        while True:
            try:
                item = self.lines.get_nowait()
            except queue.Empty:
                return infos, False
            if item is None:
                self._collect()
                return infos, True
            infos.append(item)

    def wait(self, poll=0.05):
        infos = []
        while True:
            more, done = self.drain()
            infos += more
            if done:
                return infos, True
            time.sleep(poll)

    def _collect(self):
        _RUNNING.discard(self)
        try:
            with open(self.paths["result"], "rb") as f:
                out = pickle.load(f)
        except FileNotFoundError:
            code = self.proc.returncode
            how = f"was killed (signal {-code})" if code < 0 else f"ended with exit code {code}"
            try:
                with open(self.paths["stderr"], errors="replace") as f:
                    last = [line.strip() for line in f if line.strip()][-1:]
            except OSError:
                last = []
            out = {"error": f"the worker process {how} before finishing" + (f": {last[0]}" if last else "")}
        self.result, self.error = out.get("result"), out.get("error")
        shutil.rmtree(self.folder, ignore_errors=True)

    def cancel(self):
        """Stop after the current iteration, keeping the best design so far."""
        open(self.paths["cancel"], "w").close()

    def kill(self):
        """End the process now; nothing is kept."""
        _RUNNING.discard(self)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def stop_all():
    for run in list(_RUNNING):
        run.kill()
