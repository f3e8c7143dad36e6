#!/usr/bin/env bash
# The main job on shipped data, from a fresh machine: perturbs the 324 Soho cholera death
# records (Web Mercator) with geo-indistinguishability (ln 4 within 50 m) and writes
# out/soho_perturbed.gpkg and out/soho_map.png.  Arguments go to `geopriv demo`.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"
make_env latest python3 ""
MPLBACKEND=Agg "$ROOT/.venv/latest/bin/geopriv" demo --out "$ROOT/out" "$@"
