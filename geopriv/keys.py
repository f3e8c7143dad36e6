"""Keyed noise: the one place where reusable secrets are made, bound and turned into random streams.

A lazy release (dask) must give the same output when it is computed twice on the same data,
so its randomness is fixed when it is built: a 128-bit *root* (:class:`SecretRoot`).  That
root is a reusable secret, and a reusable secret is only sound when it is bound to exactly
what it answers.  This module binds it: every random variate a lazy release draws for a row
is a pseudorandom function of

    (root, purpose, the row's declared identity, the row's own content)

and of nothing else (not its position, its partition, the other rows or the scheduler).

Derivation (the proof is in ``docs/privacy.md``, "Keyed noise")
----------------------------------------------------------------
1. ``purpose key = HMAC-SHA256(root, purpose)`` truncated to 128 bits: one SipHash key per kind
   of release (``"perturb"``, ``"traces"``...), so two kinds never share a stream.
2. ``row key = SipHash-2-4-128_{purpose key}(id_a, id_b, c_1, ..., c_m)``: the identity digest
   (:func:`identity_digests`: the person's key of :mod:`geopriv.identity` and a tag) and the content words (the IEEE-754 bits
   of the row's coordinates, or a digest of a whole trace).  SipHash is a pseudorandom
   function keyed by the secret purpose key (Aumasson and Bernstein 2012); the message has a
   fixed number of words per purpose, and SipHash encodes the length, so distinct messages
   are distinct inputs.
3. ``word j of draw c = SplitMix64(k_0 + (4c + j + 1) * (k_1 | 1))`` for the row key
   ``(k_0, k_1)``: a counter-mode stream per row (the per-row counter ``c`` advances with each
   draw the mechanism makes *for that row*), and uniforms are ``(word >> 11) * 2^-53``, as
   numpy's ``Generator.random``.

Consequences: (a) two rows with different identities, or the same identity with different
content, get independent-looking streams (distinct PRF inputs); (b) a row whose identity and
content are unchanged reproduces its output exactly (a recomputation is a replay, not a new
release); (c) a changed row is, at worst, a second release of that row with fresh noise: the
difference of two outputs is never a difference of true values.  Identities must be unique
over the whole data (checked by a reduction, never per partition) and are the identities the
rest of geopriv uses (:func:`geopriv.identity.identities`: ``1`` and ``"1"`` are one person,
twice where one is allowed is a repeat; ``None``, ``NaN`` and floats are refused).

:class:`RowStreams` offers the part of :class:`numpy.random.Generator`'s interface that the
mechanisms use (``random``, ``standard_exponential``, ``standard_gamma`` with integer shape,
``laplace``), one variate per row per call, plus :meth:`RowStreams.subset` for mechanisms that
redraw some rows (rejection loops): :func:`rows_of` is what a mechanism calls to stay correct
with both a Generator and per-row streams.

This module provides the identity primitives (:func:`row_identities`, :func:`identity_digests`,
:func:`check_unique` over one array of digests); the release checks built on them have one
owner each: the whole in-memory frame's person ids, :func:`geopriv.release.common.check_unique_persons`;
a lazy release's, over all its partitions, :mod:`geopriv.distributed.perturb`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import sys
import threading

import numpy as np
import pandas as pd

from .exceptions import Fix, GeoprivError, IdentityError, ParameterTypeError
from .identity import identities

__all__ = [
    "SecretRoot",
    "SecretPicklingError",
    "allow_secret_pickling",
    "RowStreams",
    "identity_digests",
    "fold_digests",
    "row_streams",
    "rows_of",
    "siphash24_128",
    "float_words",
    "check_unique",
    "row_identities",
    "Binding",
    "shown_labels",
    "typed_label",
    "value_column",
    "LOCATION",
]

_M64 = (1 << 64) - 1
_CHUNK = 1 << 16  # rows per SipHash pass (keeps the eight working arrays in cache)

# type tags of identity digests: integers keep their value in id_a and this tag in id_b
_INT_TAG = np.uint64(0x9E3779B97F4A7C15)


class SecretRoot:
    """The root entropy of a lazy release.  SECRET: with it and the data anyone recomputes the noise.

    128 bits from the operating system (or from a seed, for tests and demos: ``seeded``).  It
    never appears in a ``repr``, a ``str``, a dask task name or a provenance record, and it is
    pickled only to ship a graph to dask's workers: by dask's own serialization (the
    ``"processes"`` scheduler, ``distributed``'s client and scheduler, dask's tokenizer), or
    inside :func:`allow_secret_pickling`.  Any other ``pickle.dumps`` of a root, or of a lazy
    release holding one, raises :class:`SecretPicklingError` (a GeoprivError): the root answers
    this one release, and anyone holding it and the data recomputes the noise.  A lazy release
    object must be held like the data itself; persist its *computed* values instead.  Use it only
    through :meth:`purpose_key` and :meth:`seed_for`, which bind it to what it answers.
    """

    __slots__ = ("_value", "seeded")

    def __init__(self, value: int, seeded: bool):
        if not isinstance(value, int) or not 0 <= value < (1 << 128):
            raise ParameterTypeError("a SecretRoot holds a 128-bit non-negative integer.")
        object.__setattr__(self, "_value", int(value))
        object.__setattr__(self, "seeded", bool(seeded))

    @classmethod
    def draw(cls, rng=None) -> SecretRoot:
        """A new root: OS entropy for ``rng=None``; else 128 bits from the (seeded) ``rng``."""
        if rng is None:
            return cls(int.from_bytes(os.urandom(16), "little"), False)
        from .rng import make_rng

        source = make_rng(rng)  # validates ints, refuses bools and RandomState
        words = source.generator.integers(0, 1 << 64, size=2, dtype=np.uint64)
        return cls((int(words[0]) << 64) | int(words[1]), True)

    def __setattr__(self, name, value):
        raise AttributeError("SecretRoot is immutable.")

    def __repr__(self) -> str:
        return f"SecretRoot(<secret: not shown>, seeded={self.seeded})"

    __str__ = __repr__

    def __reduce_ex__(self, protocol):  # dask ships graphs to workers by pickling; nothing else may
        if not _secret_pickling_allowed():
            raise SecretPicklingError(
                "a lazy release (or its SecretRoot) cannot be pickled: it holds the secret root of its "
                "noise, which answers this one release only, and with it and the data anyone recomputes "
                "the noise",
                fix=Fix(
                    "persist",
                    python="compute the release and save its values (e.g. `released.compute().to_parquet(...)` "
                    "or `released.to_parquet(...)`); dask ships the graph to its workers itself; to pickle it "
                    "anyway, where the data itself may be kept, wrap the call in "
                    "`with geopriv.keys.allow_secret_pickling():`",
                ),
            )
        return (SecretRoot, (self._value, self.seeded))

    def __reduce__(self):
        return self.__reduce_ex__(2)

    def __copy__(self):  # immutable: a copy is the same root (and copy never pickles it)
        return self

    def __deepcopy__(self, memo):
        return self

    def __dask_tokenize__(self):
        # a one-way tag for dask's task names: the root itself never reaches a key or a log
        return hmac.new(self._bytes(), b"geopriv dask token", hashlib.sha256).hexdigest()

    def _bytes(self) -> bytes:
        return self._value.to_bytes(16, "little")

    def purpose_key(self, purpose: str) -> tuple[int, int]:
        """The 128-bit SipHash key of one kind of release: HMAC-SHA256(root, purpose), truncated."""
        d = hmac.new(self._bytes(), b"geopriv purpose:" + purpose.encode(), hashlib.sha256).digest()
        return int.from_bytes(d[:8], "little"), int.from_bytes(d[8:16], "little")

    def seal(self, purpose: str, digest) -> str:
        """A one-way tag of a data digest: HMAC-SHA256(root, purpose, digest).  Reveals nothing of the keys."""
        msg = b"geopriv seal:" + purpose.encode() + b"\x00" + ",".join(str(int(v)) for v in digest).encode()
        return hmac.new(self._bytes(), msg, hashlib.sha256).hexdigest()

    def seed_for(self, purpose: str, data_digest: bytes) -> np.random.SeedSequence:
        """A SeedSequence bound to ``purpose`` and to a digest of exactly the data it answers.

        For central releases (synthesize): the noise of a release is a function of the root and
        of its sufficient statistic, so the same counts replay and any other counts draw anew.
        """
        d = hmac.new(
            self._bytes(), b"geopriv seed:" + purpose.encode() + b"\x00" + bytes(data_digest), hashlib.sha256
        ).digest()
        return np.random.SeedSequence(int.from_bytes(d, "little"))


# ------------------------------------------------------------------ pickling of the secret root
class SecretPicklingError(GeoprivError):
    """A lazy release's secret root was to be pickled outside dask's shipping of a graph to its workers."""


_ALLOW = threading.local()  # per thread: allow_secret_pickling() of one thread does not open another's

# Who may pickle a root: dask's own serialization of a graph for its workers.  The check is on the
# first frame outside the picklers (pickle, copyreg, cloudpickle): the code that called dumps.
_SHIPPERS = ("distributed.", "dask.local", "dask.multiprocessing", "dask.tokenize", "dask.base")
_PICKLERS = ("pickle", "_pickle", "copyreg", "cloudpickle", "cloudpickle.cloudpickle", "cloudpickle.cloudpickle_fast")


def _secret_pickling_allowed() -> bool:
    if getattr(_ALLOW, "depth", 0) > 0:
        return True
    frame = sys._getframe(2)  # the caller of SecretRoot.__reduce_ex__ (or of __reduce__)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module == __name__ or module in _PICKLERS:
            frame = frame.f_back
            continue
        return module.startswith(_SHIPPERS)
    return False


@contextlib.contextmanager
def allow_secret_pickling():
    """Allow pickling lazy releases and their :class:`SecretRoot` in this thread, inside the block.

    dask's own shipping of a graph to its workers needs no such block.  Use it only to keep a
    lazy release where its data may be kept too: the pickle holds the secret root, and with it
    and the data anyone recomputes the noise.
    """
    _ALLOW.depth = getattr(_ALLOW, "depth", 0) + 1
    try:
        yield
    finally:
        _ALLOW.depth -= 1


class Binding:
    """The sealed digests of the partitions a lazy release was built on.  SECRET-derived; never shown.

    Holds one :meth:`SecretRoot.seal` tag per partition, in partition order.  :meth:`check`
    accepts a partition whose rows seal to one of them: the partition numbers dask passes
    change under partition selection (``.partitions[i]``), and a partition equal to any built
    one is a replay, since noise is keyed per row.  ``ordered=True`` (rows whose order is the
    release's order: one trace without ids or time stamps) demands the same partition number.
    """

    __slots__ = ("_tags", "_purpose", "_ordered")

    def __init__(self, root: SecretRoot, purpose: str, digests, ordered: bool = False):
        object.__setattr__(self, "_purpose", purpose)
        object.__setattr__(self, "_tags", tuple(root.seal(purpose, d) for d in digests))
        object.__setattr__(self, "_ordered", bool(ordered))

    def __setattr__(self, name, value):
        raise AttributeError("Binding is immutable.")

    def __repr__(self) -> str:
        return f"Binding(<{len(self._tags)} sealed partition digests>)"

    __str__ = __repr__

    def __reduce__(self):
        return (_rebuild_binding, (self._tags, self._purpose, self._ordered))

    def __dask_tokenize__(self):
        return hashlib.sha256("|".join(self._tags).encode()).hexdigest()

    def check(self, root: SecretRoot, digest, number=None) -> None:
        """Refuse (StaleReleaseError) rows other than those of a partition the release was built on."""
        from .exceptions import StaleReleaseError

        tag = root.seal(self._purpose, digest)
        ok = (
            (number is not None and number < len(self._tags) and self._tags[number] == tag)
            if self._ordered
            else tag in self._tags
        )
        if not ok:
            raise StaleReleaseError(
                "a partition holds other rows than when this lazy release was built: a lazy release answers exactly "
                "the data it was built on (recomputed on changed data, it would show which rows changed, or spend "
                "the budget again unnoticed). Build a new release for the new data (it spends the budget again), "
                "and compute or persist a release once."
            )


def _rebuild_binding(tags, purpose, ordered):
    out = Binding.__new__(Binding)
    object.__setattr__(out, "_tags", tuple(tags))
    object.__setattr__(out, "_purpose", purpose)
    object.__setattr__(out, "_ordered", ordered)
    return out


# ----------------------------------------------------------------------------- SipHash-2-4-128
def _rotl(x, r, tmp):
    np.left_shift(x, np.uint64(r), out=tmp)
    np.right_shift(x, np.uint64(64 - r), out=x)
    x |= tmp


def _sipround(v0, v1, v2, v3, tmp):
    v0 += v1
    _rotl(v1, 13, tmp)
    v1 ^= v0
    _rotl(v0, 32, tmp)
    v2 += v3
    _rotl(v3, 16, tmp)
    v3 ^= v2
    v0 += v3
    _rotl(v3, 21, tmp)
    v3 ^= v0
    v2 += v1
    _rotl(v1, 17, tmp)
    v1 ^= v2
    _rotl(v2, 32, tmp)


def siphash24_128(key: tuple[int, int], words) -> tuple[np.ndarray, np.ndarray]:
    """SipHash-2-4 with 128-bit output of the messages ``words`` (a list of m uint64 arrays of length n).

    Message i is ``(words[0][i], ..., words[m-1][i])`` as 8m little-endian bytes; the final block
    carries the length as in the reference implementation.  Vectorised over i.
    """
    k0, k1 = np.uint64(key[0] & _M64), np.uint64(key[1] & _M64)
    words = [np.ascontiguousarray(w, dtype=np.uint64) for w in words]
    n = len(words[0]) if words else 0
    out0 = np.empty(n, np.uint64)
    out1 = np.empty(n, np.uint64)
    last = np.uint64(((8 * len(words)) & 0xFF) << 56)
    with np.errstate(over="ignore"):
        for a in range(0, n, _CHUNK):
            b = min(n, a + _CHUNK)
            m = b - a
            v0 = np.full(m, k0 ^ np.uint64(0x736F6D6570736575))
            v1 = np.full(m, k1 ^ np.uint64(0x646F72616E646F6D) ^ np.uint64(0xEE))
            v2 = np.full(m, k0 ^ np.uint64(0x6C7967656E657261))
            v3 = np.full(m, k1 ^ np.uint64(0x7465646279746573))
            tmp = np.empty(m, np.uint64)
            for w in words:
                blk = w[a:b]
                v3 ^= blk
                _sipround(v0, v1, v2, v3, tmp)
                _sipround(v0, v1, v2, v3, tmp)
                v0 ^= blk
            v3 ^= last
            _sipround(v0, v1, v2, v3, tmp)
            _sipround(v0, v1, v2, v3, tmp)
            v0 ^= last
            v2 ^= np.uint64(0xEE)
            for _ in range(4):
                _sipround(v0, v1, v2, v3, tmp)
            out0[a:b] = v0 ^ v1 ^ v2 ^ v3
            v1 ^= np.uint64(0xDD)
            for _ in range(4):
                _sipround(v0, v1, v2, v3, tmp)
            out1[a:b] = v0 ^ v1 ^ v2 ^ v3
    return out0, out1


# ----------------------------------------------------------------------------- identities
def identity_digests(ids, what: str = "index label", labels=None) -> tuple[np.ndarray, np.ndarray]:
    """128-bit identity words (id_a, id_b) of rows: the person's key (:func:`geopriv.identity.identities`) and a tag.

    ``id_a`` is the 64-bit key that bounding and the budget store use for the same id (so ``1``,
    ``np.int64(1)`` and ``"1"`` are one identity, and the NFC and NFD forms of a text too), ``id_b`` a
    fixed tag: keyed noise knows exactly the people the rest of geopriv knows.  Missing values,
    booleans, floats and other objects are refused
    (:class:`~geopriv.exceptions.IdentityError`) by row label.
    """
    keys = identities(ids, labels, what).keys
    return keys.view(np.uint64).copy(), np.full(len(keys), _INT_TAG, np.uint64)


#: What a diffusion path (or a ledger entry) releases when it answers a location, not a column's value
LOCATION = "location"


def _plain_label(label):
    if isinstance(label, np.generic):
        return label.item()
    if isinstance(label, tuple):
        return tuple(_plain_label(x) for x in label)
    return label


def typed_label(label) -> str:
    """A row or column label as typed text: ``1`` -> ``"int:1"``, ``"1"`` -> ``"str:'1'"``.

    Labels that compare or hash equal across types (``1``, ``1.0``, ``True``, ``"1"``) name
    different rows of different indexes, so a binding keeps their type.  numpy scalars count as
    their Python type (``np.int64(1)`` is ``int:1``), and tuples (MultiIndex labels) are typed
    element by element.

    Parameters
    ----------
    label : hashable

    Returns
    -------
    str
    """
    label = _plain_label(label)
    if isinstance(label, tuple):
        return "tuple:(" + ", ".join(typed_label(x) for x in label) + ")"
    return f"{type(label).__name__}:{label!r}"


def value_column(column) -> str:
    """What a path releases when it answers the value of attribute ``column`` (typed, see :func:`typed_label`)."""
    return f"value of column {typed_label(column)}"


_HOW = (
    "Declare a column of stable person ids (integers or strings, one per person, unique over the whole data) "
    "with person='<column>', or set such a column as the index."
)


def fold_digests(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One 64-bit value per 128-bit digest (for whole-data uniqueness checks)."""
    with np.errstate(over="ignore"):
        z = b.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(31)
        return a.astype(np.uint64) ^ z


def float_words(xy: np.ndarray) -> list[np.ndarray]:
    """The IEEE-754 bits of each column of a float array (content words of a row's key)."""
    xy = np.ascontiguousarray(xy, dtype=np.float64)
    if xy.ndim == 1:
        xy = xy[:, None]
    return [np.ascontiguousarray(xy[:, j]).view(np.uint64) for j in range(xy.shape[1])]


# ----------------------------------------------------------------------------- per-row streams
def _splitmix(z):
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


class RowStreams:
    """One keyed random stream per row, with the Generator methods geopriv's mechanisms use.

    Each call draws one variate (or one row of ``size=(n, k)``) for every row of the view, from
    that row's own counter-mode stream (module docstring); :meth:`subset` gives a view of some
    rows sharing the counters, for rejection loops.  A row's variates therefore depend only on
    its key and on the draws made for it, never on which other rows are drawn with it.
    """

    __slots__ = ("_k0", "_gamma", "_ctr", "_idx", "seeded")
    per_row_streams = True  # recognised by geopriv.rng.make_rng

    def __init__(self, k0: np.ndarray, k1: np.ndarray, seeded: bool = False, *, _ctr=None, _idx=None):
        self._k0 = np.asarray(k0, np.uint64)
        self._gamma = np.asarray(k1, np.uint64) | np.uint64(1)
        self._ctr = np.zeros(len(self._k0), np.uint64) if _ctr is None else _ctr
        self._idx = np.arange(len(self._k0)) if _idx is None else _idx
        self.seeded = seeded

    def __repr__(self) -> str:
        return f"RowStreams(<{len(self)} secret keyed streams>)"

    def __len__(self) -> int:
        return len(self._idx)

    def digest(self) -> tuple[int, int, int]:
        """(rows, sum of first key words, sum of second key words) mod 2^64: a keyed multiset hash of the rows.

        Order-independent; equal for two sets of rows (of the same purpose and root) iff they hold
        the same (identity, content) rows, up to the PRF's collisions.  Binds a lazy release to the
        data it was built on (:mod:`geopriv.distributed`).  Secret, like the root.
        """
        idx = self._idx
        with np.errstate(over="ignore"):
            return (len(idx), int(self._k0[idx].sum(dtype=np.uint64)), int(self._gamma[idx].sum(dtype=np.uint64)))

    def subset(self, rows) -> RowStreams:
        """A view of the rows at positions ``rows`` of this view (integer positions or a boolean mask)."""
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return RowStreams(self._k0, self._gamma, self.seeded, _ctr=self._ctr, _idx=self._idx[rows])

    def _words(self, k: int) -> np.ndarray:
        """(n, k) fresh 64-bit words for the rows of the view; advances their counters."""
        idx = self._idx
        n = len(idx)
        out = np.empty((n, k), np.uint64)
        k0, g = self._k0[idx], self._gamma[idx]
        with np.errstate(over="ignore"):
            for j0 in range(0, k, 4):
                c = self._ctr[idx]
                for j in range(j0, min(k, j0 + 4)):
                    z = k0 + (c * np.uint64(4) + np.uint64(j - j0 + 1)) * g
                    out[:, j] = _splitmix(z)
                self._ctr[idx] = c + np.uint64(1)
        return out

    def _count(self, size) -> tuple[int, tuple]:
        if size is None:
            size = len(self)
        shape = (int(size),) if np.ndim(size) == 0 else tuple(int(s) for s in size)
        if not shape or shape[0] != len(self):
            raise RuntimeError(
                f"keyed streams draw one variate per row: asked for shape {shape} with {len(self)} rows "
                "(a mechanism must draw through geopriv.keys.rows_of for subsets)."
            )
        return int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1, shape

    def random(self, size=None, dtype=np.float64, out=None) -> np.ndarray:
        """Uniforms on [0, 1), 53 bits, one (or one row of ``size``) per row."""
        k, shape = self._count(size)
        u = (self._words(k) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
        return u.reshape(shape)

    def standard_exponential(self, size=None) -> np.ndarray:
        """Exp(1) by inversion: -log(1 - U), finite for every word."""
        return -np.log1p(-self.random(size))

    def standard_gamma(self, shape, size=None) -> np.ndarray:
        """Gamma(shape, 1) for an integer shape (a sum of ``shape`` exponentials: exact in law)."""
        if float(shape) != int(shape) or shape < 1:
            raise RuntimeError("keyed streams sample standard_gamma for integer shapes only.")
        k, out_shape = self._count(size)
        u = (self._words(k * int(shape)) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
        return (-np.log1p(-u)).reshape(len(self), k, int(shape)).sum(axis=2).reshape(out_shape)

    def laplace(self, loc=0.0, scale=1.0, size=None) -> np.ndarray:
        """Laplace(loc, scale) as loc + scale (E1 - E2) (exact in law)."""
        k, out_shape = self._count(size)
        u = (self._words(2 * k) >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
        e = -np.log1p(-u).reshape(len(self), k, 2)
        return np.asarray(loc) + np.asarray(scale) * (e[..., 0] - e[..., 1]).reshape(out_shape)


def rows_of(gen, rows):
    """The randomness for the rows at positions ``rows``: the generator itself, or a view of per-row streams."""
    return gen.subset(rows) if isinstance(gen, RowStreams) else gen


def row_streams(root: SecretRoot, purpose: str, ids: tuple[np.ndarray, np.ndarray], content) -> RowStreams:
    """Per-row streams keyed by (root, purpose, identity digest, content words) (module docstring)."""
    key = root.purpose_key(purpose)
    k0, k1 = siphash24_128(key, [ids[0], ids[1], *content])
    return RowStreams(k0, k1, root.seeded)


def row_identities(data, person=None, *, refuse_positions: bool = False):
    """(identities, labels) of the rows of ``data``: the ``person`` column, or the index labels.

    ``refuse_positions``: an *unnamed integer* index used as identity is refused.  That is what
    positions look like (a default ``RangeIndex``, ``read_parquet`` of files written with
    ``index=False``, ``reset_index``, a filtered RangeIndex), and positions are not people: a
    deleted row would hand its position, and its noise, to the next person.  A named index
    (``set_index("pid")``; pandas may store it as a RangeIndex) or string labels are accepted
    as declared identities.
    """
    labels = data.index
    if person is None:
        if (
            refuse_positions
            and labels.name is None
            and not isinstance(labels, pd.MultiIndex)
            and pd.api.types.is_integer_dtype(labels.dtype)
        ):
            raise IdentityError(
                "are named by an unnamed integer index, which looks like positions, not a stable identity: deleting a "
                "row would move later people onto others' keys",
                labels[:3],
                _HOW,
            )
        return labels, labels
    if not hasattr(data, "columns") or person not in data.columns:
        raise GeoprivError(f"person={person!r} is not a column of the data. {_HOW}")
    return pd.Index(data[person]), labels


def shown_labels(labels):
    """The labels to name in a message, or None when they may be coordinates (anything but integers or strings)."""
    labels = pd.Index(labels)
    if pd.api.types.is_integer_dtype(labels.dtype) or all(type(v) is str for v in labels):  # noqa: E721
        return labels
    return None


def repeated_rows(folded: np.ndarray, labels) -> pd.Index:
    """The labels of the rows whose folded digest another row shares (in row order; empty when none)."""
    order = np.argsort(folded, kind="stable")
    s = folded[order]
    dup = np.zeros(len(s), bool)
    if len(s) > 1:
        eq = s[1:] == s[:-1]
        dup[1:] |= eq
        dup[:-1] |= eq
    return pd.Index(labels)[np.sort(order[dup])]


def check_unique(folded: np.ndarray, labels, what: str = "person id") -> None:
    """Refuse duplicate identities (named by row label) in one array of folded digests."""
    rows = repeated_rows(folded, labels)
    if len(rows):
        raise IdentityError(
            f"have {what}s that repeat: two rows would answer for the same person",
            shown_labels(rows),
            _HOW,
            count=len(rows),
        )
