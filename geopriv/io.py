"""Reading inputs and writing outputs safely: ``geopriv.io.write_vector`` and friends.

The command line writes every output through this module, and so can you::

    from geopriv.io import write_vector
    released = geopriv.perturb(homes, level=math.log(4), radius=200)
    write_vector(released, "homes_private.gpkg", layer="homes_private", protect=["homes.gpkg"])

What it guarantees
------------------
* **The format comes from the extension**, checked before any work (:func:`check_output`):
  ``.gpkg`` (GeoPackage), ``.geojson`` / ``.json`` (GeoJSON), ``.fgb`` (FlatGeobuf, written
  without a spatial index, which would reorder the rows), ``.shp``
  (ESRI Shapefile), ``.csv`` (CSV, geometry as a ``WKT`` column, or points read from two
  columns with ``xy=`` written back into them, see :func:`write_vector`; CSV has no CRS: the
  provenance sidecar names it) and ``.parquet`` (GeoParquet, needs pyarrow).  Anything else
  is refused with the list above, rather than silently written in some default format.
* **Inputs are never overwritten**: the output is compared with every path in ``protect=``
  with :func:`os.path.samefile`, so a hard link or a symbolic link to an input is caught too
  (for a Shapefile, each of its ``.shp/.shx/.dbf/.prj/.cpg`` files).
* **Symbolic links are never written through**: an output path that is a symbolic link
  (dangling or not) is an existing output like any other.  Without ``overwrite`` it is refused
  (naming the link, with a fix: remove it or choose another path); with ``overwrite`` the link
  itself is replaced by a new regular file, and its target is never created, opened or changed.
  (Links in the *folders* of the path are followed as usual.)  The same holds for every file an
  output brings along (provenance sidecar, Shapefile parts) and for every geopriv writer (vector
  files, GeoTIFFs, reports, CSV tables, plots, mechanism files): they all end in
  :func:`write_new_file` or :class:`Staging`, whose final rename replaces the directory entry and
  never follows it, and which without ``overwrite`` links the new file into place ("create,
  never clobber").
* **Atomic replacement**: the output is written into a temporary directory beside the
  destination (same file system) and moved into place with :func:`os.replace` only once it is
  complete.  A run that fails, at any point, leaves every existing file byte-identical and no
  partial output behind (only a process killed outright can leave a hidden
  ``.NAME.*.geopriv-tmp`` directory beside the destination, which is safe to delete).
* **Runs writing into one folder take turns**, on every platform: each holds an exclusive lock
  on a hidden ``.geopriv.lock`` file in the destination's folder (:data:`LOCK_NAME`; a
  :mod:`filelock` lock, waited for as long as another run writes there) from its first staged
  output until it commits or fails, so two runs (two QGIS algorithms, two commands) adding
  layers to one GeoPackage both keep theirs.  The lock file is removed when the run lets go;
  like a staging directory, only a process killed outright can leave it, and it is safe to delete.
* **GeoPackages keep their other layers**: writing a layer into an existing GeoPackage copies
  the file next to it, writes or replaces that one layer in the copy, and moves the copy into
  place.  Without ``overwrite`` a *new* layer may be added to an existing GeoPackage, but a
  layer of the same name is refused; with it, only that layer is replaced.  (Layer names are
  compared case-insensitively, as SQLite does.)  A GeoPackage open in another program (a
  ``-wal`` journal beside it) is refused rather than copied half-written.
* **Provenance**: the release record (``gdf.attrs["geopriv"]``) goes into the GeoPackage
  layer's metadata (``layer_metadata={"geopriv": <json>}``; no sidecar), or for the other
  formats into a sidecar ``OUT.geopriv.json`` moved into place with the output.  Replacing an
  output that has no record removes a stale sidecar.
* **Shapefiles** are several files.  They are written together into the temporary directory and
  then moved one by one (``.shx``, ``.dbf``, ``.prj``, ``.cpg``, then ``.shp``); stale index files
  of the old output (``.qix``, ``.sbn``, ``.sbx``) and parts the new output does not have are
  removed afterwards.  Each move is atomic, the set is not: only a crash *during those few
  renames* (after all the work succeeded) could leave a mix of old and new parts.  Prefer
  GeoPackage where that matters.

Errors are :class:`InputError` / :class:`OutputError` (:class:`geopriv.GeoprivError`
subclasses): they name files, layers and row labels, never coordinates.
"""

from __future__ import annotations

import json
import os
import shutil
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .exceptions import Fix, InputError, OutputError

__all__ = [
    "write_raster",
    "FORMATS",
    "InputError",
    "OutputError",
    "OutputTarget",
    "Staging",
    "check_input",
    "check_output",
    "check_file_output",
    "check_output_not_input",
    "read_vector",
    "read_provenance",
    "write_vector",
    "sidecar_path",
    "table_xy",
    "XY_ATTR",
]

#: extension -> (OGR driver, or "GeoParquet" for geopandas' to_parquet; what it is)
FORMATS = {
    ".gpkg": ("GPKG", "GeoPackage"),
    ".geojson": ("GeoJSON", "GeoJSON"),
    ".json": ("GeoJSON", "GeoJSON"),
    ".fgb": ("FlatGeobuf", "FlatGeobuf"),
    ".shp": ("ESRI Shapefile", "ESRI Shapefile"),
    ".csv": ("CSV", "CSV with the geometry as a WKT column, or points as the x/y columns they were read from"),
    ".parquet": ("GeoParquet", "GeoParquet, needs pyarrow"),
}
#: the files of a Shapefile that a write replaces
SHAPEFILE_PARTS = (".shp", ".shx", ".dbf", ".prj", ".cpg")
#: index files of a Shapefile that would describe the old data: removed when it is replaced
SHAPEFILE_STALE = (".qix", ".sbn", ".sbx")
SIDECAR_SUFFIX = ".geopriv.json"
#: the key of ``gdf.attrs`` where :func:`read_vector` notes the columns it read points from with ``xy=``
#: (``{"x": name, "y": name, "columns": [the table's columns, in order], "crs": WKT or None}``)
XY_ATTR = "geopriv_xy"
#: the lock file a writer holds in the destination's folder while it writes there (removed afterwards)
LOCK_NAME = ".geopriv.lock"


