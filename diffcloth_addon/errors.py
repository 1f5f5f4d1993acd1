"""The artist's mistakes, as every module of the add-on reports them: one line naming the object
and the problem."""


class InputError(Exception):
    """A user mistake, reported as one line naming the object and the problem."""


NO_CLOTH = "no cloth: mark a mesh as DiffCloth Cloth"
NO_TARGETS = "no targets: add one with 'New Target from Cloth'"
NO_KEYS = "no targets with keyframes: pose a Target copy of the cloth and insert a keyframe"
