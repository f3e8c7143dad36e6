"""Eikonal mechanism files: save, load, checksums, signatures and verification stamps.

Two layouts: full files store the kernels (version 1); compact files (version 2, the default)
store the kernel rate map, outputs, apex radii and options instead, and the kernels are
recomputed at load by :func:`.kernels.compute_kernels`, the build's own function.  Either
way, the load checks the checksum (and signature, with a key), every array sampling uses,
the normaliser against the weights and kernels, and re-runs the verification, unless this
user's stamp (:mod:`.stamps`) says that exactly this content passed that verification before
(at build and save, or at an earlier load): a stamped compact file then loads without any
kernel solve, its rows computed when a release needs them (:mod:`.ondemand`).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import math
import os
from dataclasses import dataclass

import numpy as np

from ...exceptions import MechanismFileError, OutputError, ParameterError, ParameterTypeError
from ...io import write_new_file
from ...privacy_map import PrivacyMap, affine6
from . import stamps
from .kernels import KernelProblem, compute_kernels
from .report import NORMALISER_RTOL, TOLERANCE, VerifyReport
from .verification import check_arrays, exact_normaliser, normaliser_mismatch
from .verification import verify as verify_mechanism

FORMAT = "geopriv.eikonal"
#: how :meth:`EikonalMechanism.load` may keep the kernels ("auto": held, or on demand for a stamped compact file)
LOAD_KERNELS = ("auto", "held", "on_demand")
FORMAT_VERSION = 1  # full files: the kernels are stored
COMPACT_VERSION = 2  # compact files: the kernels are recomputed from the stored kernel rate map at load


def file_arrays(mech, compact: bool = False) -> dict:
    pm = mech.privacy_map
    arrays = {
        "map_epsilon": pm.epsilon,
        "map_nodata": pm.nodata_mask.astype(np.uint8),
        "kernel_epsilon": mech.kernel_epsilon,
        "output_ij": mech.output_ij,
        "output_step": mech.output_step,
        "weights": mech.weights,
        "normaliser": mech.normaliser,
    }
    if mech.can_save_compact:  # full files keep them too (a few MB): they can be saved compact later
        arrays["kernel_rate"] = mech.kernel_rate
        arrays["output_apex"] = mech.output_apex
    if not compact:
        arrays.update(indptr=mech.indptr, indices=mech.indices, kernel=mech.kernel)
    if pm.population is not None:
        arrays["map_population"] = pm.population
    if mech.remap_xy is not None:
        arrays["remap_xy"] = mech.remap_xy
    return arrays


def file_meta(mech, include_report: bool = True, compact: bool = False) -> dict:
    pm = mech.privacy_map
    meta = {
        "format": FORMAT,
        "format_version": COMPACT_VERSION if compact else FORMAT_VERSION,
        "crs_wkt": pm.crs.to_wkt(),
        "transform": list(affine6(pm.transform)),
        "map_info": pm.info,
        "cap": mech.cap,
        "params": {k: v for k, v in mech.params.items() if k != "timings"},
    }
    if mech.remap_xy is not None:
        meta["remap_prior"] = mech.remap_prior
    if include_report and mech.report is not None:
        meta["report"] = mech.report.to_dict()
    return meta


def save(
    mech,
    path,
    *,
    key: bytes | str | None = None,
    compact: bool | None = None,
    overwrite: bool = False,
) -> str:
    """Write ``mech`` to ``path`` (:meth:`EikonalMechanism.save`, where the options are documented).

    The file is written to a new temporary file in the same directory, flushed to disk, and then
    linked into place (``overwrite=False``: an existing file, or a symbolic link, is never
    replaced) or moved over ``path`` with :func:`os.replace` (``overwrite=True``: a symbolic link
    at ``path`` is replaced itself, never written through).  A failed save leaves ``path`` and every
    other file as they were.
    """
    if compact is None:
        compact = mech.can_save_compact
    if not compact and mech.kernel is None:
        raise ParameterError(
            "This mechanism computes its kernels on demand and holds none: save it compact (compact=True, the default)."
        )
    if compact and not mech.can_save_compact:
        raise ParameterError(
            "This mechanism was loaded from a full file of an earlier version and does not know its kernel rate map: "
            "save it with compact=False, or rebuild it to save a compact file."
        )
    path = os.fspath(path)
    if os.path.isdir(path):
        raise OutputError(f"{path!r} is a directory; give a file name such as {os.path.join(path, 'mechanism.npz')!r}.")
    if not overwrite and os.path.lexists(path):
        raise _exists(path)
    arrays = file_arrays(mech, compact=compact)
    meta = file_meta(mech, compact=compact)
    digest, mac, content = digests(
        arrays,
        file_meta(mech, include_report=False, compact=compact),
        None if key is None else hmac_key(key),
        content_meta=content_meta(meta),
    )
    meta["sha256"] = digest
    if mac is not None:
        meta["hmac_sha256"] = mac
    # a mechanism is not secret: the usual mode, not the temporary file's owner-only one
    write_new_file(
        path,
        lambda fh: np.savez(fh, meta=np.array(json.dumps(meta, default=json_default)), **arrays),
        overwrite=overwrite,
        exists=_exists,
        prefix=".geopriv-eikonal-",
        mode=0o666 & ~_umask(),
    )
    if stampable(mech):
        # this process verified these arrays (build, or a load that verified or found a stamp), and the
        # file's report is that verification's: remember it, so a load of this content need not repeat it
        stamps.stamp(content)
    return digest


def stampable(mech) -> bool:
    """True when ``mech``'s guarantee was established in this process (:attr:`EikonalMechanism.verification`)
    and its report says it holds: a file saved from it may be stamped."""
    return mech.verification in ("full", "stamp") and mech.report is not None and mech.report.ok


def _exists(path: str) -> FileExistsError:
    return FileExistsError(
        errno.EEXIST, "File exists; pass overwrite=True to replace it (the old mechanism is lost)", path
    )


def _umask() -> int:
    """The process's file mode creation mask (read without changing it where the system allows)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load(
    cls,
    path,
    *,
    privacy_map: PrivacyMap | None = None,
    verify: bool | str = True,
    key: bytes | str | None = None,
    n_jobs: int = 1,
    progress=None,
    mp_context=None,
    kernels: str = "auto",
):
    """Read a mechanism file as ``cls`` (:meth:`EikonalMechanism.load`, where the checks are documented).

    Three stages: read the file and authenticate it (:func:`_read_file`, :func:`_authenticate`),
    validate its contents and recompute the kernels a compact file does not store
    (:func:`_place_kernels`, :func:`_check_contents`), then rebuild the mechanism and verify it,
    unless this user's stamp vouches for it (:func:`_rebuild`, :func:`_verify_loaded`).
    """
    if kernels not in LOAD_KERNELS:
        raise ParameterError(
            "kernels must be 'auto' (default: held, or on demand for a file you verified before), "
            "'held' or 'on_demand'."
        )
    if not (isinstance(verify, bool) or verify == "full"):
        raise ParameterError(
            "verify must be True (default: verify, unless your stamp says this file was verified "
            "before), 'full' (verify in any case) or False."
        )
    # reading
    f = _read_file(path)
    content = _authenticate(f, key)
    pm = _stored_map(f)
    # validating (and recomputing the kernels of a compact file)
    rep = f.meta.get("report")
    # a full verification of exactly this content (report included) passed before: this user's stamp
    trusted = verify != "full" and isinstance(rep, dict) and rep.get("ok") is True and stamps.is_stamped(content)
    if kernels == "auto":  # a stamped compact file needs no kernel solve at all: its rows when a release needs them
        kernels = "on_demand" if trusted and f.compact else "held"
    on_demand = kernels == "on_demand"
    want_extremes = bool(verify) and not trusted or rep is None
    extremes = _place_kernels(f, pm, on_demand, want_extremes, n_jobs, progress, mp_context)
    _check_contents(f, pm, on_demand, privacy_map)
    # rebuilding
    mech = _rebuild(cls, f, pm, n_jobs, mp_context)
    if trusted:
        _accept_stamped(mech, f, on_demand)
        return mech
    _verify_loaded(mech, f, bool(verify), on_demand, extremes, progress, content)
    return mech