#: how to replace an existing output
_OVERWRITE = Fix(
    "overwrite",
    python="Pass overwrite=True to replace it.",
    cli="Pass --overwrite to replace it.",
    qgis="Choose another output file.",
)
#: what to do about a symbolic link at an output path (geopriv never writes through one)
_LINK_FIX = Fix(
    "symbolic_link",
    python="Remove the link or choose another output path; or pass overwrite=True to replace the link itself "
    "with a new file (its target is left as it is).",
    cli="Remove the link or choose another output path; or pass --overwrite to replace the link itself with a "
    "new file (its target is left as it is).",
    qgis="Choose another output file, or remove the symbolic link.",
)


def exists_error(path, *, shown=None, of=None) -> OutputError:
    """The refusal of an existing output ``path`` (the one rule for every writer): names that very file.

    ``shown`` is how the user spelled the output; ``of`` the output that ``path`` belongs to
    when it is a file written beside it (a provenance sidecar, a Shapefile part), so that the
    message names the file that really exists.  A symbolic link (dangling or not) is named as
    one: geopriv never writes through it, and ``overwrite`` would replace the link itself.
    """
    name = os.fspath(shown if shown is not None else path)
    beside = "" if of is None else f" ({_beside(path, of)} {os.fspath(of)})"
    if os.path.islink(path):
        return OutputError(f"{name} is a symbolic link{beside}; geopriv never writes through a link", fix=_LINK_FIX)
    return OutputError(f"{name} exists{beside}", fix=_OVERWRITE)


def _beside(path, of) -> str:
    return "the provenance sidecar of" if os.fspath(path).endswith(SIDECAR_SUFFIX) else "written with"


def refuse_existing(paths, shown, overwrite: bool = False) -> bool:
    """Refuse the first of ``paths`` (the output first, then what it brings along) that exists, unless ``overwrite``.

    "Exists" is any directory entry, a symbolic link included (:func:`os.path.lexists`: a
    dangling link is never followed to create its target).  Returns whether any exists.
    """
    paths = [Path(p) for p in paths]
    existing = [p for p in paths if os.path.lexists(p)]
    if existing and not overwrite:
        first = existing[0]
        raise exists_error(first, shown=shown) if first == paths[0] else exists_error(first, of=shown)
    return bool(existing)


def _formats_text() -> str:
    return ", ".join(f"{ext} ({desc})" for ext, (_, desc) in FORMATS.items())


