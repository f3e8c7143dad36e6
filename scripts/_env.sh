# Shared set-up for scripts/demo.sh and scripts/test.sh (sourced, not run).
# make_env NAME PYTHON [VENV_FLAGS] [PIP_ARGS...]: create or reuse .venv/NAME and install geopriv
# into it; reinstall only when pyproject.toml or the constraints change.  The extras installed are
# [all,test], or those in MAKE_ENV_EXTRAS (e.g. MAKE_ENV_EXTRAS=docs,plot for scripts/docs.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off

make_env() {
  local name="$1" python="$2" venv_flags="$3"; shift 3
  local env="$ROOT/.venv/$name"
  local stamp="$env/.geopriv-stamp"
  local want
  local extras="${MAKE_ENV_EXTRAS:-all,test}" tag="$venv_flags $*"
  [ "$extras" = "all,test" ] || tag="$tag [$extras]"  # the default keeps the existing envs' stamps
  want="$( (cat "$ROOT/pyproject.toml" "$ROOT"/constraints/*.txt; echo "$tag") | sha256sum | cut -c1-16)"
  if [ -x "$env/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  echo ">> setting up $env ($python $venv_flags)" >&2
  rm -rf "$env"
  "$python" -m venv $venv_flags "$env"
  "$env/bin/python" -m pip install -q --upgrade pip >&2
  "$env/bin/python" -m pip install -q "$@" -e "$ROOT[$extras]" >&2
  if [ "$venv_flags" = "--system-site-packages" ] && [ -d /usr/share/proj ]; then
    # Debian's pyproj looks for PROJ's data under sys.prefix: show it the system's (never set PROJ_DATA
    # globally: rasterio's wheel carries its own PROJ, whose data must stay its own)
    mkdir -p "$env/share" && ln -sfn /usr/share/proj "$env/share/proj"
  fi
  echo "$want" > "$stamp"
}

# Debian's QGIS for the plugin tests and the floor environment: the Python bindings (python3-qgis, with
# its pyproj and NumPy), and QGIS Desktop itself under Xvfb (tests/qgis_plugin/test_desktop.py).
QGIS_PACKAGES="qgis python3-qgis qgis-providers python3-pyproj python3-numpy python3-venv python3-pip xvfb xauth"
ensure_qgis() {
  if /usr/bin/python3 -c "import qgis.core, osgeo.gdal_array, pyproj, numpy" >/dev/null 2>&1 \
     && command -v qgis >/dev/null && command -v xvfb-run >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "QGIS is missing: run 'sudo apt-get install $QGIS_PACKAGES' (Debian/Ubuntu), then retry." >&2
    exit 1
  fi
  echo ">> installing QGIS from Debian packages ($QGIS_PACKAGES)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends $QGIS_PACKAGES >/dev/null
}

# PostgreSQL's server binaries (initdb, pg_ctl) for the tests' throwaway clusters (tests/pg_cluster.py starts
# its own in a temporary directory, Unix socket only): Debian's postgresql, without its default cluster
# 'main' and without running the system service.
ensure_postgresql() {
  if command -v initdb >/dev/null || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL is missing: run 'sudo apt-get install postgresql' (Debian/Ubuntu), then retry." >&2
    exit 1
  fi
  echo ">> installing PostgreSQL from Debian packages (postgresql; no default cluster, the tests start their own)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  # postgresql-common first, to tell it not to create (nor start) the cluster 'main' on installing the server
  apt-get install -y -qq --no-install-recommends postgresql-common >/dev/null
  pg_conftool /etc/postgresql-common/createcluster.conf set create_main_cluster false
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  if [ -d /run/systemd/system ]; then
    systemctl disable --now postgresql >/dev/null 2>&1 || true
  fi
}

# Debian's Chromium for tests/test_report.py, which renders the release report in headless Chromium (offline: no
# network, every figure decoded, no console message); GEOPRIV_REQUIRE_CHROMIUM=1 makes a missing browser a failure.
ensure_chromium() {
  if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "Chromium is missing: run 'sudo apt-get install chromium' (Debian/Ubuntu), then retry." >&2
    exit 1
  fi
  echo ">> installing Chromium from Debian packages (chromium) for the release report's rendering test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
}