@dataclass(frozen=True, eq=False)
class _StoredFile:
    """A mechanism file as read (:func:`_read_file`): its path, metadata and arrays, and its layout.

    ``data`` holds the stored arrays; the load adds the kernels it recomputes for a compact file
    (or None for kernels on demand).
    """

    path: str
    meta: dict
    data: dict
    compact: bool


def _read_file(path) -> _StoredFile:
    """Read a mechanism file's metadata and arrays, refusing anything that is not a complete file of a known version.

    Raises
    ------
    MechanismFileError
        No file, not a readable ``.npz``, no or unreadable metadata, another format or version,
        or arrays missing.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise MechanismFileError(
            f"No mechanism file at {path!r}. Build one with EikonalMechanism.build(...).save(path)."
        ) from None
    except Exception as exc:  # zipfile.BadZipFile, ValueError, OSError, EOFError ...
        raise MechanismFileError(
            f"{path!r} is not a readable geopriv mechanism file ({type(exc).__name__}); it may be truncated, "
            "corrupt or another kind of file. Rebuild it with EikonalMechanism.build(...).save(path)."
        ) from None
    if "meta" not in data:
        raise MechanismFileError(f"{path!r} is an .npz file but not a geopriv mechanism (no metadata).")
    try:
        meta = json.loads(str(data.pop("meta")))
    except ValueError:
        raise MechanismFileError(f"{path!r} has unreadable metadata; the file is corrupt. Rebuild it.") from None
    if meta.get("format") != FORMAT:
        raise MechanismFileError(f"{path!r} is not an eikonal mechanism file (format {meta.get('format')!r}).")
    version = meta.get("format_version")
    if version not in (FORMAT_VERSION, COMPACT_VERSION):
        raise MechanismFileError(
            f"{path!r} has format version {version}, this geopriv reads versions {FORMAT_VERSION} (full) and "
            f"{COMPACT_VERSION} (compact). Rebuild the mechanism with this version."
        )
    compact = version == COMPACT_VERSION
    required = ["map_epsilon", "map_nodata", "kernel_epsilon", "output_ij", "output_step", "weights", "normaliser"]
    required += ["kernel_rate", "output_apex"] if compact else ["indptr", "indices", "kernel"]
    missing = [k for k in required if k not in data]
    if missing:
        raise MechanismFileError(f"{path!r} lacks {missing}; the file is truncated or corrupt. Rebuild it.")
    return _StoredFile(path, meta, data, compact)


def _authenticate(f: _StoredFile, key) -> str:
    """Check the file's checksum, and its signature under ``key`` if one is given; returns the content
    digest a verification stamp binds (:mod:`.stamps`).

    Raises
    ------
    MechanismFileError
        The checksum fails, or a key was given and the file is not signed or its signature fails.
    """
    path, meta = f.path, f.meta
    stored = meta.get("sha256")
    signature = meta.get("hmac_sha256")
    check = dict(meta)
    check.pop("sha256", None)
    check.pop("hmac_sha256", None)
    check.pop("report", None)
    if key is not None:
        key = hmac_key(key)
        if not isinstance(signature, str):
            raise MechanismFileError(
                f"{path!r} is not signed, but a key was given: it cannot be authenticated. Load a file saved with "
                "save(path, key=...), or rebuild and save it with your key."
            )
    digest, mac, content = digests(f.data, check, key, content_meta=content_meta(meta))
    if stored != digest:
        raise MechanismFileError(
            f"{path!r} fails its checksum: the arrays were changed or corrupted after saving. Rebuild it; do not "
            "release with it."
        )
    if key is not None and not hmac.compare_digest(signature, mac):
        raise MechanismFileError(
            f"{path!r} fails its signature: it was changed after it was signed, or signed with another key. "
            "Do not release with it; rebuild it and save(path, key=...) with your key."
        )
    return content


def _stored_map(f: _StoredFile) -> PrivacyMap:
    """The privacy map the file stores (its arrays and metadata), refused if invalid."""
    from affine import Affine

    try:
        crs = f.meta["crs_wkt"]
        transform = Affine(*f.meta["transform"])
        return PrivacyMap(
            f.data["map_epsilon"],
            transform,
            crs,
            f.data["map_nodata"].astype(bool),
            f.data.get("map_population"),
            f.meta.get("map_info", {}),
        )
    except Exception as exc:
        raise MechanismFileError(f"{f.path!r} holds an invalid privacy map ({exc}). Rebuild it.") from None


def _place_kernels(f: _StoredFile, pm: PrivacyMap, on_demand: bool, extremes: bool, n_jobs, progress, mp_context):
    """The kernels the mechanism will hold, placed into ``f.data``: a full file's own, a compact file's
    recomputed (:func:`_recompute_kernels`, after :func:`_check_compact`), or none (on demand).

    Returns the recomputed kernels' :class:`~.kernels.LogRatioExtremes` (None unless a compact file's
    kernels were recomputed with ``extremes``).
    """
    if on_demand and not f.compact:
        raise MechanismFileError(
            f"{f.path!r} is a full file (kernels stored): kernels='on_demand' needs a compact file. Load it with "
            "kernels='held' and save it again with save(path, compact=True), or rebuild it."
        )
    if f.compact:
        _check_compact(f.path, pm, f.meta, f.data)
    if on_demand:
        f.data.update(indptr=None, indices=None, kernel=None)
    elif f.compact:
        f.data.update(_recompute_kernels(f, pm, n_jobs, progress, mp_context, extremes))
        return f.data.pop("extremes")
    return None


def _check_contents(f: _StoredFile, pm: PrivacyMap, on_demand: bool, privacy_map: PrivacyMap | None) -> None:
    """Refuse arrays of inconsistent sizes, a remap of the wrong shape, or a file built for another map than ``privacy_map``."""
    path, data = f.path, f.data
    n = pm.shape[0] * pm.shape[1]
    if len(data["normaliser"]) != n or (
        not on_demand and (len(data["indptr"]) != n + 1 or len(data["indices"]) != len(data["kernel"]))
    ):
        raise MechanismFileError(f"{path!r} has inconsistent array sizes; it is corrupt. Rebuild it.")
    remap = data.get("remap_xy")
    if remap is not None and np.shape(remap) != (len(data["weights"]), 2):
        raise MechanismFileError(f"{path!r} has a remap_xy of the wrong shape; it is corrupt. Rebuild it.")
    if privacy_map is not None:
        same = (
            privacy_map.shape == pm.shape
            and np.array_equal(privacy_map.epsilon, pm.epsilon)
            and affine6(privacy_map.transform) == affine6(pm.transform)
            and privacy_map.crs.equals(pm.crs)
        )
        if not same:
            raise MechanismFileError(
                f"{path!r} was built for another privacy map (different epsilon grid, extent or CRS). Load the file "
                "built for this map, or build one: EikonalMechanism.build(privacy_map).save(path)."
            )


def _stored_report(rep: dict | None, shape) -> VerifyReport | None:
    """The verification report the file stores (None if it has none); per-node ratios are not stored."""
    if rep is None:
        return None
    return VerifyReport(
        max_ratio=rep["max_ratio"],
        normaliser_ratio=rep["normaliser_ratio"],
        worst=rep["worst"],
        node_ratio=np.zeros(shape),
        n_nodes=rep["n_nodes"],
        n_outputs=rep["n_outputs"],
        n_edges=rep["n_edges"],
        seconds=rep["seconds"],
        tolerance=rep.get("tolerance", TOLERANCE),
        normaliser_mismatch=rep.get("normaliser_mismatch", 0.0),
    )


def _rebuild(cls, f: _StoredFile, pm: PrivacyMap, n_jobs: int, mp_context):
    """The mechanism (``cls``) of the file's arrays and metadata, with the workers for kernels recomputed on demand."""
    data, meta = f.data, f.meta
    mech = cls(
        privacy_map=pm,
        kernel_epsilon=data["kernel_epsilon"],
        output_ij=data["output_ij"],
        output_step=data["output_step"],
        weights=data["weights"],
        indptr=data["indptr"],
        indices=data["indices"],
        kernel=data["kernel"],
        cap=float(meta["cap"]),
        normaliser=data["normaliser"],
        params=dict(meta.get("params", {})),
        report=_stored_report(meta.get("report"), pm.shape),
        remap_xy=data.get("remap_xy"),
        remap_prior=meta.get("remap_prior"),
        kernel_rate=data.get("kernel_rate"),
        output_apex=data.get("output_apex"),
    )
    object.__setattr__(mech, "_n_jobs", int(n_jobs))  # workers for kernels recomputed on demand
    object.__setattr__(mech, "_mp_context", mp_context if isinstance(mp_context, (str, type(None))) else None)
    return mech