def sidecar_path(path) -> Path:
    """The provenance sidecar of an output: ``OUT.geopriv.json`` beside it."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _parts(path: Path) -> list[Path]:
    """Every file that makes up a vector file at ``path`` (a Shapefile is several).

    A Shapefile's parts are matched in any letter case (``a.SHP`` opens with ``a.dbf``), so an
    output can never replace a part of an input whose extension is spelled differently.
    """
    if path.suffix.lower() != ".shp":
        return [path]
    upper = path.suffix.isupper()
    names = [path.with_suffix(s.upper() if upper else s).name for s in SHAPEFILE_PARTS]
    wanted = {(path.stem + s).casefold() for s in SHAPEFILE_PARTS}
    try:
        names += [e for e in os.listdir(path.parent if str(path.parent) else ".") if e.casefold() in wanted]
    except OSError:
        pass
    return [path.parent / n for n in dict.fromkeys(names)]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (or cannot be stat'ed): not the same existing file
        return False


def _check_protect(outputs: Iterable[Path], protect, shown) -> None:
    outputs = [p for p in outputs if p.exists() or p.is_symlink()]
    for q in protect or ():
        if q is None or (isinstance(q, str) and not q.strip()):
            continue
        q = Path(q)
        for part in _parts(q) + [q]:
            for o in outputs:
                if _same_file(o, part) or _same_path(o, part):
                    raise OutputError(
                        f"the output {shown} is the input file {q} (the same path, a hard link or a symbolic link "
                        "to it); choose another output so the input is kept"
                    )


def _same_path(a: Path, b: Path) -> bool:
    """The same path once symbolic links are resolved (also for a link to a file that does not exist yet)."""
    try:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
    except (OSError, ValueError):
        return False


def check_output_not_input(output, inputs) -> None:
    """Refuse an output that is one of the inputs: the same path, a hard link or a symbolic link to one.

    The command line and the QGIS plugin call this for every output before any work, so that no
    input is ever written over.  Paths are compared with :func:`os.path.samefile` (the same file
    on disk: hard links, symbolic links, other spellings of the path) and, for files that do not
    exist yet, with :func:`os.path.realpath`.  A Shapefile input is protected with every one of
    its parts (``.shp/.shx/.dbf/.prj/.cpg``).

    Parameters
    ----------
    output : str or os.PathLike
        The output file.
    inputs : iterable of str or os.PathLike or None
        The inputs (None and empty entries are skipped).

    Raises
    ------
    OutputError
        ``output`` is the same file as one of ``inputs``.
    """
    if output is None or not os.fspath(output):
        return
    shown = os.fspath(output)
    _check_protect([Path(shown)], [q for q in inputs or () if q is not None], shown)


def _destination(path) -> Path:
    """The output path as given: a symbolic link there is replaced itself, never followed (see the module doc)."""
    return Path(path)


def _check_directory(dest: Path, shown) -> None:
    if dest.is_dir():
        raise OutputError(f"the output {shown} is a directory; give a file name such as {Path(shown) / 'out.gpkg'}")
    parent = dest.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(f"cannot create the output {shown}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write the output {shown}: no permission to create files in {parent}")


@dataclass(frozen=True)
class OutputTarget:
    """A checked vector output (what :func:`check_output` returns).

    ``path`` is the destination as given (a symbolic link there is replaced, never followed),
    ``driver`` the OGR driver (or ``"GeoParquet"``), ``layer`` the GeoPackage layer written (``None`` for other formats),
    ``keep_file`` whether an existing GeoPackage is kept and the layer written into a copy of
    it, ``replaces`` whether existing data (a file, or a GeoPackage layer) is replaced.
    """

    path: Path
    driver: str
    layer: str | None
    keep_file: bool
    replaces: bool
    shown: str

    @property
    def sidecar(self) -> Path | None:
        """The provenance sidecar (None for GeoPackage, whose layers carry it as metadata)."""
        return None if self.driver == "GPKG" else sidecar_path(self.path)


def check_output(path, layer: str | None = None, overwrite: bool = False, protect=()) -> OutputTarget:
    """Check a vector output before any work: format, existing data, inputs; nothing is written.

    Parameters
    ----------
    path : str or PathLike
        The output file; its extension picks the format (see :data:`FORMATS`).
    layer : str, optional
        GeoPackage layer to write (default: the file name without extension).  Other formats
        have no layers.
    overwrite : bool
        Allow replacing an existing file (GeoPackage: an existing layer of that name; the
        other layers are kept).  Adding a new layer to an existing GeoPackage needs no
        ``overwrite``.
    protect : iterable of paths
        Inputs that must not be written to (compared with :func:`os.path.samefile`).

    Raises
    ------
    OutputError
        Unknown extension, a layer name for a format without layers, pyarrow missing for
        GeoParquet, an existing output without ``overwrite``, an output that is an input, a
        directory, or a destination that cannot be written.
    """
    shown = os.fspath(path)
    ext = Path(shown).suffix.lower()
    if ext not in FORMATS:
        raise OutputError(
            f"cannot tell the output format of {shown!r} from its extension "
            f"({ext or 'none'}); use one of: {_formats_text()}"
        )
    driver = FORMATS[ext][0]
    if driver == "GeoParquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise OutputError("writing GeoParquet (.parquet) needs pyarrow: pip install pyarrow") from None
    if layer is not None and driver != "GPKG":
        raise OutputError(f"a layer name applies to GeoPackage (.gpkg) outputs only; {shown!r} is {FORMATS[ext][1]}")
    if layer is not None and not str(layer).strip():
        raise OutputError("the output layer name is empty")
    dest = _destination(shown)
    _check_directory(dest, shown)
    sidecar = None if driver == "GPKG" else sidecar_path(dest)
    files = _parts(dest) + ([sidecar] if sidecar is not None else [])
    _check_protect(files, protect, shown)

    if driver == "GPKG":
        name = str(layer) if layer is not None else dest.stem
        if dest.is_symlink():  # never written through: replaced itself with overwrite (a new file), else refused
            refuse_existing([dest], shown, overwrite)
            return OutputTarget(dest, driver, name, keep_file=False, replaces=True, shown=shown)
        if not dest.exists():
            return OutputTarget(dest, driver, name, keep_file=False, replaces=False, shown=shown)
        import pyogrio

        try:
            layers = [str(n) for n in pyogrio.list_layers(dest)[:, 0]]
        except Exception:  # not a GeoPackage we can open: only --overwrite may replace the whole file
            if not overwrite:
                raise OutputError(f"{shown} exists (and is not a readable GeoPackage)", fix=_OVERWRITE) from None
            return OutputTarget(dest, driver, name, keep_file=False, replaces=True, shown=shown)
        for journal in ("-wal", "-journal"):
            if Path(str(dest) + journal).exists():
                raise OutputError(
                    f"{shown} is open in another program (its {journal[1:]} file exists): close it (QGIS: remove "
                    "its layers from the project) and run again"
                )
        exists = name.lower() in {n.lower() for n in layers}
        if exists and not overwrite:
            raise OutputError(
                f"{shown} already has a layer {name!r}",
                fix=Fix(
                    "overwrite",
                    python="Pass overwrite=True to replace that layer (the file's other layers are "
                    "kept), or choose another layer name (layer=).",
                    cli="Pass --overwrite to replace that layer (the file's other layers are kept), or choose "
                    "another layer name with --out-layer.",
                    qgis="Choose another layer name, or let QGIS replace the layer.",
                ),
            )
        return OutputTarget(dest, driver, name, keep_file=True, replaces=exists, shown=shown)

    existing = refuse_existing(files, shown, overwrite)  # the file that exists is named (the sidecar, a part)
    return OutputTarget(dest, driver, None, keep_file=False, replaces=existing, shown=shown)


def check_file_output(path, *, suffixes: Iterable[str], what: str, overwrite: bool = False, protect=()) -> Path:
    """Check a single-file output (a GeoTIFF, a mechanism, a CSV table) before any work.

    Returns the destination path as given (a symbolic link there is an existing output: refused
    without ``overwrite``, replaced itself with it, never followed).  Raises :class:`OutputError`
    for a wrong extension, an existing file or link without ``overwrite``, or an output that is
    an input.
    """
    shown = os.fspath(path)
    suffixes = tuple(s.lower() for s in suffixes)
    if Path(shown).suffix.lower() not in suffixes:
        raise OutputError(f"{what} output {shown!r} must end in {' or '.join(suffixes)}")
    dest = _destination(shown)
    _check_directory(dest, shown)
    _check_protect([dest], protect, shown)
    refuse_existing([dest], shown, overwrite)
    return dest


def check_input(path, what: str = "input") -> Path:
    """The input path, which must be an existing file (or, for a Shapefile, its .shp)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} file {os.fspath(path)} does not exist")
    if p.is_dir() and p.suffix.lower() != ".gdb":
        raise InputError(f"{what} {os.fspath(path)} is a directory; give a file")
    return p


