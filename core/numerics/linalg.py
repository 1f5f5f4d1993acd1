"""Symmetric 3×3-block systems on a fixed sparsity pattern: refill, multiply, factorize, solve.

The pattern of a mesh never changes (contact only adds to diagonal blocks), so the map from
block entries to storage is built once and every refill is one sparse product. Small meshes use
LAPACK's banded Cholesky after a reverse Cuthill–McKee ordering (cheap factorizations with a
positive-definiteness verdict); larger ones use SuperLU in symmetric mode, whose bandwidth-free
fill wins once the band grows with the mesh side.

The banded factor is computed in single precision: it takes 0.6× the time of a double one and
its solves read half the memory. It serves as the preconditioner of a conjugate-gradient solve
on the double-precision matrix (Factor.exact is False), which reaches a relative residual of
1e-5 in one iteration and 1e-12 in three on a 64×64 cloth. It factors the matrix scaled to a
unit diagonal, whose entries stay within ±1 where it is positive definite: within single
precision's range however stiff a term is. A matrix solved many times over (a step's in the
gradient passes) is factored in double precision instead: one solve then needs no refinement.
"""

import weakref

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import lapack
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .keys import sorted_unique
from .scatter import scatter_add

try:  # numpy's switch for asking the kernel for huge pages (numpy ≥ 1.20, private)
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:
    _set_madvise_hugepage = None

# released band factors kept for reuse: factoring into fresh memory faults in every page (a 64×64
# cloth's factorization took 35 instead of 30 ms, 60 where numpy asked for huge pages)
POOL_SIZE = 2

# banded Cholesky is chosen while dofs·bandwidth² stays below this: up to a 128×128 grid
# (2.9e10, 0.35 s per single-precision factorization against 2.5 s for SuperLU)
BANDED_WORK_LIMIT = 5e10
# a Coupled matrix (self-contact) is factored banded, in double precision after a reverse
# Cuthill–McKee ordering of its own graph, while dofs·bandwidth² stays below this, else by
# SuperLU: a folded 16×16 cloth's (768 dofs, bandwidth ~100) in 0.5 ms against SuperLU's 2.5; a
# 64×64 one's band would take seconds against SuperLU's 55 ms
COUPLED_BANDED_LIMIT = 2e8
# the band is factored in double precision where a dof is this much stiffer than its mass holds it
# (BlockSystem.stiffness): beyond it a single-precision factor preconditions CG too poorly (a free
# 64×64 plate of bending rigidity 3 N·m, 1.3e7 at 1/24 s, failed to solve; 4.2e6 still solved)
SINGLE_STIFFNESS = 1e6


def _fresh_band(band):
    """An empty array shaped as band, without numpy's request for huge pages: on a machine whose
    memory is fragmented the kernel compacts it at the first touch of such pages (Linux; numpy
    asks nowhere else)."""
    if _set_madvise_hugepage is None:
        return np.empty_like(band, order="F")
    was = _set_madvise_hugepage(False)
    try:
        return np.empty_like(band, order="F")
    finally:
        _set_madvise_hugepage(was)


class Factor:
    """A factorization: solve(b), whether the factored matrix was positive definite, its bytes,
    and whether solve is exact to double precision (else: refine it by PCG)."""

    def __init__(self, solve, positive_definite, nbytes=0, exact=True):
        self.solve = solve
        self.positive_definite = positive_definite
        self.nbytes = nbytes
        self.exact = exact