def _accept_stamped(mech, f: _StoredFile, on_demand: bool) -> None:
    """A stamped file: the stamp vouches for the arrays, the normaliser and the stored report (a full
    verification of this very content passed); the checks that need no kernel entry are cheap and run anyway."""
    try:
        if on_demand:
            check_arrays(mech)
    except MechanismFileError as exc:
        raise MechanismFileError(f"{f.path!r}: {exc}") from None
    object.__setattr__(mech, "_verification", "stamp")


def _verify_loaded(mech, f: _StoredFile, verify: bool, on_demand: bool, extremes, progress, content: str) -> None:
    """Check the loaded mechanism: its arrays and normaliser always, its guarantee with ``verify`` (or
    without a stored report); a verification that confirms the stored report stamps the content.

    Raises
    ------
    MechanismFileError
        An array check fails, the normaliser is not the row sums of the weights and kernels, or the
        verification fails.
    """
    path = f.path
    try:
        if verify or mech.report is None:
            # checks the arrays, recomputes the normaliser and the ratios (a compact file's kernels
            # part comes from the workers that recomputed the kernels placed into mech)
            fresh = verify_mechanism(mech, extremes, progress=progress if on_demand else None)
            mismatch = fresh.normaliser_mismatch
        else:
            fresh = None
            check_arrays(mech)
            if on_demand:  # the normaliser from one pass of kernel solves (no entry held)
                from .ondemand import full_pass, normaliser_from

                exact = normaliser_from(full_pass(mech, progress=progress).rowsum, mech)
            else:
                exact = exact_normaliser(mech)
            mismatch = normaliser_mismatch(mech.normaliser, exact)
    except MechanismFileError as exc:
        raise MechanismFileError(f"{path!r}: {exc}") from None
    if not mismatch <= NORMALISER_RTOL:
        raise MechanismFileError(
            f"{path!r} stores a normaliser that is not the row sums of its weights and kernels (relative difference "
            f"up to {mismatch:.3g}): the arrays were edited after the build, and what sampling draws from is not what "
            "was verified. Do not release with it; rebuild it (EikonalMechanism.build(privacy_map).save(path))."
        )
    if fresh is not None:
        if not fresh.ok:
            raise MechanismFileError(
                f"{path!r} does not meet its privacy map on verification: {fresh}. Do not release with it; rebuild it."
            )
        report = mech.report
        if report is not None and _same_report(report, fresh):
            # the file's stored report is this verification's: remember that this content passed, so the
            # next load (of this very content, by this user) need not verify it again
            stamps.stamp(content)
        object.__setattr__(mech, "report", fresh)
        object.__setattr__(mech, "_verification", "full")


