"""The one place geopriv makes random number generators.

* ``rng=None`` (the default, and the only choice for real releases): a fresh
  :class:`numpy.random.Generator` on PCG64DXSM seeded with 128 bits from the operating
  system's entropy source (:class:`numpy.random.SeedSequence` reads ``os.urandom``).
* an ``int`` or a :class:`numpy.random.SeedSequence`: reproducible output for tests and demos.
* a :class:`numpy.random.Generator`: reproducible if the caller seeded it; a release takes four
  words of it (advancing it) as its seed material.

numpy's global state (``np.random.seed``) is never read or touched.  Whether output is
reproducible is recorded in the result's provenance as ``seeded``; the seed itself is *not*
recorded, because anyone holding it could regenerate the noise and subtract it.

A seed replays a release only for the same data and the same public parameters.  Every
release binds its randomness once, before drawing, with :meth:`RandomSource.bind`: for a seed,
the generator it draws from is derived from the seed *and* a digest (BLAKE2b-256, see
:func:`release_digest`) of the whole input it answers (every row it reads: the index, the
geometries, the columns it reads, their dtypes and the CRS; or a release's sufficient
statistic, such as its true counts) and of its public parameters (the provenance fields).  So the same seed on two different datasets (shifted points, one person
removed, one row moved) draws independent noise: the difference of two seeded outputs is never
a difference of true values.  ``rng=None`` (OS entropy) is fresh for every release and is not
hashed: the digest's cost (one pass over the data) is only paid when seeded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from .exceptions import ParameterError, ParameterTypeError

__all__ = ["RandomSource", "make_rng", "release_digest", "row_hashes", "rows_multiset", "frame_schema", "unordered"]

_HASH_KEY = "geopriv-seedbind"  # pandas' 16-byte hash key of the row hashes (public: a digest, not a secret)


@dataclass(frozen=True)
class RandomSource:
    """A generator and whether it is reproducible (``seeded``).

    ``material`` is what a seed contributes to :meth:`bind` (``None`` for OS entropy and for
    keyed per-row streams, which are bound already); it is never recorded.
    """

    generator: np.random.Generator
    seeded: bool
    material: bytes | None = field(default=None, repr=False, compare=False)
    from_generator: bool = field(default=False, repr=False, compare=False)

    def bind(self, *data, params=None, purpose: str = "release") -> RandomSource:
        """The generator of one release of ``data`` with public ``params``: drawn from once, by that release.

        OS entropy (and keyed per-row streams) are returned as they are.  For a seed, a new
        PCG64DXSM generator seeded with BLAKE2b(seed material, ``purpose``, :func:`release_digest`
        of ``data`` and ``params``): the same seed, data and parameters replay exactly; any change
        of the data or the parameters draws independent noise.  Pure: binding twice to the same
        data gives the same generator.
        """
        if self.material is None and self.from_generator:
            # four words of the caller's generator (advancing it, as a release always did), drawn once
            words = self.generator.integers(0, 1 << 64, size=4, dtype=np.uint64)
            object.__setattr__(self, "material", b"generator:" + words.astype("<u8").tobytes())
        if self.material is None:
            return self
        h = hashlib.blake2b(digest_size=32, person=b"geopriv-seeded")
        for part in (self.material, purpose.encode(), release_digest(*data, params=params)):
            h.update(len(part).to_bytes(8, "little") + part)
        seed = np.random.SeedSequence(int.from_bytes(h.digest(), "little"))
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(seed)), True, None)


def row_hashes(frame) -> np.ndarray:
    """One 64-bit hash per row of a (Geo)DataFrame or (Geo)Series: its index label and every value.

    Points are hashed by the bits of their (x, y, z), other geometries by their WKB (3-D, no
    SRID), other columns by :func:`pandas.util.hash_pandas_object` with a fixed key (values, not
    positions: a row's hash is the same in a partition as in the whole frame).  About 1 s per
    million points.
    """
    import pandas as pd

    if isinstance(frame, pd.Series):
        frame = frame.to_frame(name=frame.name if frame.name is not None else 0)
    n = len(frame)
    out = pd.util.hash_pandas_object(frame.index, hash_key=_HASH_KEY).to_numpy(np.uint64).copy()
    with np.errstate(over="ignore"):
        for j in range(frame.shape[1]):
            col = frame.iloc[:, j]
            try:
                if str(col.dtype) == "geometry":
                    h = _geometry_hashes(np.asarray(col.array))
                else:
                    h = pd.util.hash_pandas_object(col, index=False, hash_key=_HASH_KEY).to_numpy(np.uint64)
            except TypeError:  # unhashable values (lists, dicts): their repr
                h = pd.util.hash_pandas_object(
                    pd.Series([repr(v) for v in col], dtype=object), index=False, hash_key=_HASH_KEY
                ).to_numpy(np.uint64)
            out = (out * np.uint64(0x9E3779B97F4A7C15) + np.uint64(j + 1)) ^ h
    return out if n else np.zeros(0, np.uint64)


def _geometry_hashes(geoms: np.ndarray) -> np.ndarray:
    """One 64-bit hash per geometry, decided row by row: a point by the bits of its (x, y, z), else its WKB."""
    import pandas as pd
    import shapely

    point = (shapely.get_type_id(geoms) == 0) & ~shapely.is_empty(geoms)
    out = np.empty(len(geoms), np.uint64)
    if point.any():
        xyz = np.ascontiguousarray(shapely.get_coordinates(geoms[point], include_z=True), dtype=np.float64)
        h = np.full(len(xyz), np.uint64(0x243F6A8885A308D3))
        for k in range(3):
            w = pd.util.hash_array(np.ascontiguousarray(xyz[:, k]).view(np.uint64), hash_key=_HASH_KEY)
            h = (h * np.uint64(0x9E3779B97F4A7C15)) ^ w
        out[point] = h
    if not point.all():
        wkb = shapely.to_wkb(geoms[~point], hex=True, output_dimension=3, include_srid=False)
        out[~point] = pd.util.hash_array(np.asarray(wkb, dtype=object), hash_key=_HASH_KEY)
    return out


def rows_multiset(frame) -> tuple[int, int, int]:
    """(rows, sum of row hashes, sum of mixed row hashes) mod 2^64: an order-free digest of a frame's rows.

    Partitions add up (mod 2^64) to the whole frame's: the digest of a dask release's input.
    """
    h = row_hashes(frame)
    with np.errstate(over="ignore"):
        z = h * np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(31)
        z *= np.uint64(0x94D049BB133111EB)
        return len(h), int(h.sum(dtype=np.uint64)), int(z.sum(dtype=np.uint64))


def unordered(frame) -> list:
    """A frame as :func:`release_digest` should see it when the release does not depend on its row order.

    Its schema and :func:`rows_multiset`: a permutation of the rows digests the same (traces and
    diffusion sort their rows by public keys first), any other change of a row does not.
    """
    return [frame_schema(frame), *rows_multiset(frame)]


def frame_schema(frame) -> list:
    import pandas as pd

    cols = frame.columns if isinstance(frame, pd.DataFrame) else [frame.name]
    dtypes = frame.dtypes if isinstance(frame, pd.DataFrame) else [frame.dtype]
    crs = getattr(frame, "crs", None)
    return [
        [repr(c) for c in cols],
        [str(d) for d in dtypes],
        str(frame.index.dtype),
        None if crs is None else crs.to_wkt(),
    ]


def _feed(h, obj) -> None:
    import pandas as pd

    if isinstance(obj, (pd.DataFrame, pd.Series)):
        h.update(b"F" + json.dumps(frame_schema(obj)).encode())
        h.update(np.ascontiguousarray(row_hashes(obj), dtype="<u8").tobytes())
    elif isinstance(obj, pd.Index):
        h.update(b"I" + str(obj.dtype).encode())
        h.update(pd.util.hash_pandas_object(obj, hash_key=_HASH_KEY).to_numpy(np.uint64).astype("<u8").tobytes())
    elif isinstance(obj, np.ndarray) and obj.dtype != object:
        h.update(b"A" + obj.dtype.str.encode() + repr(obj.shape).encode())
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (bytes, bytearray)):
        h.update(b"B" + len(obj).to_bytes(8, "little") + bytes(obj))
    elif isinstance(obj, (list, tuple)):
        h.update(b"L" + len(obj).to_bytes(8, "little"))
        for x in obj:
            _feed(h, x)
    else:
        text = json.dumps(obj, sort_keys=True, default=repr).encode()
        h.update(b"J" + len(text).to_bytes(8, "little") + text)


def release_digest(*data, params=None) -> bytes:
    """BLAKE2b-256 of a release's whole input and public parameters: what a seed is bound to.

    ``data``: frames (schema, CRS, and every row's hash in order: :func:`row_hashes`), indexes,
    numeric arrays (dtype, shape, bytes), bytes, and lists of these; ``params``: anything JSON
    can write with sorted keys (other objects by their ``repr``).  Never stored or shown.
    """
    h = hashlib.blake2b(digest_size=32, person=b"geopriv-digest")
    _feed(h, list(data))
    _feed(h, params)
    return h.digest()


def make_rng(rng=None) -> RandomSource:
    """Turn the user's ``rng=`` argument into a :class:`RandomSource`.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws a seed from OS entropy.  Anything else is treated as seeded.

    Returns
    -------
    RandomSource
        ``generator``, a :class:`numpy.random.Generator` (a new PCG64DXSM one, or ``rng`` itself), and
        ``seeded``, whether the output is reproducible (``False`` only for ``rng=None``).  A
        release draws from ``make_rng(rng).bind(data, params=...)``, never from a seed's
        generator directly: a seed replays only for the same data and parameters.

    Raises
    ------
    ParameterTypeError
        ``rng`` is a bool, a legacy :class:`numpy.random.RandomState` or any other type.
    ParameterError
        ``rng`` is a negative int.

    See Also
    --------
    perturb : Its ``rng=`` goes through this function, as every release function's does.

    Examples
    --------
    >>> source = geopriv.make_rng(42)
    >>> source.seeded
    True
    >>> bool(geopriv.make_rng(42).generator.random() == source.generator.random())
    True
    >>> geopriv.make_rng().seeded   # OS entropy: the only choice for real releases
    False
    """
    if rng is None:
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence())), False)
    if isinstance(rng, RandomSource):
        return rng
    if getattr(rng, "per_row_streams", False):  # geopriv.keys.RowStreams: the keyed streams of a lazy release
        return RandomSource(rng, bool(rng.seeded))
    if isinstance(rng, np.random.Generator):
        return RandomSource(rng, True, None, from_generator=True)  # bind() draws its material from rng
    if isinstance(rng, np.random.SeedSequence):
        material = repr((rng.entropy, tuple(rng.spawn_key), rng.pool_size)).encode()
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(rng)), True, b"seedsequence:" + material)
    if isinstance(rng, (bool, np.bool_)):
        raise ParameterTypeError("rng must be None, an int seed, a SeedSequence or a numpy Generator, not a bool.")
    if isinstance(rng, (int, np.integer)):
        if rng < 0:
            raise ParameterError("An int seed for rng must be >= 0.")
        return RandomSource(np.random.Generator(np.random.PCG64DXSM(int(rng))), True, b"int:%d" % int(rng))
    if isinstance(rng, np.random.RandomState):
        raise ParameterTypeError(
            "rng=RandomState is the legacy global-style API; pass np.random.default_rng(seed) or an int seed, "
            "or leave rng=None for OS entropy."
        )
    raise ParameterTypeError(
        f"rng must be None (OS entropy), an int seed, a SeedSequence or a numpy Generator; got {type(rng).__name__}."
    )