class Coupled:
    """A matrix whose terms also couple vertices outside its BlockSystem's pattern (self-contact
    pairs, new every step): the pattern's storage data and a sparse matrix over the free dofs of
    the blocks it cannot hold. It is factored whole (BlockSystem.coupled_factor: banded in its own
    order while small, else SuperLU, ~5× a banded factorization at 64×64), and that factorization
    preconditions PCG on the next ones: what a pattern-only factorization gave stalled past 60 CG
    iterations on a folding cloth."""

    def __init__(self, data, extra):
        self.data, self.extra = data, extra
        self._factor = None

    @property
    def nbytes(self):
        return self.data.nbytes + self.extra.data.nbytes + self.extra.indices.nbytes

    def plus_diagonal_data(self, more):
        """The same couplings over data + more."""
        return Coupled(self.data + more, self.extra)

    def factor(self, system):
        """Its own factorization (Factor), made once."""
        if self._factor is None:
            self._factor = system.coupled_factor(system.matrix(self))
        return self._factor


class BlockSystem:
    """Matrix over nv free vertices (3 dofs each) with 3×3 blocks on the diagonal and at the
    free-vertex pairs `pairs`, (a,b) and (b,a); terms refill it through `assembler` (pair blocks)
    and `add_diagonal`.
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
            backend = "banded" if self.ndof * self.kd**2 <= BANDED_WORK_LIMIT else "sparse"
        self.backend = backend
        # storage is the full symmetric CSR pattern in natural dof order: products and refills
        # touch only real entries (a 64×64 cloth's band holds 4.7M slots for 0.24M entries)
        r, c = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        r, c = r.ravel(), c.ravel()
        rows = np.concatenate(
            [(3 * np.arange(nv)[:, None] + r).ravel(), (3 * pairs[:, :1] + r).ravel(), (3 * pairs[:, 1:] + r).ravel()]
        )
        cols = np.concatenate(
            [(3 * np.arange(nv)[:, None] + c).ravel(), (3 * pairs[:, 1:] + c).ravel(), (3 * pairs[:, :1] + c).ravel()]
        )
        keys = rows * self.ndof + cols
        self.keys = sorted_unique(keys)
        self.size = len(self.keys)
        self.indices = (self.keys % self.ndof).astype(np.int32)
        self.indptr = np.searchsorted(self.keys // self.ndof, np.arange(self.ndof + 1)).astype(np.int32)
        # the pattern's 3×3 blocks, sorted (block row · nv + block column), and where each block row
        # starts among them: a block's nine slots follow from its rank in its row
        self.block_keys = sorted_unique(self.keys // self.ndof // 3 * nv + self.keys % self.ndof // 3)
        self.block_ptr = np.searchsorted(self.block_keys // nv, np.arange(nv + 1))
        self.diag_slots = self.slots(np.arange(nv), np.arange(nv))
        # one matrix object whose values are swapped in for products: building one per product
        # (format checks) cost as much as the product on a 20×20 cloth
        self._product = self.matrix(np.zeros(self.size))
        if backend == "banded":
            # LAPACK lower band storage after the ordering, column-major: A[i, j] (i >= j) at
            # (i - j) + j·(kd + 1). The band is refilled in place: slots outside the pattern stay 0.
            self.perm = (3 * order[:, None] + np.arange(3)).ravel()  # storage dof -> natural dof
            dof_rank = np.empty(self.ndof, np.int64)
            dof_rank[self.perm] = np.arange(self.ndof)
            i, j = dof_rank[self.keys // self.ndof], dof_rank[self.keys % self.ndof]
            self.lower = np.flatnonzero(i >= j)
            self.band_slots = (i - j + j * (self.kd + 1))[self.lower]
            # the storage slots of the diagonal, and each lower entry's natural row and column
            self.diag = np.searchsorted(self.keys, np.arange(self.ndof) * (self.ndof + 1))
            self.lower_row, self.lower_col = np.divmod(self.keys[self.lower], self.ndof)
            self.band = np.zeros((self.kd + 1) * self.ndof, np.float32)
            # the entries along their row's own axis, and their rows: a row's sum over them is its
            # product with the rigid translation along that axis (stiffness)
            rows_of = np.repeat(np.arange(self.ndof), np.diff(self.indptr))
            self.along = np.flatnonzero(self.indices % 3 == rows_of % 3)
            self.along_rows = rows_of[self.along]
            self._pool = []

    def slots(self, a, b):
        """Storage positions (P,9) of the 3×3 blocks (a, b) of free vertices; all in the pattern."""
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        block = np.minimum(np.searchsorted(self.block_keys, a * self.nv + b), len(self.block_keys) - 1)
        assert (self.block_keys[block] == a * self.nv + b).all(), "a block outside the pattern"
        # row 3a + r holds the block's three entries at 3·(its rank in block row a) past its start
        # (a search per block, not per entry: 9× fewer, most of a cloth's set-up)
        r, c = np.divmod(np.arange(9), 3)
        return self.indptr[3 * a[:, None] + r] + 3 * (block - self.block_ptr[a])[:, None] + c

    def assembler(self, ends):
        """Sparse map from pair blocks (P,3,3) to storage data, with sorted indices.

        ends (P,2) holds each pair's free-vertex indices (-1 for a pinned vertex); a block K adds
        to the diagonal blocks of its free ends and −K to the blocks between them, like a
        spring's Hessian, so one sparse product refills all of a kind of term.
        """
        rows, columns, vals = self._assembly(ends)
        return sp.csr_matrix((vals, (rows, columns)), shape=(self.size, 9 * len(ends))).sorted_indices()

    def isotropic(self, ends, kappa):
        """The storage data of pair blocks κ·I₃ (kappa (P,)) at free-vertex pairs ends (P,2; −1 pinned),
        as assembler(ends) @ (κ·I₃).ravel() gives it to the bit (each entry sums its pairs in their
        order, as the map's sorted columns do), without building the map: 11 of a 408-vertex
        cloth's 16 ms of set-up went to building the hinges' map for that one product."""
        ends = np.asarray(ends, dtype=np.int64)
        slots = np.full((len(ends), 4, 3), -1, np.int64)  # per pair: diagonal a, diagonal b, (a, b), (b, a)
        diagonal = [0, 4, 8]  # a 3×3 block's diagonal among its nine entries
        for k, end in enumerate(ends.T):
            ok = end >= 0
            slots[ok, k] = self.diag_slots[end[ok]][:, diagonal]
        both = (ends >= 0).all(axis=1)
        for k, (a, b) in enumerate(((0, 1), (1, 0)), start=2):
            slots[both, k] = self.slots(ends[both, a], ends[both, b])[:, diagonal]
        signs = np.array([1.0, 1.0, -1.0, -1.0])
        values = np.asarray(kappa, dtype=np.float64)[:, None, None] * signs[None, :, None] * np.ones(3)
        kept = slots >= 0
        return np.bincount(slots[kept], weights=values[kept], minlength=self.size)

    def _assembly(self, ends):
        """The entries (storage slot, block entry, ±1) of assembler's map."""
        ends = np.asarray(ends, dtype=np.int64)
        cols = np.arange(9 * len(ends)).reshape(-1, 9)
        rows, columns, vals = [], [], []
        for end in ends.T:
            ok = end >= 0
            rows.append(self.diag_slots[end[ok]])
            columns.append(cols[ok])
            vals.append(np.ones(rows[-1].size))
        both = (ends >= 0).all(axis=1)
        for a, b in ((0, 1), (1, 0)):
            rows.append(self.slots(ends[both, a], ends[both, b]))
            columns.append(cols[both])
            vals.append(-np.ones(rows[-1].size))
        return tuple(np.concatenate([v.ravel() for v in arrs]) for arrs in (rows, columns, vals))

    def triangle_slots(self, tris):
        """Storage positions (T,9,9) of the nine 3×3 blocks (k, l) among each triangle's free
        corners (k, l = 0..2, row-major), −1 where a corner is pinned (tris in free indices,
        −1 for pinned): every triangle's edges are in the pattern."""
        row, col = np.divmod(np.arange(9), 3)
        rows, cols = tris[:, row], tris[:, col]
        ok = (rows >= 0) & (cols >= 0)
        out = np.full(rows.shape + (9,), -1, np.int64)
        out[ok] = self.slots(rows[ok], cols[ok])
        return out

    def coupling(self, rows, cols, blocks):
        """The sparse matrix (dofs × dofs, 3×3 blocks) of blocks (B,3,3) at free vertices (rows,
        cols) and their transposes at (cols, rows): couplings outside the pattern. Assembled by
        block, repeats summed (a scalar COO of the same was 3× slower to convert)."""
        if not len(rows):
            return sp.bsr_matrix((self.ndof, self.ndof), blocksize=(3, 3))
        key = np.r_[rows, cols] * self.nv + np.r_[cols, rows]
        order = np.argsort(key, kind="stable")
        key, values = key[order], np.concatenate([blocks, blocks.transpose(0, 2, 1)])[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        summed = np.add.reduceat(values, first, axis=0)
        rows_u, cols_u = np.divmod(key[first], self.nv)
        indptr = np.r_[0, np.cumsum(np.bincount(rows_u, minlength=self.nv))]
        return sp.bsr_matrix((summed, cols_u, indptr), shape=(self.ndof, self.ndof))

    def add_diagonal(self, data, rows, blocks):
        """data += the diagonal blocks (len(rows),3,3) at free vertices rows (repeats add up)."""
        scatter_add(data, self.diag_slots[rows], blocks.reshape(-1, 9))

    def matvec(self, data, x):
        if isinstance(data, Coupled):
            return self.matvec(data.data, x) + data.extra @ x
        self._product.data = data
        return self._product @ x

    def matrix(self, data):
        if isinstance(data, Coupled):
            return self.matrix(data.data) + data.extra
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.ndof, self.ndof))

    def factor(self, data, double=False):
        """Factorize; a non-positive-definite matrix still gets a (LU) factor where possible. A
        Coupled matrix gets its pattern part's, marked inexact. double: a banded factor in double
        precision whatever the stiffness (a solve then needs no refinement: for matrices solved
        many times over)."""
        if isinstance(data, Coupled):
            return data.factor(self)
        if self.backend == "banded":
            # D^-½·A·D^-½ (D = diag A) is factored: its diagonal is 1 and its other entries are within ±1
            # where A is positive definite, so single precision holds it however stiff A is. A
            # diagonal that is not positive, or an entry beyond ±1 (a negative 2×2 minor), is not.
            diag = data[self.diag]
            if not np.all((diag > 0) & (diag < np.inf)):
                return Factor(None, False)
            inv = 1.0 / np.sqrt(diag)
            scaled = data[self.lower] * inv[self.lower_row] * inv[self.lower_col]
            if not np.abs(scaled).max() <= 1.0 + 1e-9:  # (the diagonal's 1 to rounding; NaN fails too)
                return Factor(None, False)
            double = double or self.stiffness(data, diag) > SINGLE_STIFFNESS
            if double:
                chol, info = self._double_cholesky(scaled)
            else:
                self.band[self.band_slots] = scaled
                chol, info = self._banded_cholesky()
            if info == 0:
                perm, inv = self.perm, inv[self.perm]
                trs = lapack.dpbtrs if double else lapack.spbtrs

                def solve(b):
                    out = np.zeros_like(b)
                    rhs = b[perm] * inv
                    scale = np.abs(rhs).max()  # residuals shrink toward float32's underflow
                    if scale > 0:
                        x, _ = trs(chol, (rhs / scale).astype(chol.dtype), lower=1)
                        out[perm] = x * (scale * inv)
                    return out

                return Factor(solve, True, chol.nbytes, exact=False)
            return Factor(None, False)
        return self.sparse_factor(self.matrix(data))

    def coupled_factor(self, matrix):
        """A Coupled matrix's factorization (its sparse matrix): LAPACK's banded Cholesky after
        ordering its graph where the band is narrow enough (COUPLED_BANDED_LIMIT), else, or where
        it is not positive definite, SuperLU's."""
        if self.ndof * self.kd**2 > COUPLED_BANDED_LIMIT:  # its band is no narrower than the pattern's
            return self.sparse_factor(matrix)
        csr = matrix.tocsr()
        csr.sum_duplicates()
        order = reverse_cuthill_mckee(csr, symmetric_mode=True)
        rank = np.empty(self.ndof, np.int64)
        rank[order] = np.arange(self.ndof)
        coo = csr.tocoo()
        i, j = rank[coo.row], rank[coo.col]
        lower = i >= j
        kd = int((i - j)[lower].max())
        if self.ndof * kd**2 > COUPLED_BANDED_LIMIT:
            return self.sparse_factor(matrix)
        band = np.zeros((kd + 1, self.ndof), order="F")
        band[(i - j)[lower], j[lower]] = coo.data[lower]
        chol, info = lapack.dpbtrf(band, lower=1, overwrite_ab=1)
        if info != 0:  # not positive definite: SuperLU's LU, as for any such matrix
            return self.sparse_factor(matrix)

        def solve(b):
            out = np.empty_like(b)
            out[order] = lapack.dpbtrs(chol, b[order], lower=1)[0]
            return out

        return Factor(solve, True, chol.nbytes)

    def sparse_factor(self, matrix):
        """SuperLU of a symmetric sparse matrix (dofs × dofs) in symmetric mode."""
        try:
            lu = spla.splu(
                matrix.tocsc(),
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options=dict(SymmetricMode=True),
            )
        except RuntimeError:  # exactly singular
            return Factor(None, False)
        # without pivoting, PD ⇔ every pivot of the symmetric elimination is positive
        pd = bool((lu.perm_r == lu.perm_c).all() and (lu.U.diagonal() > 0).all())
        return Factor(lu.solve, pd, 12 * (lu.L.nnz + lu.U.nnz))  # float64 value + int32 index

    def stiffness(self, data, diag):
        """The largest ratio of a diagonal entry A_ii to the sum of its row over the dofs along
        its axis: springs, hinges and the rest resist no translation, so that sum is the dof's mass
        (with its contact), and the ratio 1 + h²·K_ii/m. A sum that is not positive is no mass: the
        matrix is indefinite there, as Cholesky will tell."""
        along = np.bincount(self.along_rows, weights=data[self.along], minlength=self.ndof)  # in the rows' order
        held = along > 0
        return float((diag[held] / along[held]).max(initial=0.0))

    def _double_cholesky(self, scaled):
        """LAPACK's double-precision factor of the scaled band (lower entries scaled)."""
        band = np.zeros((self.kd + 1) * self.ndof)
        band[self.band_slots] = scaled
        return lapack.dpbtrf(band.reshape(self.kd + 1, self.ndof, order="F"), lower=1, overwrite_ab=1)

    def _banded_cholesky(self):
        """LAPACK's factor of the band, in place in a pooled buffer; the returned view gives the
        buffer back to the pool when the last solve that reads it is gone."""
        band = self.band.reshape(self.kd + 1, self.ndof, order="F")
        base = self._pool.pop() if self._pool else _fresh_band(band)
        np.copyto(base, band)
        chol, info = lapack.spbtrf(base, lower=1, overwrite_ab=1)
        if info != 0 or not np.shares_memory(chol, base):  # failed, or LAPACK's wrapper copied
            self._release(base)
            return chol, info
        chol = base.view()
        weakref.finalize(chol, self._release, base)
        return chol, info

    def _release(self, base):
        if len(self._pool) < POOL_SIZE:
            self._pool.append(base)

    def factor_general(self, data):
        """LU of a possibly indefinite matrix (adjoint fallback)."""
        return spla.splu(self.matrix(data).tocsc()).solve
