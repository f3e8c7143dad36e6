"""Benchmark: KernelColumns.to_csr (column blocks placed into CSR, each freed once placed) against
scipy's one-matrix tocsr + sort_indices, side by side in one process.

Synthetic kernels shaped like the 200 x 200 build's (17,800 outputs in blocks of 256 columns,
contiguous runs of rows); checks the two CSRs are identical.  The point of to_csr is memory
(one copy of the kernels instead of two); this shows what it costs in time.

Run:  python bench/eikonal_csr.py [--per 4000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geopriv.mechanisms.eikonal.kernels import KernelColumns  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=40_000)
    ap.add_argument("--outputs", type=int, default=17_800)
    ap.add_argument("--per", type=int, default=4_000, help="entries per output column")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    n, M, per = args.inputs, args.outputs, args.per
    blocks = []
    for m0 in range(0, M, 256):
        w = min(256, M - m0)
        starts = rng.integers(0, n - per, size=w)
        rows = (starts[:, None] + np.arange(per)[None, :]).astype(np.int32).ravel()
        ip = np.arange(w + 1, dtype=np.int64) * per
        blocks.append((m0, sp.csc_matrix((rng.random(w * per).astype(np.float32), rows, ip), shape=(n, w))))
    big = sp.hstack([b for _, b in blocks], format="csc")
    print(f"{big.nnz:,} entries")
    for _ in range(3):
        t0 = time.perf_counter()
        ref = big.tocsr()
        ref.sort_indices()
        t1 = time.perf_counter()
        ip, idx, d = KernelColumns(list(blocks), (n, M)).to_csr(threads=args.threads)
        t2 = time.perf_counter()
        print(f"scipy tocsr {t1 - t0:.2f} s | KernelColumns.to_csr {t2 - t1:.2f} s | ratio {(t2 - t1) / (t1 - t0):.2f}")
        assert np.array_equal(ip, ref.indptr) and np.array_equal(idx, ref.indices) and np.array_equal(d, ref.data)
        del ref, ip, idx, d


if __name__ == "__main__":
    main()
