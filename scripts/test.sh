#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what it needs, then runs pytest twice:
#   1. newest releases of every dependency (.venv/latest, the python3 on PATH);
#   2. the dependency floors inside Debian's QGIS Python (.venv/qgis: /usr/bin/python3 with
#      --system-site-packages so that qgis and osgeo come from Debian), including the QGIS
#      plugin tests, which must run there (they fail, never skip, if QGIS is missing).
# tests/test_report.py renders the release report in Debian's headless Chromium (installed here as QGIS is).
# Both runs start a throwaway PostgreSQL server of their own (tests/pg_cluster.py; its tests fail, never
# skip, if PostgreSQL or psycopg is missing).
# Extra arguments go to both pytest runs (e.g. -k perturb, -x).
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

make_env latest python3 ""
ensure_qgis
ensure_postgresql
ensure_chromium
make_env qgis /usr/bin/python3 "--system-site-packages" -c "$ROOT/constraints/floor.txt"

export QT_QPA_PLATFORM=offscreen MPLBACKEND=Agg
# tests/test_report.py renders the release report in Debian's Chromium (ensure_chromium): it fails, never skips, here
export GEOPRIV_REQUIRE_CHROMIUM=1
status=0
echo ">> lint-imports: the layers and the core-never-imports-a-front-end contracts (pyproject.toml)"
(cd "$ROOT" && "$ROOT/.venv/latest/bin/lint-imports") || status=$?
echo ">> ruff: lint ([tool.ruff] in pyproject.toml)"
(cd "$ROOT" && "$ROOT/.venv/latest/bin/ruff" check geopriv qgis_plugin tests bench scripts) || status=$?
echo ">> ruff format: the code's layout ([tool.ruff]; 'ruff format' rewrites it)"
(cd "$ROOT" && "$ROOT/.venv/latest/bin/ruff" format --check geopriv qgis_plugin tests bench scripts docs/_ext docs/conf.py) || status=$?
echo ">> mypy: the public modules ([tool.mypy] in pyproject.toml)"
(cd "$ROOT" && "$ROOT/.venv/latest/bin/mypy") || status=$?
echo ">> docs: the Sphinx site, warnings as errors (scripts/docs.sh, its own .venv/docs)"
bash "$ROOT/scripts/docs.sh" || status=$?
echo ">> pytest: newest dependencies ($("$ROOT/.venv/latest/bin/python" -c 'import numpy, pandas, geopandas; print("numpy", numpy.__version__, "pandas", pandas.__version__, "geopandas", geopandas.__version__)'))"
GEOPRIV_REQUIRE_POSTGRESQL=1 "$ROOT/.venv/latest/bin/python" -m pytest -m "not qgis" "$@" || status=$?
echo ">> pytest: dependency floors + QGIS ($("$ROOT/.venv/qgis/bin/python" -c 'import numpy, pandas, geopandas; print("numpy", numpy.__version__, "pandas", pandas.__version__, "geopandas", geopandas.__version__)'))"
# GEOPRIV_WHEEL_CONSTRAINTS: tests/test_wheel.py installs the built wheel into a fresh venv with the floors
# (the newest releases in the run above)
GEOPRIV_REQUIRE_QGIS=1 GEOPRIV_REQUIRE_POSTGRESQL=1 GEOPRIV_WHEEL_CONSTRAINTS="$ROOT/constraints/floor.txt" \
  "$ROOT/.venv/qgis/bin/python" -m pytest "$@" || status=$?
# pytest exit 5 (no tests collected) is a failure here, as is any other non-zero code.
exit $status