def _same_report(stored: VerifyReport, fresh: VerifyReport) -> bool:
    """True when the report stored in a file says what a fresh verification found (ok, same ratios to 1e-9)."""
    return (
        stored.ok
        and fresh.ok
        and all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
            for a, b in ((stored.max_ratio, fresh.max_ratio), (stored.normaliser_ratio, fresh.normaliser_ratio))
        )
    )


def read_map(path) -> PrivacyMap:
    """The privacy map stored in a mechanism file: public data only, read without checking anything else.

    Reads the metadata and the map's arrays only (not the kernels of a full file), so a front end can
    refuse points outside the map before :func:`load` verifies the file.  Whatever this returns,
    :func:`load` checks the file in full; a file that cannot be read raises :class:`MechanismFileError`.
    """
    from affine import Affine

    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in ("map_epsilon", "map_nodata", "map_population") if k in z.files}
        return PrivacyMap(
            arrays["map_epsilon"],
            Affine(*meta["transform"]),
            meta["crs_wkt"],
            arrays["map_nodata"].astype(bool),
            arrays.get("map_population"),
            meta.get("map_info", {}),
        )
    except FileNotFoundError:
        raise MechanismFileError(
            f"No mechanism file at {path!r}. Build one with EikonalMechanism.build(...).save(path)."
        ) from None
    except Exception as exc:  # not a zip, no meta, not a mechanism ...: load says precisely what
        raise MechanismFileError(
            f"{path!r} is not a readable geopriv mechanism file ({type(exc).__name__}); it may be truncated, "
            "corrupt or another kind of file. Rebuild it with EikonalMechanism.build(...).save(path)."
        ) from None


