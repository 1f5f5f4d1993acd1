/* DiffCloth's contact queries, compiled (core/contact/compiled.py loads them with ctypes; built
   for every platform by scripts/build_native.py). At a few hundred vertices numpy's per-call cost,
   not the arithmetic, was the queries' time: a character's body took 1.6-1.9 ms a query through
   cKDTrees, these take about 0.1 ms.

   Plain C99 and libm only; built without fused multiply-adds, so every platform rounds alike. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef _WIN32
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

/* the order numpy's einsum("ij,ij->i") sums three products in: the queries' results are those of
   the vectorized numpy they replace, to the bit */
static double dot(const double *u, const double *v) { return (u[0] * v[0] + u[2] * v[2]) + u[1] * v[1]; }

/* The barycentric weights w of the point of triangle (a, b, c) closest to p (Ericson, Real-Time
   Collision Detection §5.1.5): a face's interior has three positive weights, an edge's two, a
   vertex's one. */
static void closest_weights(const double *p, const double *a, const double *b, const double *c, double *w)
{
    double ab[3], ac[3], ap[3], bp[3], cp[3];
    for (int k = 0; k < 3; k++) {
        ab[k] = b[k] - a[k];
        ac[k] = c[k] - a[k];
        ap[k] = p[k] - a[k];
        bp[k] = p[k] - b[k];
        cp[k] = p[k] - c[k];
    }
    double d1 = dot(ab, ap), d2 = dot(ac, ap), d3 = dot(ab, bp), d4 = dot(ac, bp), d5 = dot(ab, cp), d6 = dot(ac, cp);
    double va = d3 * d6 - d5 * d4, vb = d5 * d2 - d1 * d6, vc = d1 * d4 - d3 * d2;
    double t;
    w[0] = w[1] = w[2] = 0.0;
    if (d1 <= 0 && d2 <= 0) {
        w[0] = 1.0;
    } else if (d3 >= 0 && d4 <= d3) {
        w[1] = 1.0;
    } else if (vc <= 0 && d1 >= 0 && d3 <= 0) {
        t = d1 / (d1 - d3);
        w[0] = 1 - t, w[1] = t;
    } else if (d6 >= 0 && d5 <= d6) {
        w[2] = 1.0;
    } else if (vb <= 0 && d2 >= 0 && d6 <= 0) {
        t = d2 / (d2 - d6);
        w[0] = 1 - t, w[2] = t;
    } else if (va <= 0 && d4 - d3 >= 0 && d5 - d6 >= 0) {
        t = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        w[1] = 1 - t, w[2] = t;
    } else {
        double denom = 1.0 / (va + vb + vc);
        w[0] = 1 - (vb + vc) * denom, w[1] = vb * denom, w[2] = vc * denom;
    }
}

/* q = w·(a, b, c) and |p − q| */
static double closest_point(const double *p, const double *a, const double *b, const double *c, double *w, double *q)
{
    closest_weights(p, a, b, c, w);
    for (int k = 0; k < 3; k++) q[k] = w[0] * a[k] + w[1] * b[k] + w[2] * c[k];
    double r0 = p[0] - q[0], r1 = p[1] - q[1], r2 = p[2] - q[2];
    return sqrt(r0 * r0 + r1 * r1 + r2 * r2);
}

EXPORT void dc_closest_on_triangles(int64_t n, const double *p, const double *a, const double *b, const double *c,
                                    double *q, double *w)
{
    for (int64_t i = 0; i < n; i++) closest_point(p + 3 * i, a + 3 * i, b + 3 * i, c + 3 * i, w + 3 * i, q + 3 * i);
}

/* A uniform grid of boxes (lo, hi: n×3 each) in cells of side h, at most max_cells of them: per
   cell the boxes that overlap it (CSR: start, items). */
typedef struct {
    double lo[3], h;
    int64_t dims[3], *start, *items;
} Grid;

static void grid_free(Grid *g)
{
    free(g->start);
    free(g->items);
}

static int64_t cell_index(const Grid *g, int k, double v)
{
    double f = floor((v - g->lo[k]) / g->h);
    return f < 0 ? 0 : f >= (double)g->dims[k] ? g->dims[k] - 1 : (int64_t)f;
}

