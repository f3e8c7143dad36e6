#!/usr/bin/env bash
# Creates bench/.venv-privkit: privkit's own virtualenv for bench/adversary_vs_privkit.py, with
# privkit 0.5.1 (PyPI).  geopriv is NOT installed there: the benchmark runs geopriv in the
# project's environment and privkit in this one (a subprocess), exchanging .npy/.json files.
#
#   bash bench/setup_privkit.sh            # create or update; does nothing when already up to date
#   PYTHON=python3.11 bash bench/setup_privkit.sh
#   FORCE=1 bash bench/setup_privkit.sh    # rebuild from scratch
#
# Idempotent: the stamp file bench/.venv-privkit/.setup-stamp holds a hash of the pins below; when
# it matches, the script exits at once.  The stamp also keeps `pip freeze` of the environment that
# was built (what the benchmark ran with).
#
# Pins, and why:
#   privkit==0.5.1   the newest on PyPI when this was written.  It pins numpy==1.26.4 (geopriv's
#                    environments have numpy 2: one more reason for a separate venv) and requires
#                    its facial-data stack too (torch, tf-keras, deepface, open3d): `import privkit`
#                    imports every submodule, so the location-privacy classes cannot be imported
#                    without them.  Several GB (about 9 GB with torch's CUDA wheels); everything
#                    else resolves to the newest that fits.
#   open3d==0.19.0   open3d 0.20 dropped the open3d.cpu subpackage, which privkit/data/facial_data.py
#                    imports (`from open3d.cpu.pybind.geometry import PointCloud`): `import privkit`
#                    fails with open3d 0.20.  0.19.0 is the newest with it.
# System library: open3d's extension links libusb-1.0.so.0 (Debian: apt-get install libusb-1.0-0);
# the script stops with that advice when it is missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-privkit"
STAMP="$VENV/.setup-stamp"
PYTHON="${PYTHON:-python3}"

PINS="privkit==0.5.1
open3d==0.19.0"

want="$(printf '%s\n' "$PINS" | sha256sum | cut -d' ' -f1)"

if [[ "${FORCE:-0}" != 1 && -f "$STAMP" && -x "$VENV/bin/python" ]] && [[ "$(head -n1 "$STAMP")" == "$want" ]]; then
    echo "bench/.venv-privkit is up to date ($STAMP)"
    exit 0
fi

"$PYTHON" - <<'EOF'
import sys
if not (3, 10) <= sys.version_info[:2] <= (3, 12):
    sys.exit(f"privkit 0.5.1 (numpy==1.26.4, tensorflow) needs Python 3.10-3.12; {sys.executable} is {sys.version.split()[0]} (set PYTHON=...)")
EOF

if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1\.0\.so\.0'; then
    echo "open3d (a privkit requirement) needs libusb-1.0.so.0: apt-get install libusb-1.0-0 (Debian/Ubuntu)" >&2
    exit 1
fi

if [[ "${FORCE:-0}" == 1 ]]; then
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV"
fi
rm -f "$STAMP"

mapfile -t pins <<<"$PINS"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "${pins[@]}"

# fail here, not in the benchmark, when an import is broken (TensorFlow's start-up chatter muted;
# deepface, imported by privkit, creates $DEEPFACE_HOME/.deepface: kept inside the venv)
DEEPFACE_HOME="$VENV" TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c "import numpy, privkit; from privkit.attacks import HW; from privkit.ppms import PlanarLaplace; from privkit.metrics import AdversaryError, QualityLoss; print('privkit', privkit.__version__, '| numpy', numpy.__version__)"

{ echo "$want"; "$VENV/bin/python" -m pip freeze --disable-pip-version-check; } >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
echo "bench/.venv-privkit ready: $VENV/bin/python"