def _check_compact(path, pm: PrivacyMap, meta: dict, data: dict) -> None:
    """Refuse a compact file whose stored kernel problem (rate map, outputs, apex radii, cap, solver) is invalid."""
    ny, nx = pm.shape
    params = meta.get("params") or {}
    P, solver, cap = params.get("pad_cells"), params.get("solver", "graph"), meta.get("cap")
    kp, apex_t, oij = data["kernel_rate"], data["output_apex"], data["output_ij"]
    w = np.asarray(data["weights"])
    if w.ndim != 1:
        raise MechanismFileError(
            f"{path!r} is a compact mechanism file with invalid contents (weights has shape {w.shape}, "
            "expected one weight per output). Rebuild it."
        )
    M = len(w)
    problems = []
    if not isinstance(P, int) or P < 0:
        problems.append("params['pad_cells'] is missing or invalid")
    elif np.shape(kp) != (ny + 2 * P, nx + 2 * P):
        problems.append(f"kernel_rate has shape {np.shape(kp)}, expected {(ny + 2 * P, nx + 2 * P)}")
    if solver not in ("graph", "fmm"):
        problems.append(f"unknown solver {solver!r}")
    bits = params.get("graph_bits")
    if bits is not None and (
        isinstance(bits, bool) or not isinstance(bits, int) or not 8 <= bits <= 40 or solver != "graph"
    ):
        problems.append(f"params['graph_bits'] is {bits!r}, expected None or an integer 8 .. 40 with solver 'graph'")
    if not (isinstance(cap, (int, float)) and math.isfinite(cap) and cap > 0):
        problems.append("cap is not a finite number > 0")
    if np.asarray(kp).dtype.kind != "f" or not (np.all(np.isfinite(kp)) and np.all(np.asarray(kp) > 0)):
        problems.append("kernel_rate is not finite and > 0 everywhere")
    if (
        np.shape(apex_t) != (M,)
        or np.asarray(apex_t).dtype.kind != "f"
        or not (np.all(np.isfinite(apex_t)) and np.all(np.asarray(apex_t) >= 0))
    ):
        problems.append("output_apex is not one finite radius >= 0 per output")
    if np.shape(oij) != (M, 2) or np.asarray(oij).dtype.kind not in "iu":
        problems.append("output_ij is not one (row, col) pair per output")
    elif not problems:
        oi, oj = oij[:, 0] + P, oij[:, 1] + P
        if np.any(oi < 0) or np.any(oj < 0) or np.any(oi >= ny + 2 * P) or np.any(oj >= nx + 2 * P):
            problems.append("output_ij outside the padded grid")
    if problems:
        raise MechanismFileError(
            f"{path!r} is a compact mechanism file with invalid contents ({'; '.join(problems)}). Rebuild it."
        )