/* the largest side of box b (lo then hi), NaN where a side is not finite */
static double box_side(const double *b)
{
    double side = fmax(fmax(b[3] - b[0], b[4] - b[1]), b[5] - b[2]);
    return isfinite(b[0]) && isfinite(b[1]) && isfinite(b[2]) && isfinite(side) ? side : NAN;
}

/* a box the grid holds: finite (a diverging trial's NaN or infinite box is left out) and no
   larger than limit */
static int kept_box(const double *b, double limit) { return box_side(b) <= limit; }

/* boxes (n×6: lo then hi), those kept_box keeps */
static int grid_build(Grid *g, int64_t n, const double *box, double h, int64_t max_cells, double limit)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    g->start = g->items = NULL;
    for (int64_t i = 0; i < n; i++)
        if (kept_box(box + 6 * i, limit))
            for (int k = 0; k < 3; k++) lo[k] = fmin(lo[k], box[6 * i + k]), hi[k] = fmax(hi[k], box[6 * i + 3 + k]);
    for (int k = 0; k < 3; k++)
        if (!(hi[k] >= lo[k])) lo[k] = hi[k] = 0.0; /* no finite box */
    if (!(h > 0) || !isfinite(h)) h = fmax(fmax(hi[0] - lo[0], hi[1] - lo[1]), fmax(hi[2] - lo[2], 1e-300));
    int64_t cells;
    for (;;) { /* coarser until the cells are few enough */
        cells = 1;
        for (int k = 0; k < 3; k++) {
            double d = floor((hi[k] - lo[k]) / h) + 1;
            g->dims[k] = d < 1e6 ? (int64_t)d : 1000000;
            cells *= g->dims[k];
        }
        if (cells <= max_cells) break;
        h *= 1.5;
    }
    for (int k = 0; k < 3; k++) g->lo[k] = lo[k];
    g->h = h;
    g->start = calloc((size_t)cells + 1, sizeof(int64_t));
    if (!g->start) return -1;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        for (int64_t i = 0; i < n; i++) {
            const double *b = box + 6 * i;
            if (!kept_box(b, limit)) continue;
            int64_t a0 = cell_index(g, 0, b[0]), a1 = cell_index(g, 1, b[1]), a2 = cell_index(g, 2, b[2]);
            int64_t b0 = cell_index(g, 0, b[3]), b1 = cell_index(g, 1, b[4]), b2 = cell_index(g, 2, b[5]);
            for (int64_t u = a0; u <= b0; u++)
                for (int64_t v = a1; v <= b1; v++)
                    for (int64_t w = a2; w <= b2; w++) {
                        int64_t cell = (u * g->dims[1] + v) * g->dims[2] + w;
                        if (pass == 0)
                            g->start[cell + 1]++;
                        else
                            g->items[g->start[cell]++] = i;
                    }
        }
        if (pass == 0) {
            for (int64_t c = 0; c < cells; c++) g->start[c + 1] += g->start[c];
            g->items = malloc(sizeof(int64_t) * (size_t)(g->start[cells] + 1));
            if (!g->items) return -1;
        }
    }
    for (int64_t c = cells; c > 0; c--) g->start[c] = g->start[c - 1]; /* the fill moved each start to its end */
    g->start[0] = 0;
    return 0;
}

/* Triangle t (its box b) for point p: its closest point where it is nearer than best so far, or
   as near with a lower index (the lower triangle at a shared edge or corner) */
static void consider(int64_t t, const double *b, const double *p, const double *verts, const int64_t *tris,
                     double *best, int64_t *found, double *q, double *bary)
{
    double gap = 0.0, w[3], qt[3];
    for (int k = 0; k < 3; k++) {
        double out = fmax(b[k] - p[k], p[k] - b[3 + k]);
        if (out > 0) gap += out * out;
    }
    if (sqrt(gap) > *best) return;
    const int64_t *corner = tris + 3 * t;
    double d = closest_point(p, verts + 3 * corner[0], verts + 3 * corner[1], verts + 3 * corner[2], w, qt);
    if (d < *best || (d == *best && (*found < 0 || t < *found))) {
        *best = d, *found = t;
        for (int k = 0; k < 3; k++) q[k] = qt[k], bary[k] = w[k];
    }
}

