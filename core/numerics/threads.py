"""Run the solver on one BLAS thread.

Its dense kernels are small (3×3 blocks, banded factors a few hundred wide), where a BLAS thread
pool only adds synchronisation; and when the other cores are busy (Blender's UI, a second job) the
pool's spinning threads stall each other: a 144-vertex scene measured 1.1 s single-threaded and
3-70 s with two OpenBLAS threads beside one busy process. The limit is restored on return.
"""

import functools

from threadpoolctl import ThreadpoolController

_controller = None


def one_blas_thread(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        global _controller
        if _controller is None:  # built on first use, once numpy's and scipy's BLAS are loaded
            _controller = ThreadpoolController()
        with _controller.limit(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper
