"""Counts and seconds of the solver's passes (forward, adjoint, tangent) inside a `Clock`.

An optimizer runs under a Clock to report where its time goes and how many simulations it ran,
whatever path (its own code, a callback, a test's stand-in) makes the calls.
"""

import contextvars
import functools
import time

_running = contextvars.ContextVar("diffcloth_clock", default=None)


class Clock:
    """with Clock() as clock: ... then clock.counts[kind], clock.seconds[kind]."""

    def __init__(self):
        self.counts, self.seconds = {}, {}

    def __enter__(self):
        self._token = _running.set(self)
        return self

    def __exit__(self, *exc):
        _running.reset(self._token)

    def add(self, kind, seconds):
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds

    def snapshot(self):
        return dict(self.counts), dict(self.seconds)


def timed(kind):
    """Decorator: calls (finished or raising) count toward the running Clock's `kind`."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            clock = _running.get()
            if clock is None:
                return fn(*args, **kwargs)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                clock.add(kind, time.perf_counter() - start)

        return inner

    return wrap
