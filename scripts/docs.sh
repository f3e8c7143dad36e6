#!/usr/bin/env bash
# The documentation site (Sphinx, docs/conf.py), built with warnings as errors into docs/_build/html.
# Creates or reuses .venv/docs (python3 on PATH, the [docs,plot] extras); extra arguments go to sphinx-build.
source "$(dirname "$0")/_env.sh"
cd "$ROOT"

MAKE_ENV_EXTRAS=docs,plot make_env docs python3 ""
export MPLBACKEND=Agg
# docs/api/generated: autosummary's pages, rewritten at each build (stale pages of renamed names removed first)
rm -rf "$ROOT/docs/api/generated"
# -E: a fresh environment at each build (every page read again, so every warning is shown again)
"$ROOT/.venv/docs/bin/sphinx-build" -E -W --keep-going -q -b html "$@" docs docs/_build/html
echo ">> docs: $ROOT/docs/_build/html/index.html" >&2
