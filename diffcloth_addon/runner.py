"""Run core.optimize in a worker thread, reporting progress through a queue (no bpy here).

The main thread owns Blender: it copies the inputs out before start() and writes results only
after the worker has finished, so a cancelled or failed run leaves the scene untouched.
"""

import queue
import threading
import traceback

from .. import core as dc


class OptimizeRunner:
    def __init__(self, scene, loss, params, max_iter):
        self.args = (scene, loss, params, max_iter)
        self.events = queue.Queue()
        self.cancel = threading.Event()
        self.thread = threading.Thread(target=self._run, name="DiffCloth optimize", daemon=True)
        self.result = None
        self.error = None

    def start(self):
        self.thread.start()
        return self

    def _progress(self, info):
        self.events.put(("progress", info))
        return self.cancel.is_set()

    def _run(self):
        scene, loss, params, max_iter = self.args
        try:
            self.result = dc.optimize(scene, loss, params, max_iter=max_iter, callback=self._progress)
            traj = dc.simulate(self.result.scene)
            self.result.trajectory = traj
        except (ValueError, dc.SimulationError) as err:
            self.error = str(err)
        except Exception:  # a bug, not a user mistake: keep the traceback for the report
            self.error = "internal error:\n" + traceback.format_exc()
        self.events.put(("done", None))

    def drain(self):
        """Progress dicts received since the last call, and whether the worker has finished."""
        infos, done = [], False
        while True:
            try:
                kind, info = self.events.get_nowait()
            except queue.Empty:
                return infos, done
            if kind == "done":
                done = True
            else:
                infos.append(info)

    def wait(self):
        self.thread.join()
        return self.drain()