/* For points x (n×3), each within its radius (NULL: any distance) of triangles (nt×3 of verts):
   the closest triangle (tri: −1 where none lies within the radius; ties: the lower index), the
   closest point q on it and its barycentric weights. Grid cells about a triangle's size, searched
   in rings of cells outward from the point's until a ring lies farther than the nearest found.
   A few triangles far larger than the rest (a floor in the same mesh as a body) would make every
   cell coarse: those are tried for every point instead. Returns 0, or −1 out of memory. */
EXPORT int64_t dc_closest_points(int64_t n, const double *x, const double *radius, const double *verts, int64_t nt,
                                 const int64_t *tris, int64_t *tri, double *q, double *bary)
{
    double *box = malloc(sizeof(double) * 6 * (size_t)(nt + 1));
    int64_t *seen = malloc(sizeof(int64_t) * (size_t)(nt + 1)), *large = malloc(sizeof(int64_t) * (size_t)(nt + 1));
    Grid g = {0};
    if (!box || !seen || !large) goto fail;
    double sum = 0.0, small = 0.0;
    int64_t finite = 0, kept = 0, n_large = 0;
    for (int64_t t = 0; t < nt; t++) {
        double *b = box + 6 * t;
        for (int k = 0; k < 3; k++) b[k] = INFINITY, b[3 + k] = -INFINITY;
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++) {
                double v = verts[3 * tris[3 * t + j] + k];
                b[k] = fmin(b[k], v), b[3 + k] = fmax(b[3 + k], v);
            }
        if (box_side(b) >= 0) sum += box_side(b), finite++;
        seen[t] = -1;
    }
    /* the cells: the mean size of the triangles up to LARGE times the mean; larger ones left to
       every point where they are few, else kept in the grid */
    const double LARGE = 8.0;
    double mean = finite ? sum / (double)finite : 0.0;
    for (int64_t t = 0; t < nt; t++)
        if (box_side(box + 6 * t) <= LARGE * mean) small += box_side(box + 6 * t), kept++;
    double h = kept ? small / (double)kept : mean, limit = LARGE * h;
    for (int64_t t = 0; t < nt; t++)
        if (box_side(box + 6 * t) > limit) large[n_large++] = t;
    if (n_large > 16) h = mean, limit = INFINITY, n_large = 0;
    if (grid_build(&g, nt, box, h, 8 * nt + 64, limit)) goto fail;
    int64_t rings = g.dims[0] > g.dims[1] ? g.dims[0] : g.dims[1];
    rings = rings > g.dims[2] ? rings : g.dims[2];
    for (int64_t i = 0; i < n; i++) {
        const double *p = x + 3 * i;
        double best = radius ? radius[i] : INFINITY;
        int64_t found = -1, c[3];
        tri[i] = -1;
        for (int k = 0; k < 3; k++) q[3 * i + k] = bary[3 * i + k] = 0.0;
        if (!(isfinite(p[0]) && isfinite(p[1]) && isfinite(p[2])) || !(best >= 0)) continue;
        for (int64_t l = 0; l < n_large; l++)
            consider(large[l], box + 6 * large[l], p, verts, tris, &best, &found, q + 3 * i, bary + 3 * i);
        for (int k = 0; k < 3; k++) c[k] = cell_index(&g, k, p[k]);
        /* ring r holds the cells r cells from c (Chebyshev); beyond the ring r − 1 all are at
           least (r − 1)·h away, the point inside c or outside the grid beyond it */
        for (int64_t r = 0; r <= rings && (double)(r - 1) * g.h <= best; r++) {
            int64_t u0 = c[0] - r > 0 ? c[0] - r : 0, u1 = c[0] + r < g.dims[0] ? c[0] + r : g.dims[0] - 1;
            int64_t v0 = c[1] - r > 0 ? c[1] - r : 0, v1 = c[1] + r < g.dims[1] ? c[1] + r : g.dims[1] - 1;
            for (int64_t u = u0; u <= u1; u++)
                for (int64_t v = v0; v <= v1; v++) {
                    int rim = r == 0 || llabs(u - c[0]) == r || llabs(v - c[1]) == r;
                    for (int64_t w = c[2] - r; w <= c[2] + r; w += rim ? 1 : 2 * r) {
                        if (w < 0 || w >= g.dims[2]) continue;
                        int64_t cell = (u * g.dims[1] + v) * g.dims[2] + w;
                        for (int64_t s = g.start[cell]; s < g.start[cell + 1]; s++) {
                            int64_t t = g.items[s];
                            if (seen[t] == i) continue;
                            seen[t] = i;
                            consider(t, box + 6 * t, p, verts, tris, &best, &found, q + 3 * i, bary + 3 * i);
                        }
                    }
                }
        }
        tri[i] = found;
    }
    grid_free(&g);
    free(box);
    free(seen);
    free(large);
    return 0;
