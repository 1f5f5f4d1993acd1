"""Symmetric 3×3-block systems on a fixed sparsity pattern: refill, multiply, factorize, solve.

The pattern of a mesh never changes (contact only adds to diagonal blocks), so the map from
block entries to storage is built once and every refill is one `np.bincount`. Small meshes use
LAPACK's banded Cholesky after a reverse Cuthill–McKee ordering (cheap factorizations with a
positive-definiteness verdict); larger ones use SuperLU in symmetric mode, whose bandwidth-free
fill wins once the band grows with the mesh side.
"""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import blas, lapack
from scipy.sparse.csgraph import reverse_cuthill_mckee

# banded Cholesky is chosen while dofs·bandwidth² stays below this (≈ a few ms per factorization)
BANDED_WORK_LIMIT = 3e9


class Factor:
    """A factorization: solve(b), whether the factored matrix was positive definite, its bytes."""

    def __init__(self, solve, positive_definite, nbytes=0):
        self.solve = solve
        self.positive_definite = positive_definite
        self.nbytes = nbytes


class BlockSystem:
    """Matrix over nv free vertices (3 dofs each) with blocks on the diagonal and on `pairs`.

    Values are given as diagonal blocks (nv,3,3) and one symmetric block per pair (P,3,3),
    used for both (a,b) and (b,a).
    """

    def __init__(self, nv, pairs, backend=None):
        self.nv, self.ndof = nv, 3 * nv
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        graph = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(nv, nv)).tocsr()
        order = reverse_cuthill_mckee((graph + graph.T).tocsr(), symmetric_mode=True)
        rank = np.empty(nv, np.int64)
        rank[order] = np.arange(nv)
        span = np.abs(rank[pairs[:, 0]] - rank[pairs[:, 1]]).max() if len(pairs) else 0
        self.kd = 3 * int(span) + 2
        if backend is None:
            backend = "banded" if self.ndof * self.kd ** 2 <= BANDED_WORK_LIMIT else "sparse"
        self.backend = backend
        r, c = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        r, c = r.ravel(), c.ravel()
        if backend == "banded":
            # LAPACK lower band storage, column-major: A[i, j] (i >= j) at (i - j) + j·(kd + 1)
            self.perm = (3 * order[:, None] + np.arange(3)).ravel()  # storage dof -> natural dof
            self.size = (self.kd + 1) * self.ndof
            dummy = self.size

            def slot(rows, cols):
                return np.where(rows >= cols, rows - cols + cols * (self.kd + 1), dummy)

            va = rank[np.arange(nv)]
            diag = slot(3 * va[:, None] + r, 3 * va[:, None] + c)
            hi = np.maximum(rank[pairs[:, 0]], rank[pairs[:, 1]])[:, None]
            lo = np.minimum(rank[pairs[:, 0]], rank[pairs[:, 1]])[:, None]
            lower = slot(3 * hi + r, 3 * lo + c)
            self.slots = np.concatenate([diag.ravel(), lower.ravel(), np.full(lower.size, dummy)])
        else:
            self.perm = None
            rows = np.concatenate([(3 * np.arange(nv)[:, None] + r).ravel(),
                                   (3 * pairs[:, :1] + r).ravel(), (3 * pairs[:, 1:] + r).ravel()])
            cols = np.concatenate([(3 * np.arange(nv)[:, None] + c).ravel(),
                                   (3 * pairs[:, 1:] + c).ravel(), (3 * pairs[:, :1] + c).ravel()])
            keys = rows * self.ndof + cols
            uniq = np.unique(keys)
            self.slots = np.searchsorted(uniq, keys)
            self.size = len(uniq)
            self.indices = (uniq % self.ndof).astype(np.int32)
            self.indptr = np.searchsorted(uniq // self.ndof, np.arange(self.ndof + 1)).astype(np.int32)

    def assembler(self, ends):
        """Sparse map from [spring blocks (S,3,3), diagonal blocks (nv,3,3)] to storage data.

        ends (S,2) holds each spring's free-vertex indices (-1 for a pinned end); a spring block
        K adds to the diagonal blocks of its free ends and −K to their pair block, so one sparse
        product refills the whole matrix.
        """
        nv, e9 = self.nv, np.arange(9)
        n_pairs = (len(self.slots) - 9 * nv) // 18
        rows, cols, vals = [], [], []
        for end in ends.T:
            ok = np.flatnonzero(end >= 0)
            cols.append((ok[:, None] * 9 + e9).ravel())
            rows.append(self.slots[(end[ok][:, None] * 9 + e9).ravel()])
            vals.append(np.ones(cols[-1].size))
        both = np.flatnonzero((ends >= 0).all(axis=1))
        assert len(both) == n_pairs
        for offset in (9 * nv, 9 * nv + 9 * n_pairs):
            cols.append((both[:, None] * 9 + e9).ravel())
            rows.append(self.slots[offset + np.arange(9 * n_pairs)])
            vals.append(-np.ones(cols[-1].size))
        cols.append(9 * len(ends) + np.arange(9 * nv))
        rows.append(self.slots[: 9 * nv])
        vals.append(np.ones(9 * nv))
        rows, cols, vals = map(np.concatenate, (rows, cols, vals))
        keep = rows < self.size  # the upper triangle of banded storage is not stored
        return sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(self.size, 9 * (len(ends) + nv)))

    def matvec(self, data, x):
        if self.backend == "banded":
            y = np.empty_like(x)
            ab = data.reshape(self.kd + 1, self.ndof, order="F")
            y[self.perm] = blas.dsbmv(self.kd, 1.0, ab, x[self.perm], lower=1)
            return y
        return self.matrix(data) @ x

    def matrix(self, data):
        if self.backend == "banded":
            raise NotImplementedError("banded storage has no sparse matrix view")
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.ndof, self.ndof))

    def factor(self, data):
        """Factorize; a non-positive-definite matrix still gets a (LU) factor where possible."""
        if self.backend == "banded":
            ab = data.reshape(self.kd + 1, self.ndof, order="F")
            chol, info = lapack.dpbtrf(ab, lower=1)
            if info == 0:
                perm = self.perm

                def solve(b):
                    out = np.empty_like(b)
                    x, _ = lapack.dpbtrs(chol, b[perm], lower=1)
                    out[perm] = x
                    return out
                return Factor(solve, True, chol.nbytes)
            return Factor(None, False)
        csc = sp.csc_matrix((data, self.indices, self.indptr), shape=(self.ndof, self.ndof))
        try:
            lu = spla.splu(csc, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                           options=dict(SymmetricMode=True))
        except RuntimeError:  # exactly singular
            return Factor(None, False)
        # without pivoting, PD ⇔ every pivot of the symmetric elimination is positive
        pd = bool((lu.perm_r == lu.perm_c).all() and (lu.U.diagonal() > 0).all())
        return Factor(lu.solve, pd, 12 * (lu.L.nnz + lu.U.nnz))  # float64 value + int32 index

    def factor_general(self, data):
        """LU of a possibly indefinite matrix (adjoint fallback)."""
        if self.backend == "banded":
            ab = data.reshape(self.kd + 1, self.ndof, order="F")
            # expand the lower band to a sparse matrix in storage order, then back to natural order
            rows, cols, vals = [], [], []
            for d in range(self.kd + 1):
                j = np.arange(self.ndof - d)
                rows.append(j + d)
                cols.append(j)
                vals.append(ab[d, : self.ndof - d])
            rows, cols, vals = map(np.concatenate, (rows, cols, vals))
            low = sp.coo_matrix((vals, (self.perm[rows], self.perm[cols])), shape=(self.ndof,) * 2)
            mat = (low + low.T - sp.diags(low.diagonal())).tocsc()
        else:
            mat = sp.csc_matrix((data, self.indices, self.indptr), shape=(self.ndof, self.ndof))
        return spla.splu(mat).solve