# ---------------------------------------------------------------------------- reading
def _layer_fix() -> Fix:
    return Fix(
        "choose_layer",
        python="Choose one with layer=.",
        cli="Choose one with --layer NAME.",
        qgis="Choose the layer to use.",
    )


def _xy_points(table, xy, where: str):
    """``table`` with points from its columns ``xy`` (x, y), which are dropped (they hold the true locations)."""
    import geopandas as gpd
    import pandas as pd

    names = [str(c) for c in table.columns]
    x, y = (str(c) for c in xy)
    missing = [c for c in (x, y) if c not in names]
    if missing or x == y:
        problem = (
            f"{where} has no column {missing[0]!r}"
            if missing
            else f"the x and y columns of {where} are the same column {x!r}"
        )
        raise InputError(
            f"{problem}; its columns are: " + (", ".join(repr(n) for n in names) or "none"),
            fix=Fix(
                "xy_columns",
                python="Give xy=(x column, y column), e.g. xy=('lon', 'lat').",
                cli="Give --xy X_COLUMN Y_COLUMN, e.g. --xy lon lat.",
                qgis="",
            ),
        )
    table = table.copy()
    table.columns = names
    # text that is not a number (and empty cells) becomes NaN: such rows are refused by the release, named
    xs = pd.to_numeric(table[x], errors="coerce").to_numpy(dtype=float)
    ys = pd.to_numeric(table[y], errors="coerce").to_numpy(dtype=float)
    gdf = gpd.GeoDataFrame(table.drop(columns=[x, y]), geometry=gpd.points_from_xy(xs, ys))
    gdf.attrs[XY_ATTR] = {"x": x, "y": y, "columns": names}  # a CSV output writes the points back there
    return gdf


def read_vector(path, layer: str | None = None, *, crs=None, what: str = "input", xy=None):
    """Read a vector file (any OGR format, or GeoParquet) as a GeoDataFrame, with checks.

    * a file with several layers needs ``layer`` (no silent choice of the first one); a layer
      that does not exist is refused, listing the layers that do (file structure, not data);
    * CSV: the geometry is read from a ``WKT`` column, which is not kept as an attribute (it
      would hold the true locations), and column types are detected (numbers, date-times);
    * ``xy=(x column, y column)``: the points are built from these two numeric columns instead
      (a CSV of longitude/latitude, a table of eastings/northings; any table format), which are
      not kept as attributes; cells that are not numbers give points the release refuses, by row.
      The columns' names and places are noted in ``gdf.attrs["geopriv_xy"]`` (:data:`XY_ATTR`;
      file structure, no data), which a release carries along: :func:`write_vector` then writes
      a CSV output's points back as these two columns, in their place, instead of a ``WKT`` column;
    * ``crs``: the CRS the coordinates are really in, for files without one (CSV) or with a
      wrong one (it replaces the file's; coordinates are not converted).

    Coordinates that cannot be in the CRS (metres labelled EPSG:4326, latitude 95) are refused
    by the release itself, naming rows.  Errors (:class:`InputError`) name the file, its
    layers and columns, never data values.
    """
    import geopandas as gpd
    import pyogrio

    p = check_input(path, what)
    shown = os.fspath(path)
    where = f"{what} {shown}" + (f" layer {layer!r}" if layer is not None else "")
    if xy is not None and (isinstance(xy, (str, bytes)) or len(xy) != 2):
        raise InputError(
            f"xy must name two columns (x, then y), got {xy!r}",
            fix=Fix("xy_columns", python="E.g. xy=('lon', 'lat').", cli="E.g. --xy lon lat.", qgis=""),
        )
    if p.suffix.lower() == ".parquet":
        if layer is not None:
            raise InputError(
                f"GeoParquet has no layers; drop the layer name for {shown}",
                fix=Fix("choose_layer", python="Leave layer= out.", cli="Leave --layer out.", qgis=""),
            )
        try:
            if xy is not None:
                import pandas as pd

                gdf = _xy_points(pd.read_parquet(p), xy, where)
            else:
                gdf = gpd.read_parquet(p)
        except ImportError:
            raise InputError("reading GeoParquet (.parquet) needs pyarrow: pip install pyarrow") from None
    else:
        try:
            if layer is None and len(layers := [str(n) for n in pyogrio.list_layers(p)[:, 0]]) > 1:
                names = ", ".join(repr(n) for n in layers[:20]) + (", ..." if len(layers) > 20 else "")
                error = InputError(f"{shown} has {len(layers)} layers ({names})", fix=_layer_fix())
                error.layers = layers
                raise error
            csv = p.suffix.lower() == ".csv"  # WKT column as geometry (not kept as text), typed columns
            options = {"KEEP_GEOM_COLUMNS": "NO", "AUTODETECT_TYPE": "YES"} if csv else {}
            if xy is not None:
                gdf = _xy_points(pyogrio.read_dataframe(p, layer=layer, read_geometry=False, **options), xy, where)
            else:
                gdf = pyogrio.read_dataframe(p, layer=layer, **options)
        except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError) as exc:
            # opening errors are about the file or the layer (GDAL's text names the path), not its data
            if layer is not None and isinstance(exc, pyogrio.errors.DataLayerError):
                try:
                    layers = [str(n) for n in pyogrio.list_layers(p)[:, 0]]
                except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError):
                    layers = None
                if layers is not None and layer not in layers:
                    names = ", ".join(repr(n) for n in layers[:20]) + (", ..." if len(layers) > 20 else "")
                    error = InputError(f"{shown} has no layer {layer!r}; its layers are: {names}", fix=_layer_fix())
                    error.layers = layers
                    raise error from None
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot read {where}: {first}") from None
    if not isinstance(gdf, gpd.GeoDataFrame):
        csv = p.suffix.lower() == ".csv"
        raise InputError(
            f"{where} has no geometry"
            + (
                " (a CSV file needs a column named WKT holding the geometry, or two columns of coordinates)"
                if csv
                else ""
            ),
            fix=Fix(
                "xy_columns",
                python="Give xy=(x column, y column), e.g. xy=('lon', 'lat').",
                cli="Give its coordinate columns with --xy X_COLUMN Y_COLUMN (and --crs), e.g. "
                "--xy lon lat --crs EPSG:4326.",
                qgis="",
            )
            if csv
            else None,
        )
    if crs is not None:
        from pyproj import CRS
        from pyproj.exceptions import CRSError as ProjCRSError

        try:
            crs = CRS.from_user_input(crs)
        except ProjCRSError:
            raise InputError(f"the CRS {crs!r} is not one pyproj knows (give e.g. EPSG:4326 or 32631)") from None
        gdf = gdf.set_crs(crs, allow_override=True)
    if isinstance(gdf.attrs.get(XY_ATTR), dict):  # points written back as x/y only in this CRS
        gdf.attrs[XY_ATTR] = dict(gdf.attrs[XY_ATTR], crs=gdf.crs.to_wkt() if gdf.crs is not None else None)
    return gdf


