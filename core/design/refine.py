"""Refine: a design found through a simulation mesh (proxy) carried to the cloth itself and
optimized there, as the run's continuation."""

import dataclasses

from .optimize import optimize


def refine(found, embedding, scene, own_scene, loss, params, iterations, callback=None, within=None):
    """The OptimizeResult of `found` (a run on the proxy's `scene` through `embedding`, an
    Embedding) continued on the cloth itself: found's design carried to own_scene
    (Embedding.carry), optimized for `iterations` more iterations of `loss` (on the cloth's own
    vertices; its regularizer holds the change Refine makes) over `params`, its steps started from
    the embedded proxy motion. Its history goes on from found's (iterations and elapsed time
    counted on), its start is found's (initial_loss, initial_distances), carried_distances the
    keys' distances of the cloth itself with the proxy's design, refined True. callback as
    optimize's, seeing the continued counts and refining=True."""
    done = len(found.history)
    spent = found.history[-1]["elapsed"] if done else 0.0

    def more(info):  # an iteration of Refine as the run's next
        return dict(
            info,
            iteration=done + info["iteration"],
            elapsed=spent + info["elapsed"],
            normalized_loss=info["loss"] / found.initial_loss if found.initial_loss > 0 else 0.0,
            refining=True,
        )

    result = optimize(
        embedding.carry(scene, found.scene, own_scene),
        loss,
        params,
        max_iter=iterations,
        callback=None if callback is None else (lambda info: callback(more(info))),
        guess=embedding.apply(found.trajectory.step_x),
        within=within,
    )
    return dataclasses.replace(
        result,
        history=found.history + [more(h) for h in result.history],
        carried_distances=result.initial_distances,
        initial_loss=found.initial_loss,
        initial_distances=found.initial_distances,
        refined=True,
    )