def _recompute_kernels(
    f: _StoredFile, pm: PrivacyMap, n_jobs: int, progress, mp_context, extremes: bool = True
) -> dict:
    """Kernels of a compact file (indptr, indices, kernel), recomputed as :meth:`EikonalMechanism.build` computed them,
    and their :class:`~.kernels.LogRatioExtremes` for verification (None unless ``extremes``).
    The file's kernel problem has been checked (:func:`_check_compact`)."""
    ny, nx = pm.shape
    meta, data = f.meta, f.data
    params = meta.get("params") or {}
    P, solver, cap = params.get("pad_cells"), params.get("solver", "graph"), meta.get("cap")
    kp, apex_t, oij = data["kernel_rate"], data["output_apex"], data["output_ij"]
    hx, hy = pm.cell_size
    problem = KernelProblem(
        kp=np.asarray(kp, np.float64),
        shape=(ny, nx),
        cell=(hy, hx),
        P=P,
        oi=oij[:, 0] + P,
        oj=oij[:, 1] + P,
        apex_t=np.asarray(apex_t, np.float64),
        cap=float(cap),
        solver=solver,
        graph_bits=params.get("graph_bits"),
    )
    S, _colmass, _sweeps, ext = compute_kernels(
        problem, n_jobs=int(n_jobs), progress=progress, mp_context=mp_context, extremes=extremes
    )
    indptr, indices, kernel = S.to_csr(release=True, threads=max(1, int(n_jobs)))
    return {"indptr": indptr, "indices": indices, "kernel": kernel, "extremes": ext}