def table_xy(path, xy, layer: str | None = None):
    """``xy`` if ``path`` is a table without geometry that has both columns, else None.

    A release of points read with ``xy=`` is written to CSV in those two columns (see
    :func:`write_vector`): this says whether a file is such a table, so that it is read back with
    the same ``xy`` (``geopriv report true.csv released.csv --xy lon lat``).  A file with a
    geometry (a GeoPackage, a CSV with a ``WKT`` column) or without those columns gives None, as
    does one that cannot be opened (reading it then says why).
    """
    if xy is None or isinstance(xy, (str, bytes)) or len(xy) != 2:
        return None
    import pyogrio

    p = Path(path)
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq

            schema = pq.read_schema(p)
        except Exception:  # no pyarrow, or not a Parquet file: reading it says why
            return None
        geo = (schema.metadata or {}).get(b"geo")
        names = set(schema.names)
    else:
        csv = p.suffix.lower() == ".csv"
        options = {"KEEP_GEOM_COLUMNS": "NO", "AUTODETECT_TYPE": "YES"} if csv else {}
        try:
            info = pyogrio.read_info(p, layer=layer, **options)
        except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError):
            return None
        geo = info.get("geometry_type")
        names = {str(n) for n in info["fields"]}
    return tuple(xy) if geo is None and {str(c) for c in xy} <= names else None


def read_provenance(path, layer: str | None = None) -> dict | None:
    """The release record written with a vector file (GeoPackage layer metadata, else ``OUT.geopriv.json``), or None.

    What :func:`write_vector` wrote: public fields only (see :mod:`geopriv.provenance`).  A file
    without a record, or with one that cannot be read, gives None.
    """
    import pyogrio

    p = Path(path)
    text = None
    if p.suffix.lower() == ".gpkg":
        try:
            text = (pyogrio.read_info(p, layer=layer).get("layer_metadata") or {}).get("geopriv")
        except (pyogrio.errors.DataSourceError, pyogrio.errors.DataLayerError):
            return None
    elif sidecar_path(p).is_file():
        try:
            text = sidecar_path(p).read_text(encoding="utf-8")
        except OSError:
            return None
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


