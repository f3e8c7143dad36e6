"""The diffusion release kind: one location released along a public path over a network (graded release)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..crs import as_crs
from ..exceptions import Fix, GeoprivError, ParameterTypeError
from ..frame import (
    DEFAULT_MAX_DISTORTION,
    check_grid,
    declared_bounds,
    public_frame,
    public_lattice,
    truncate_and_snap,
)
from ..precision import check_noise_scale
from ..rng import make_rng, unordered
from .common import check_release_input, declared_diameter

#: how a graded release's epsilons are given, per front end
_SCHEDULE_FIX = Fix(
    "epsilon_schedule",
    python="Epsilon is per ground metre: e.g. math.log(4) / 50 at 1 hop is ln 4 within 50 m.",
    cli="The --epsilon-table epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
    qgis="The epsilon table's epsilons are per ground metre: e.g. 1:ln4/50 is ln 4 within 50 m at 1 hop.",
)


def release_diffusion(
    data,
    source,
    epsilons,
    recipients,
    *,
    path=None,
    rng=None,
    bounds=None,
    grid="auto",
    max_distortion: float = DEFAULT_MAX_DISTORTION,
    before_noise=None,
):
    """Release the location of row ``source`` to ``recipients`` at ``epsilons`` (per ground metre) from one path.

    The graded release of :mod:`geopriv.mechanisms.diffusion` through the public release path:

    1. validation of the points and the CRS (no attribute is released); ``bounds=`` that look
       computed from the data (points of ANY row, not only the source's, on two or more of its
       edges: ``bounds=gdf.total_bounds``) are refused, because they are published;
    2. the public planar frame (a path's noise vectors are shared by recipients, so it needs a
       plane: the CRS itself when its scale is bounded over its area of use or ``bounds=``,
       else an equidistant frame centred on the declared ``bounds=``); the source must lie in
       its public area;
    3. the public lattice, fixed by the largest epsilon (the most accurate answer), and each
       recipient's finite-precision bound, before any noise is drawn;
    4. a given ``path`` must be bound to this source, to the location, to this value (its keyed
       commitment) and to this frame (CRS, declared bounds, frame kind, working plane, scale,
       lattice rule), else :class:`~geopriv.exceptions.PathBindingError` before any noise and
       before ``before_noise()`` (the caller's budget check);
    5. one path over the recipients' levels in the frame's units (a new path is bound to this
       release), truncation and snapping;
    6. the provenance record from the allowlist (the path is never in it).

    Returns (responses (m, 2) in the input CRS, effective epsilons per metre, path, record fields).
    """
    from ..frame import finite_precision_epsilon
    from ..mechanisms.diffusion import LOCATION, DiffusionPath, diffuse

    geoms, xy = check_release_input(data, (), bounds, None, attributes=False)
    crs = as_crs(geoms.crs)
    labels = geoms.index
    if not labels.is_unique:
        raise GeoprivError(
            "The index has duplicate labels; the source and the recipients are named by index label. "
            "Make it unique first (gdf.reset_index(drop=True))."
        )
    pos = labels.get_loc(source)
    eps = np.asarray(epsilons, dtype=float)
    frame = public_frame(crs, bounds=bounds, max_distortion=max_distortion, planar_only=True)
    if frame.area is not None and frame.area_source == "bounds":
        # the "computed from the data" guard over every row: the other people's extreme
        # coordinates would be published with bounds= just as the source's would
        xmin, ymin, xmax, ymax = frame.area
        within = (xy[:, 0] >= xmin) & (xy[:, 0] <= xmax) & (xy[:, 1] >= ymin) & (xy[:, 1] <= ymax)
        frame.check_inside(xy[within], labels[within])
    frame.check_inside(xy[[pos]], labels[[pos]])
    grid_m = check_grid(grid, float(eps.max()))
    check_noise_scale(
        float(eps.max()),
        grid_m=grid_m,
        area_m=declared_diameter(crs, bounds, None),
        what="the most accurate answer",
        fix=_SCHEDULE_FIX,
    )
    lattice = public_lattice(frame, grid_m)
    unique = np.unique(eps)
    eff_unique = np.array([finite_precision_epsilon(e, frame, lattice) for e in unique])
    effective = eff_unique[np.searchsorted(unique, eps)]
    if path is not None and not isinstance(path, DiffusionPath):
        raise ParameterTypeError(
            f"path must be a DiffusionPath (the secret path of an earlier release), got {type(path).__name__}."
        )
    u = np.array(frame.to_work(xy[[pos]], labels[[pos]])[0], dtype=float)
    binding = {
        "kind": "location",
        "crs": crs.to_string(),
        "declared_bounds": None if bounds is None else [float(v) for v in declared_bounds(crs, bounds, None)],
        "frame": frame.kind,
        "working_crs": frame.work_crs.to_string(),
        "scale_max": float(frame.scale_max),
        "grid": "auto" if isinstance(grid, str) else float(grid_m),  # the rule: "auto" follows the largest epsilon
        "lattice": lattice.kind,
    }
    if path is not None:
        path.check_binding(source=labels[pos], released=LOCATION, frame=binding, value=u)
    if before_noise is not None:  # the caller's budget check and charge, with the largest effective epsilon
        before_noise(float(effective.max()))
    source_rng = make_rng(rng).bind(  # a seed replays only for the same data and parameters (any row order)
        unordered(geoms),
        unordered(pd.DataFrame({"epsilon": eps}, index=pd.Index(recipients))),
        params=[f"{type(source).__name__}:{source!r}", binding],
        purpose="diffuse_locations",
    )
    responses, new_path = diffuse(u, eps / frame.scale_max, source_rng.generator, path=path)
    if path is None:
        new_path = new_path.bind(source=labels[pos], released=LOCATION, frame=binding, value=u)
    out = frame.from_work(np.asarray(responses, dtype=float).reshape(-1, 2))
    out = truncate_and_snap(np.array(out, dtype=float), frame.area, lattice)
    fields = {
        "mechanism": "private Markov jump process (graded release over a network)",
        "definition": "each recipient epsilon(d)-geo-indistinguishable per ground metre; any coalition of recipients "
        "learns no more than its closest member (the largest epsilon among them)",
        "epsilon_min_per_m": float(eps.min()),
        "epsilon_max_per_m": float(eps.max()),
        "coalition_epsilon_per_m": float(eps.max()),
        "effective_epsilon_per_m": float(effective.max()),
        "finite_precision": "Andres et al. 2013 Thm 4.1 per recipient (column effective_epsilon_per_m)",
    }
    fields.update(frame.describe())
    fields.update(lattice.describe())
    fields["declared_bounds"] = None if bounds is None else [float(v) for v in declared_bounds(crs, bounds, None)]
    return out, effective, new_path, fields, source_rng.seeded