def json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def digest(arrays: dict, meta: dict) -> str:
    """Unkeyed SHA-256 of the metadata and arrays: detects accidental corruption only (anyone can recompute it)."""
    return digests(arrays, meta)[0]


def digests(arrays: dict, meta: dict, key: bytes | None = None, content_meta: dict | None = None):
    """(SHA-256, HMAC-SHA256 under ``key`` or None) of the same content, in one pass over the arrays.

    With ``content_meta`` (:func:`content_meta`: the whole metadata but the checksum and signature,
    the stored report included), also the SHA-256 of that metadata and the same arrays, the
    content digest a verification stamp binds (:mod:`.stamps`): a third value.
    """
    heads = [meta] + ([meta] if key is not None else []) + ([content_meta] if content_meta is not None else [])
    hs = [hashlib.sha256()] + ([hmac.new(key, digestmod=hashlib.sha256)] if key is not None else [])
    if content_meta is not None:
        hs.append(hashlib.sha256())
    for h, m in zip(hs, heads):
        h.update(json.dumps(m, sort_keys=True, default=json_default).encode())

    def update(b):
        for h in hs:
            h.update(b)

    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        update(k.encode())
        update(str(a.dtype).encode())
        update(str(a.shape).encode())
        update(memoryview(a.reshape(-1)).cast("B") if a.size else b"")  # the bytes of a.tobytes(), without a copy
    out = (hs[0].hexdigest(), (hs[1].hexdigest() if key is not None else None))
    return out + (hs[-1].hexdigest(),) if content_meta is not None else out


def content_meta(meta: dict) -> dict:
    """The metadata a verification stamp covers: all of it (options, the stored report) but the checksum
    and the signature, which are computed from the rest.

    Round-tripped through JSON, as :func:`load` reads it, so that the digest at save is the one at load.
    """
    meta = json.loads(json.dumps(meta, default=json_default))
    meta.pop("sha256", None)
    meta.pop("hmac_sha256", None)
    return meta


def hmac_key(key) -> bytes:
    """A signing key as bytes (str is UTF-8 encoded)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise ParameterTypeError("key must be bytes or str (a secret kept apart from the mechanism files).")
    key = bytes(key)
    if not key:
        raise ParameterError("key must not be empty.")
    return key
