#!/usr/bin/env bash
# Creates bench/.venv-dpmr: the baseline's own virtualenv for bench/aggregate_vs_dpmr.py, with
# dp-mobility-report 0.2.11 (PyPI) and geopriv installed editable from this checkout.
#
#   bash bench/setup_dpmr.sh            # create or update; does nothing when already up to date
#   PYTHON=python3.11 bash bench/setup_dpmr.sh
#   FORCE=1 bash bench/setup_dpmr.sh    # rebuild from scratch
#
# Idempotent: the stamp file bench/.venv-dpmr/.setup-stamp holds a hash of the pins below and of
# pyproject.toml; when it matches, the script exits at once.  The stamp also keeps `pip freeze` of
# the environment that was built (what the benchmark ran with).
#
# Pins, and why (dp-mobility-report 0.2.11 pins only folium; its other requirements are open):
#   pandas==2.3.3        pandas 3 removed pandas.core.window.expanding.ExpandingGroupby, which
#                        pandarallel 1.6.5 (imported by dp_mobility_report.dpmreport) imports:
#                        `import dp_mobility_report` fails with pandas 3.  2.3.3 is the newest 2.x
#                        and satisfies geopriv's floor (pandas>=2.2.3).
#   scikit-learn==1.8.0  scikit-learn 1.9 dropped sklearn.tree._tree.DOUBLE, which diffprivlib
#                        0.6.6 (the newest, dp-mobility-report's noise library) imports at import
#                        time: `import diffprivlib` fails with scikit-learn 1.9.
#   everything else      newest that resolves (numpy 2, geopandas 1.2, shapely 2.2, pyproj 3.7 when
#                        this was written); pyarrow for GeoParquet.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
VENV="$HERE/.venv-dpmr"
STAMP="$VENV/.setup-stamp"
PYTHON="${PYTHON:-python3}"

PINS="dp-mobility-report==0.2.11
pandas==2.3.3
scikit-learn==1.8.0
pyarrow"

want="$( { printf '%s\n' "$PINS"; cat "$ROOT/pyproject.toml"; } | sha256sum | cut -d' ' -f1)"

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && -x "$VENV/bin/python" ]] && [[ "$(head -n1 "$STAMP")" == "$want" ]]; then
    echo "bench/.venv-dpmr is up to date ($STAMP)"
    exit 0
fi

"$PYTHON" - <<'EOF'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"geopriv needs Python >= 3.11; {sys.executable} is {sys.version.split()[0]} (set PYTHON=...)")
EOF

if [[ "${FORCE:-0}" == 1 ]]; then
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
rm -f "$STAMP"

# one resolver run for everything, so the pins hold for geopriv's requirements too
mapfile -t pins <<<"$PINS"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}" -e "$ROOT"

# fail here, not in the benchmark, when an import is broken
"$VENV/bin/python" -c "import dp_mobility_report, diffprivlib, geopriv, pyarrow; print('dp_mobility_report', dp_mobility_report.__version__ if hasattr(dp_mobility_report, '__version__') else '?', '| diffprivlib', diffprivlib.__version__, '| geopriv', geopriv.__version__)"

{ echo "$want"; "$VENV/bin/python" -m pip freeze --disable-pip-version-check --exclude-editable; } >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
echo "bench/.venv-dpmr ready: $VENV/bin/python"
