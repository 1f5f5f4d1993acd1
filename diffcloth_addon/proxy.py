"""A simulation mesh (proxy) for a cloth (main thread only): picked by the artist (Simulation Mesh)
or made from the cloth (Proxy Vertices, a vertex budget: Blender's Decimate, collapse, on a
temporary copy, so the same cloth gives the same proxy every time). The proxy is simulated; the
cloth, the render mesh, follows it through a core.design.embedding.Embedding, as Surface Deform would
carry it, and is what targets pose, the loss measures and the bake shows.
"""

import bpy
import numpy as np
from scipy.spatial import cKDTree

from .. import core as dc
from ..core.design.embedding import Embedding
from ..core.model.mesh import polygon_of_triangles
from .errors import InputError
from .reading import ModifiersOff, OwnKeysMuted, evaluated_coords, frame_range, mesh_topology, to_world

# a render vertex farther than this fraction of the cloth's size from its proxy is not covered
COVER = 0.02
# the budget Make Simulation Mesh uses when Proxy Vertices is unset
DEFAULT_BUDGET = 1000
# mass-spring cloth on fewer proxy vertices than this is no cloth
MIN_PROXY = 16


def wanted(cs):
    return cs.sim_mesh is not None or cs.proxy_vertices > 0


def decimated(cloth_obj, depsgraph, budget):
    """Local vertices and polygons of the cloth's evaluated mesh decimated to about `budget`
    vertices, through a temporary object that is removed again."""
    mesh = bpy.data.meshes.new_from_object(cloth_obj.evaluated_get(depsgraph))
    temp = bpy.data.objects.new("DiffCloth proxy (temporary)", mesh)
    bpy.context.scene.collection.objects.link(temp)
    try:
        mod = temp.modifiers.new("Decimate", "DECIMATE")
        mod.decimate_type, mod.ratio, mod.use_collapse_triangulate = "COLLAPSE", budget / len(mesh.vertices), True
        bpy.context.view_layer.update()
        ev = temp.evaluated_get(bpy.context.evaluated_depsgraph_get())
        out = ev.to_mesh()
        co = np.empty(len(out.vertices) * 3)
        out.vertices.foreach_get("co", co)
        faces = [tuple(p.vertices) for p in out.polygons]
        ev.to_mesh_clear()
        return co.reshape(-1, 3), faces
    finally:
        bpy.data.objects.remove(temp)
        bpy.data.meshes.remove(mesh)


def new_object(cloth_obj, local, faces):
    """The proxy as an object the artist sees and may edit: a wireframe child of the cloth (so it
    moves with it), not rendered, in the cloth's collections."""
    mesh = bpy.data.meshes.new(f"{cloth_obj.name} Simulation Mesh")
    mesh.from_pydata(local.tolist(), [], faces)
    mesh.update()
    obj = bpy.data.objects.new(mesh.name, mesh)
    obj.parent = cloth_obj  # identity parent inverse: local coordinates are the cloth's
    obj.display_type, obj.hide_render = "WIRE", True
    for collection in cloth_obj.users_collection:
        collection.objects.link(obj)
    return obj


def read(cloth_obj, cs, depsgraph, render_local, render_world, pins, mw):
    """The proxy at the start frame: local vertices (in the cloth's space, so it follows the cloth
    object), triangles, the polygon of each, pinned vertices and the Embedding of the cloth's world
    rest positions in it; bad input refused by name."""
    name = cloth_obj.name
    if cs.sim_mesh is not None:
        sim = cs.sim_mesh
        if sim.type != "MESH":
            raise InputError(f"cloth '{name}': its Simulation Mesh '{sim.name}' is not a mesh")
        if sim == cloth_obj:
            raise InputError(f"cloth '{name}': its Simulation Mesh is the cloth itself; clear it instead")
        co, sim_mw = evaluated_coords(sim, depsgraph)
        world = to_world(co, sim_mw)
        inv = np.linalg.inv(mw)
        local = world @ inv[:3, :3].T + inv[:3, 3]
        tris, polygons, _ = mesh_topology(sim, depsgraph)
        source = f"Simulation Mesh '{sim.name}'"
    else:
        if cs.proxy_vertices >= len(render_local):
            raise InputError(
                f"cloth '{name}': Proxy Vertices ({cs.proxy_vertices}) is not fewer than the cloth's own "
                f"{len(render_local)}: lower it, or set it to 0 to simulate the cloth itself"
            )
        local, faces = decimated(cloth_obj, depsgraph, cs.proxy_vertices)
        tris, polygons = dc.triangulate(faces), polygon_of_triangles(faces)
        source = f"its {len(local)}-vertex proxy"
    if len(local) < MIN_PROXY or len(tris) == 0:
        raise InputError(
            f"cloth '{name}': {source} has {len(local)} vertices; a simulation mesh needs at least "
            f"{MIN_PROXY} and faces"
        )
    if len(local) == len(render_local) and np.allclose(local, render_local):
        raise InputError(f"cloth '{name}': {source} is the cloth itself; clear it to simulate the cloth directly")
    world = to_world(local, mw)
    embedding = Embedding(render_world, world, tris)
    size = float(np.ptp(render_world, axis=0).max())
    far = embedding.distance > COVER * size
    if far.any():
        raise InputError(
            f"cloth '{name}': {source} does not cover it: {int(far.sum())} of its {len(far)} vertices lie "
            f"farther than {COVER * size * 100:.1f} cm from it"
        )
    proxy_pins = np.zeros(0, np.int64)
    if len(pins):  # the proxy vertex nearest each pinned cloth vertex, within one proxy edge of it
        edges = np.linalg.norm(world[tris] - world[np.roll(tris, 1, axis=1)], axis=2)
        dist, nearest = cKDTree(world).query(render_world[pins])
        proxy_pins = np.unique(nearest[dist <= edges.max()])
        if not len(proxy_pins):
            raise InputError(
                f"cloth '{name}': no vertex of {source} lies near its pinned vertices, so the proxy "
                "would hang from nothing: give the proxy vertices there"
            )
    return local, tris, polygons, proxy_pins, embedding


def nearest(render_world, proxy_world):
    """Per proxy vertex, the index of the cloth vertex nearest it (what carries a per-vertex
    setting, such as a vertex group's weight, over to the proxy)."""
    return cKDTree(render_world).query(proxy_world)[1]


def posed_pins(render_world, render_pins, pins_off, proxy_world, proxy_pins, slack):
    """What Move Pins moves through a proxy: the proxy's pins nearest the cloth's pinned vertices
    that some target poses more than `slack` (m) from where they are held (pins_off: {frame:
    distances of the cloth's pinned vertices}, as core.pins_off_targets)."""
    if not pins_off or not len(render_pins) or not len(proxy_pins):
        return np.zeros(0, np.int64)
    posed = render_pins[np.max(list(pins_off.values()), axis=0) > slack]
    if not len(posed):
        return np.zeros(0, np.int64)
    return np.unique(proxy_pins[cKDTree(proxy_world[proxy_pins]).query(render_world[posed])[1]])


def decimated_at_start(context, cloth_obj, budget):
    """decimated() of the cloth as a run reads it: at the start frame, without DiffCloth's bake."""
    scene, original_frame = context.scene, context.scene.frame_current
    try:
        with OwnKeysMuted(cloth_obj), ModifiersOff(cloth_obj):
            scene.frame_set(frame_range(scene)[0])
            context.view_layer.update()
            return decimated(cloth_obj, context.evaluated_depsgraph_get(), budget)
    finally:
        scene.frame_set(original_frame)