# ---------------------------------------------------------------------------- writing
def write_new_file(
    path, write, *, overwrite: bool = False, exists=None, prefix: str = ".geopriv-", mode: int | None = None
) -> None:
    """Write ``path`` atomically: ``write(binary file)`` into a temporary file in the same folder, synced, then moved.

    Never replaces an existing file (or link) unless ``overwrite``: the temporary file is hard-linked
    into place ("create, never clobber"; a file system without hard links is checked first), and a
    link at ``path`` (dangling or not) is replaced, never written through (:func:`_place`).  This is
    the one rule of every geopriv output; :class:`Staging` follows it too.  ``exists(path)`` gives
    the exception to raise for an existing file.  The temporary file is created owner-only; ``mode`` (e.g. ``0o644``
    less the umask) widens it for files that are not secret.  A failed write leaves no temporary.
    """
    import tempfile

    path = os.fspath(path)
    exists = exists or (lambda p: FileExistsError(f"{p!r} exists; pass overwrite=True to replace it."))
    if not overwrite and os.path.lexists(path):
        raise exists(path)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=os.path.dirname(os.path.abspath(path)))
    try:
        if mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if not _place(tmp, path, replace=overwrite):
            raise exists(path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _regular_file(path) -> bool:
    """Whether ``path`` is a regular file itself (:func:`os.lstat`: a symbolic link is not, whatever its target)."""
    import stat

    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _place(tmp, dest, *, replace: bool) -> bool:
    """Move the finished file ``tmp`` to ``dest`` (same folder) without ever following a link at ``dest``.

    ``replace``: :func:`os.replace`, which replaces the directory entry ``dest`` (a file, or a
    symbolic link itself: a rename never follows the last component).  Otherwise the file is
    hard-linked into place, which fails on any existing entry (a dangling link included; a file
    system without hard links is checked with :func:`os.path.lexists` first), and returns False
    then, leaving ``dest`` as it was.  Returns True when the file is in place (``tmp`` no longer
    names it: moved, or hard-linked and unlinked).
    """
    tmp, dest = os.fspath(tmp), os.fspath(dest)
    if replace:
        os.replace(tmp, dest)
        return True
    try:
        os.link(tmp, dest)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: check, then move
        if os.path.lexists(dest):
            return False
        os.replace(tmp, dest)
        return True
    os.unlink(tmp)
    return True


def write_raster(path, bands, *, transform, crs, nodata, record=None, band_names=(), overwrite: bool = False):
    """Write ``bands`` (2-D arrays of one dtype) as a tiled, compressed GeoTIFF, atomically; returns the path.

    The provenance ``record`` goes into the file's metadata (tag ``GEOPRIV``).  An existing file is
    refused unless ``overwrite``; a failed write leaves nothing behind.
    """
    from rasterio.io import MemoryFile

    dest = check_file_output(path, suffixes=(".tif", ".tiff"), what="raster", overwrite=overwrite)
    rows, cols = bands[0].shape
    profile = {
        "driver": "GTiff",
        "height": rows,
        "width": cols,
        "count": len(bands),
        "dtype": str(bands[0].dtype),
        "crs": crs.to_wkt(),
        "transform": transform,
        "nodata": nodata,
        "compress": "deflate",
    }
    if rows >= 256 and cols >= 256:
        profile.update(tiled=True, blockxsize=256, blockysize=256)
    with MemoryFile() as mem:
        with mem.open(**profile) as ds:
            for i, band in enumerate(bands, start=1):
                ds.write(band, i)
            for i, name in enumerate(band_names, start=1):
                ds.set_band_description(i, name)
            if record is not None:
                ds.update_tags(GEOPRIV=_record_json(record))
        data = mem.read()
    write_new_file(
        dest,
        lambda fh: fh.write(data),
        overwrite=overwrite,
        exists=lambda p: exists_error(p, shown=path),  # a file or a link there (never written through)
        mode=0o644 & ~_umask(),
    )
    aux = Path(os.fspath(dest) + ".aux.xml")  # a stale GDAL sidecar would override the new file's metadata
    if overwrite and os.path.lexists(aux):
        aux.unlink()  # (a link there: the link itself)
    return dest


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _record_json(record, indent=None) -> str:
    return json.dumps(record, indent=indent, default=str)


def _xy_fix() -> Fix:
    return Fix(
        "xy_output",
        python="Leave xy= out to write the geometry as a WKT column, or write another format (.gpkg keeps any "
        "geometry).",
        cli="Write another format (.gpkg keeps any geometry).",
        qgis="",
    )


def _xy_names(xy) -> tuple[str, str]:
    if isinstance(xy, (str, bytes)) or len(xy) != 2 or str(xy[0]) == str(xy[1]):
        raise OutputError(
            f"xy must name two different columns (x, then y), got {xy!r}",
            fix=Fix("xy_columns", python="E.g. xy=('lon', 'lat').", cli="E.g. --xy lon lat.", qgis=""),
        )
    return str(xy[0]), str(xy[1])


def _coordinate_text(values) -> list[str]:
    """Each coordinate as the shortest text that reads back as the same float (``repr``): the lattice's value,
    no digit invented and none lost; a missing or empty point gives an empty cell."""
    import math

    return ["" if math.isnan(v) else repr(v) for v in values.tolist()]


def _xy_table(gdf, xy=None, shown=None):
    """The table a CSV output is written as when its points go into two columns, or None (geometry as WKT).

    ``xy=None``: the columns noted by :func:`read_vector` (``gdf.attrs[XY_ATTR]``), used when the
    output is still in the CRS they were read in, holds only two-dimensional points (or none, an
    empty cell) and has no other column of those names; otherwise the geometry goes into a WKT
    column, as for any other table.  ``xy=(x, y)`` asks for these columns: an output that cannot
    be written so is refused.  The columns take their places in the input's column order (the
    geometry's place without a note); columns the input did not have follow, in their order.
    """
    import pandas as pd
    import shapely
    from pandas.api.types import is_integer_dtype

    note = gdf.attrs.get(XY_ATTR)
    note = note if isinstance(note, dict) and {"x", "y"} <= note.keys() else None
    if xy is None and note is None:
        return None
    x, y = _xy_names(xy if xy is not None else (note["x"], note["y"]))
    if note is not None and (note["x"], note["y"]) != (x, y):
        note = None  # other names than those read: the geometry's place
    geom = gdf.geometry.name
    values = gdf.geometry.values
    kind = shapely.get_type_id(values)  # -1: missing
    others = [c for c in gdf.columns if c != geom]
    problem = None
    if not ((kind == 0) | (kind == -1)).all():
        problem = "holds geometries other than points"
    elif shapely.has_z(values).any():
        problem = "holds points with a z coordinate"
    elif taken := [c for c in (x, y) if c in {str(c) for c in others}]:
        problem = f"already has a column {taken[0]!r}"
    elif xy is None and "crs" in note and not _same_crs(gdf.crs, note["crs"]):
        problem = "is in another CRS than the x/y columns it was read from"
    if problem is not None:
        if xy is None:
            return None
        raise OutputError(
            f"the points of {shown} cannot be written as the columns {x!r}, {y!r}: it {problem}", fix=_xy_fix()
        )

    table = pd.DataFrame(gdf.drop(columns=geom), copy=False)
    table.attrs = {}
    table[x] = pd.Series(_coordinate_text(shapely.get_x(values)), index=gdf.index, dtype=object)
    table[y] = pd.Series(_coordinate_text(shapely.get_y(values)), index=gdf.index, dtype=object)
    if note is not None and isinstance(note.get("columns"), list):
        by_name = {str(c): c for c in others}
        by_name.update({x: x, y: y})
        order = list(dict.fromkeys(by_name[str(n)] for n in note["columns"] if str(n) in by_name))
        order += [c for c in others if c not in order] + [c for c in (x, y) if c not in order]
    else:
        at = list(gdf.columns).index(geom)
        order = others[:at] + [x, y] + others[at:]
    table = table[order]
    if list(table.index.names) != [None] or not is_integer_dtype(table.index.dtype):  # as geopandas' to_file
        table = table.reset_index(drop=False)
    return table


def _same_crs(crs, wkt) -> bool:
    if crs is None or wkt is None:
        return crs is None and wkt is None
    from pyproj import CRS

    try:
        return CRS.from_user_input(crs) == CRS.from_wkt(wkt)
    except Exception:  # an unreadable note: not the CRS the columns were read in
        return False


class Staging:
    """Outputs written beside their destinations, moved into place together by :meth:`commit`.

    Use as a context manager: on leaving it without :meth:`commit` (an error), every temporary
    file is removed and no destination has been touched::

        with Staging() as stage:
            stage.vector(released, check_output("out.gpkg", protect=["in.gpkg"]))
            stage.file(check_file_output("ledger.csv", suffixes=[".csv"], what="ledger"),
                       lambda tmp: ledger.to_csv(tmp))
            stage.commit()
    """

    def __init__(self):
        self._tmpdirs: list[Path] = []
        self._moves: list[tuple[Path, Path, bool]] = []  # (staged file, destination, may replace)
        self._remove: list[Path] = []
        self._made: list[Path] = []
        self._locks: dict[str, object] = {}  # folder -> its held filelock.FileLock
        self._unchanged: list[tuple[Path, tuple]] = []
        self._done = False

    def _lock(self, directory: Path) -> None:
        """Hold an exclusive lock on the destination's folder until close (geopriv writers queue).

        Two geopriv runs writing into one GeoPackage (or one file) then take turns: the second
        copies the file only after the first has committed, so no layer or file is lost.  The
        lock is a :mod:`filelock` lock (``flock`` on Unix, ``LockFileEx``/``msvcrt.locking`` on
        Windows) on ``LOCK_NAME`` in that folder, waited for without a time limit (another run's
        write ends); each :class:`Staging` opens its own, so threads of one process (QGIS runs
        algorithms in threads) queue too.  :meth:`close` releases it and removes the file.
        """
        key = os.path.realpath(directory)
        if key in self._locks:
            return
        from filelock import FileLock

        # thread_local=False: released by close() whichever thread calls it
        lock = FileLock(os.path.join(key, LOCK_NAME), timeout=-1, thread_local=False)
        try:
            lock.acquire()
        except (OSError, NotImplementedError):  # no permission there, or a file system without locks
            raise OutputError(
                f"cannot write into {key}: geopriv could not lock that folder against another run writing there "
                "at the same time",
                fix=Fix.same(
                    "output_folder",
                    "Write the output to a folder on a local disk that you can write to (then copy "
                    "it where it belongs).",
                ),
            ) from None
        self._locks[key] = lock

    @staticmethod
    def _unlock(lock) -> None:
        """Release a folder's lock and remove its file (no lock file stays in the user's folder).

        On Unix the file is unlinked *while still locked*: a run that opened the old file meanwhile
        gets a lock on a file no longer in the folder, which filelock (>= 3.20.4, the floor) detects
        (``st_nlink == 0``) and retries on the new one, so two runs never both hold the lock.
        Unlinking after the release could split them (the second locking the old file, a third a new
        one).  On Windows an open file cannot be removed: it is removed after the release, and only if no
        other run has it open (the next one to release removes it then).
        """
        from filelock import UnixFileLock, WindowsFileLock

        path = lock.lock_file
        if isinstance(lock, UnixFileLock):  # not after filelock's fallback to an existence lock (it removes that)
            try:
                os.unlink(path)
            except OSError:  # pragma: no cover - already gone
                pass
        lock.release()
        if isinstance(lock, WindowsFileLock):  # pragma: no cover - Windows
            try:
                os.unlink(path)
            except OSError:  # another run has it open (and removes it when it is done)
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _tmpdir(self, dest: Path) -> Path:
        missing = []
        parent = dest.parent
        while not parent.exists():
            missing.append(parent)
            parent = parent.parent
        dest.parent.mkdir(parents=True, exist_ok=True)
        self._made.extend(missing)  # removed again if nothing is committed
        self._lock(dest.parent)
        # registered before it is created: an interrupt (Ctrl-C, SIGTERM) between the two would
        # otherwise leave a staging directory nobody removes (close() ignores missing ones)
        while True:
            tmp = dest.parent / f".{dest.name}.{secrets.token_hex(6)}.geopriv-tmp"
            self._tmpdirs.append(tmp)
            try:
                tmp.mkdir(mode=0o700)
            except FileExistsError:  # pragma: no cover - 48 random bits
                self._tmpdirs.remove(tmp)
                continue
            return tmp

    def file(self, dest, write: Callable[[Path], object], *, overwrite: bool = True) -> None:
        """Stage one file: ``write(tmp_path)`` writes it; it replaces ``dest`` at commit.

        ``overwrite=False``: an existing ``dest`` (or a link there) is not replaced, the commit is
        refused instead (the check of :func:`check_file_output` made again, under the folder's lock).
        A symbolic link at ``dest`` is replaced itself, never written through.
        """
        dest = Path(dest)
        tmp = self._tmpdir(dest) / dest.name
        write(tmp)
        if not tmp.exists():  # pragma: no cover - a writer that wrote elsewhere
            raise OutputError(f"nothing was written for {dest}")
        self._moves.append((tmp, dest, overwrite))
        if dest.suffix.lower() in (".tif", ".tiff"):
            # GDAL lets a leftover OUT.tif.aux.xml override the new file's georeferencing
            self._remove.append(dest.with_name(dest.name + ".aux.xml"))

    def vector(self, gdf, target: OutputTarget, record=None, *, xy=None) -> None:
        """Stage a vector output checked by :func:`check_output` (provenance from ``gdf.attrs``).

        A CSV output's points go into the x/y columns they were read from (or ``xy=``), see
        :func:`write_vector`.
        """
        import geopandas as gpd

        if isinstance(gdf, gpd.GeoSeries):
            gdf = gdf.to_frame()
        if record is None:
            record = gdf.attrs.get("geopriv")
        if xy is not None and target.driver != "CSV":
            raise OutputError(
                f"xy= writes the points of a CSV output as two columns; {target.shown} is not a .csv file",
                fix=Fix("xy_output", python="Leave xy= out, or write a .csv file.", cli="", qgis=""),
            )
        table = _xy_table(gdf, xy, target.shown) if target.driver == "CSV" else None
        if XY_ATTR in gdf.attrs:  # a note for this writer only: not written into the file's metadata
            gdf = gdf.copy(deep=False)
            gdf.attrs = {k: v for k, v in gdf.attrs.items() if k != XY_ATTR}
        dest = target.path
        tmpdir = self._tmpdir(dest)  # takes the directory's lock
        # checked again under the lock: another run may have written it since check_output
        check_output(dest, target.layer if target.driver == "GPKG" else None, target.replaces, ())
        tmp = tmpdir / dest.name
        if target.driver == "GeoParquet":
            gdf.to_parquet(tmp)
        else:
            kwargs = {}
            if target.driver == "GPKG":
                kwargs["layer"] = target.layer
                if record is not None:
                    kwargs["layer_metadata"] = {"geopriv": _record_json(record)}
                if not target.keep_file:  # QGIS 3.22 (GDAL 3.6) warns on every open of a GeoPackage 1.4 file
                    kwargs["dataset_options"] = {"VERSION": "1.2"}
                if target.keep_file:
                    st = os.stat(dest)
                    self._unchanged.append((dest, (st.st_ino, st.st_size, st.st_mtime_ns)))
                    shutil.copy2(dest, tmp)  # the other layers come along; one layer is written into the copy
            elif target.driver == "CSV":
                kwargs["layer_options"] = {"GEOMETRY": "AS_WKT"}
            elif target.driver == "FlatGeobuf":  # a spatial index would reorder the rows (matched by order)
                kwargs["layer_options"] = {"SPATIAL_INDEX": "NO"}
            if table is not None:  # the points as two columns of text (each coordinate's repr), quoted only if needed
                import pyogrio

                pyogrio.write_dataframe(table, tmp, driver="CSV", layer_options={"STRING_QUOTING": "IF_NEEDED"})
            else:
                gdf.to_file(tmp, driver=target.driver, engine="pyogrio", **kwargs)
        produced = sorted(p for p in tmpdir.iterdir() if p != tmp)
        replace = target.replaces or target.keep_file  # else nothing may be there (create, never clobber)
        moves = [(p, dest.parent / p.name, replace) for p in produced] + [(tmp, dest, replace)]  # the main file last
        if target.driver == "ESRI Shapefile":
            new_names = {p.name for p in produced} | {dest.name}
            self._remove += [p for p in _parts(dest) if p.name not in new_names]
            upper = dest.suffix.isupper()
            self._remove += [dest.with_suffix(s.upper() if upper else s) for s in SHAPEFILE_STALE]
        sidecar = target.sidecar
        if sidecar is not None:
            if record is not None:
                side_tmp = tmpdir / sidecar.name
                side_tmp.write_text(_record_json(record, indent=2) + "\n")
                moves.append((side_tmp, sidecar, replace))
            else:
                self._remove.append(sidecar)  # a record of some earlier release would now be wrong
        self._moves += moves

    def commit(self) -> None:
        """Move every staged file into place (each move atomic), then remove stale files."""
        for dest, stamp in self._unchanged:  # edited by another program meanwhile: keep its edits
            try:
                st = os.stat(dest)
                now = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                now = None
            if now != stamp:
                raise OutputError(
                    f"{dest} changed while geopriv was writing its layer (another program saved to it); nothing was "
                    "replaced. Run again when the file is not being edited."
                )
        for _, dest, replace in self._moves:  # checked again under the lock, before anything moves
            if not replace and os.path.lexists(dest):
                raise exists_error(dest)
        for tmp, dest, replace in self._moves:
            if _regular_file(dest):  # not a link's target: a link is replaced by a new file
                try:
                    shutil.copymode(dest, tmp)  # keep the permissions of the file being replaced
                except OSError:  # pragma: no cover
                    pass
            if not _place(tmp, dest, replace=replace):  # only another program writing there meanwhile
                raise exists_error(dest)
        for stale in self._remove:  # a link there is removed itself
            if os.path.lexists(stale) and not any(stale == d for _, d, _ in self._moves):
                stale.unlink()
        self._done = True
        self.close()

    def close(self) -> None:
        """Remove the temporary directories (and, without a commit, directories this created)."""
        for d in self._tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
        self._tmpdirs = []
        for lock in self._locks.values():
            self._unlock(lock)
        self._locks = {}
        if not self._done:
            for d in self._made:  # innermost first
                try:
                    d.rmdir()
                except OSError:
                    pass
        self._made = []


def write_vector(
    gdf, path, *, layer: str | None = None, overwrite: bool = False, protect=(), record=None, xy=None
) -> Path:
    """Write a GeoDataFrame to a vector file, atomically, never over an input.

    Parameters
    ----------
    gdf : GeoDataFrame or GeoSeries
        What to write; ``gdf.attrs["geopriv"]`` (the release record) is written as provenance
        unless ``record`` is given.
    path : str or PathLike
        The output; its extension picks the format: ``.gpkg .geojson .json .fgb .shp .csv
        .parquet`` (see :data:`FORMATS`).
    layer : str, optional
        GeoPackage layer name (default: the file name without extension).  Only that layer
        is written or replaced; the file's other layers are kept.
    overwrite : bool
        Replace an existing file (GeoPackage: an existing layer of that name).
    protect : iterable of paths
        Input files the output must not be (hard links and symbolic links included).
    record : dict, optional
        Provenance to write instead of ``gdf.attrs["geopriv"]``.
    xy : (str, str), optional
        CSV only: write the points as these two columns (x, then y) instead of a ``WKT``
        column; each coordinate is written as the shortest text that reads back as the same
        float, so a released point stays exactly on its lattice.  By default a CSV output of
        points read with ``read_vector(..., xy=...)`` (a release of them carries the note
        ``gdf.attrs["geopriv_xy"]`` along) is written back into those two columns, in their
        place among the columns, while it is in the CRS they were read in; anything else gets
        a ``WKT`` column.

    Returns
    -------
    Path
        The file written.

    See Also
    --------
    check_output : the checks alone, to run before any expensive work.
    """
    target = check_output(path, layer, overwrite, protect)
    with Staging() as stage:
        stage.vector(gdf, target, record, xy=xy)
        stage.commit()
    return target.path