fail:
    grid_free(&g);
    free(box);
    free(seen);
    free(large);
    return -1;
}

/* The (vertex, triangle) pairs of the listed triangles (tri_idx, of tris over x) and vertices
   (vert_idx) whose vertex lies within radius of the triangle's centroid beyond its reach (its
   largest centroid-to-corner distance): the broad phase of the cloth against itself. A grid of
   the vertices in cells of the radius plus the largest reach. Writes up to cap pairs (vertex,
   triangle: indices into x and tris) and returns how many there are (more than cap: call again
   with room for them), or −1 out of memory. */
EXPORT int64_t dc_near_pairs(const double *x, const int64_t *tris, int64_t nt, const int64_t *tri_idx, int64_t nv,
                             const int64_t *vert_idx, double radius, int64_t cap, int64_t *out_vertex,
                             int64_t *out_triangle)
{
    if (nt == 0 || nv == 0) return 0;
    double *centre = malloc(sizeof(double) * 4 * (size_t)nt), *box = malloc(sizeof(double) * 6 * (size_t)nv);
    Grid g = {0};
    int64_t count = -1;
    if (!centre || !box) goto done;
    double far = 0.0;
    for (int64_t i = 0; i < nt; i++) {
        const int64_t *corner = tris + 3 * tri_idx[i];
        const double *a = x + 3 * corner[0], *b = x + 3 * corner[1], *c = x + 3 * corner[2];
        double *m = centre + 4 * i;
        for (int k = 0; k < 3; k++) m[k] = (a[k] + b[k] + c[k]) / 3;
        m[3] = 0.0;
        for (int j = 0; j < 3; j++) {
            const double *v = x + 3 * corner[j];
            double d0 = v[0] - m[0], d1 = v[1] - m[1], d2 = v[2] - m[2];
            m[3] = fmax(m[3], sqrt(d0 * d0 + d1 * d1 + d2 * d2));
        }
        far = fmax(far, m[3]);
    }
    for (int64_t j = 0; j < nv; j++)
        for (int k = 0; k < 3; k++) box[6 * j + k] = box[6 * j + 3 + k] = x[3 * vert_idx[j] + k];
    if (grid_build(&g, nv, box, radius + far, 4 * nv + 64, INFINITY)) goto done;
    count = 0;
    for (int64_t i = 0; i < nt; i++) {
        const double *m = centre + 4 * i;
        double r = radius + m[3];
        if (!(isfinite(m[0]) && isfinite(m[1]) && isfinite(m[2]) && isfinite(r))) continue;
        int64_t a[3], b[3];
        for (int k = 0; k < 3; k++) a[k] = cell_index(&g, k, m[k] - r), b[k] = cell_index(&g, k, m[k] + r);
        for (int64_t u = a[0]; u <= b[0]; u++)
            for (int64_t v = a[1]; v <= b[1]; v++)
                for (int64_t w = a[2]; w <= b[2]; w++) {
                    int64_t cell = (u * g.dims[1] + v) * g.dims[2] + w;
                    for (int64_t s = g.start[cell]; s < g.start[cell + 1]; s++) {
                        int64_t vertex = vert_idx[g.items[s]];
                        const double *p = x + 3 * vertex;
                        double d0 = m[0] - p[0], d1 = m[1] - p[1], d2 = m[2] - p[2];
                        if (sqrt(d0 * d0 + d1 * d1 + d2 * d2) <= r) {
                            if (count < cap) out_vertex[count] = vertex, out_triangle[count] = tri_idx[i];
                            count++;
                        }
                    }
                }
    }
done:
    grid_free(&g);
    free(centre);
    free(box);
    return count;
}
