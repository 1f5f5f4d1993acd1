"""Several cloths simulated together: their scenes as one scene of the joined cloth (core.join),
colliding with one another through self-collision, and the way back, a joined scene's design and
motion per cloth."""

import numpy as np

from .cloth import JoinError, join
from .scene import Goals, Scene

# what each scene holds per cloth (joined in turn), or of the cloths between them; they share the rest
OWN = (
    "cloth",
    "x0",
    "v0",
    "forces",
    "pin_path",
    "goals",
    "self_distance",
    "self_friction",
    "self_pieces",
    "self_within",
)
SHARED = tuple(f for f in Scene._fields if f not in OWN)


def _same(a, b):
    """Whether two settings hold the same values (arrays, lists and objects compared by content)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return a is not None and b is not None and np.shape(a) == np.shape(b) and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    if hasattr(a, "__dict__") and type(a) is type(b):
        return a.__dict__.keys() == b.__dict__.keys() and all(_same(v, b.__dict__[k]) for k, v in a.__dict__.items())
    return a == b


class Joined:
    """scenes (one per cloth) as one Scene, .scene: the cloths joined in turn, each vertex array
    (start, velocities, control forces, pins and their paths, soft pins) concatenated, what the
    scenes share (SHARED, else JoinError naming it) once. The cloths keep distance between
    them through self-collision: self_distance (m) between cloths, the larger of it and a
    cloth's own where that cloth collides with itself, wherever they come that close (however
    close they start); a cloth whose scene has no self distance meets only the others
    (Scene.self_pieces, self_within). self_friction: between them (None: the largest
    of the scenes')."""

    def __init__(self, scenes, self_distance=0.0, self_friction=None):
        self.scenes = list(scenes)
        if not self.scenes:
            raise ValueError("Joined: no scenes")
        first = self.scenes[0]
        for key in SHARED:
            for i, s in enumerate(self.scenes[1:], 1):
                if not _same(getattr(first, key), getattr(s, key)):
                    raise JoinError(key, i)
        sizes = [s.cloth.n for s in self.scenes]
        self.starts = np.cumsum([0] + sizes)
        apart = [s.self_distance == 0 for s in self.scenes]
        distance = max([float(self_distance)] + [s.self_distance for s in self.scenes])
        shared = {key: getattr(first, key) for key in SHARED}
        self.scene = Scene(
            join([s.cloth for s in self.scenes]),
            x0=np.concatenate([s.x0 for s in self.scenes]),
            v0=np.concatenate([np.broadcast_to(s.v0, s.x0.shape) for s in self.scenes]),
            forces=self._forces(),
            pin_path=self._stacked([s.pin_frames for s in self.scenes], [s.pin_path for s in self.scenes]),
            goals=self._goals(),
            self_distance=distance if len(self.scenes) > 1 or not apart[0] else 0.0,
            self_friction=max(s.self_friction for s in self.scenes) if self_friction is None else self_friction,
            self_pieces=np.repeat(np.arange(len(sizes)), sizes),
            self_within=None if not any(apart) else np.logical_not(apart),
            bounds=False,
            **shared,
        )

    @staticmethod
    def _stacked(arrays, given):
        """arrays (frames, k, 3) side by side, or None where every scene gives none."""
        return None if all(g is None for g in given) else np.concatenate(arrays, axis=1)

    def _forces(self):
        steps = self.scenes[0].steps
        if all(s.forces is None for s in self.scenes):
            return None
        return np.concatenate(
            [
                np.zeros((steps, s.cloth.n, 3))
                if s.forces is None
                else np.broadcast_to(s.forces, (steps, s.cloth.n, 3))
                for s in self.scenes
            ],
            axis=1,
        )

    def _goals(self):
        parts = [(s, o) for s, o in zip(self.scenes, self.starts) if s.goals is not None]
        if not parts:
            return None
        frames = self.scenes[0].steps + 1
        paths = [
            np.repeat(s.cloth.rest[None, s.goals.vertices], frames, axis=0) if s.goals.path is None else s.goals.path
            for s, _ in parts
        ]
        return Goals(
            np.concatenate([s.goals.vertices + o for s, o in parts]),
            np.concatenate([s.goals.stiffness for s, _ in parts]),
            self._stacked(paths, [s.goals.path for s, _ in parts]),
        )

    def parts(self, a, axis=-2):
        """A per-vertex array of the joined cloth (vertices along axis) as one array per cloth."""
        return np.split(np.asarray(a), self.starts[1:-1], axis=axis)

    def split(self, scene):
        """Per cloth, its scene with the design of `scene` (the joined scene, as an optimization
        left it): stiffness, initial velocities, control forces, pin path, wind and its drag, the colliders'
        friction and solver."""
        c = scene.cloth
        out = []
        cuts = {
            key: np.cumsum([0] + [count(s.cloth) for s in self.scenes])
            for key, count in (
                ("tension", lambda c: c.n_tension),
                ("shear", lambda c: c.n_shear),
                ("bending", lambda c: len(c.k_bending)),
            )
        }
        pins = np.cumsum([0] + [len(s.cloth.pinned) for s in self.scenes])
        v0 = np.broadcast_to(scene.v0, scene.x0.shape)
        for i, part in enumerate(self.scenes):
            own = {key: slice(cut[i], cut[i + 1]) for key, cut in cuts.items()}
            cloth = part.cloth.replace(
                k_tension=c.k_tension[own["tension"]],
                k_compression=None if c.own_compression is None else c.own_compression[own["tension"]],
                k_shear=c.k_shear[own["shear"]],
                k_bending=c.k_bending[own["bending"]],
            )
            lo, hi = self.starts[i], self.starts[i + 1]
            out.append(
                part.replace(
                    cloth=cloth,
                    v0=v0[lo:hi],
                    forces=None
                    if scene.forces is None
                    else np.broadcast_to(scene.forces, (scene.steps, c.n, 3))[:, lo:hi],
                    pin_path=None if scene.pin_path is None else scene.pin_path[:, pins[i] : pins[i + 1]],
                    wind=scene.wind,
                    wind_drag=scene.wind_drag,
                    colliders=scene.colliders,
                    solver=scene.solver,
                )
            )
        return out
