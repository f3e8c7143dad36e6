"""Benchmark: start-up time of ``import geopriv`` and the command line (issue 31, item 10).

Each command runs in a fresh interpreter, N repetitions, interleaved (one round runs every
command once, for every checkout, in turn), after one unmeasured warm-up round; prints the median
wall time of each and its ratio to ``python -c pass`` (the interpreter's own start-up) as a
Markdown table, one column pair per checkout.

Run:  python bench/import_time.py [--n 15] [--root CHECKOUT ...]
      --root: import geopriv from this checkout (PYTHONPATH=CHECKOUT, which comes before the
      editable install), e.g. ``--root /tmp/wt-before --root .`` with a checkout of the commit
      before made by ``git worktree add /tmp/wt-before HEAD``; default: the installed geopriv.
      The console script is the one beside this interpreter (it imports whatever ``geopriv``
      resolves to).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def commands(python: str) -> list[tuple[str, list[str]]]:
    script = shutil.which("geopriv", path=str(Path(python).parent)) or shutil.which("geopriv")
    rows = [
        ("python -c pass", [python, "-c", "pass"]),
        ('python -c "import geopriv"', [python, "-c", "import geopriv"]),
        ("geopriv --help", [script, "--help"] if script else None),
        ("python -m geopriv.cli --help", [python, "-m", "geopriv.cli", "--help"]),
        (
            "geopriv perturb --help (a command's options: imports the library)",
            [script, "perturb", "--help"] if script else None,
        ),
        ('python -c "import geopandas" (reference)', [python, "-c", "import geopandas"]),
        ('python -c "import geopriv, geopandas" (reference)', [python, "-c", "import geopriv, geopandas"]),
    ]
    return [(name, argv) for name, argv in rows if argv is not None]


def run_once(argv: list[str], env: dict, cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=15, help="repetitions of each command (default 15)")
    ap.add_argument("--root", action="append", help="checkout to import geopriv from (repeatable; default: installed)")
    ap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    args = ap.parse_args(argv)

    envs = {}
    for root in args.root or [None]:
        env = dict(os.environ)
        if root:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(root).resolve()), env.get("PYTHONPATH")]))
        envs[root or "installed"] = env
    rows = commands(args.python)
    times = {(label, name): [] for label in envs for name, _ in rows}
    with tempfile.TemporaryDirectory() as cwd:  # nothing in the working directory shadows the package
        for env in envs.values():  # warm-up: file system cache, .pyc files
            for name, cmd in rows:
                run_once(cmd, env, cwd)
        for _ in range(args.n):
            for label, env in envs.items():
                for name, cmd in rows:
                    times[label, name].append(run_once(cmd, env, cwd))
        for label, env in envs.items():
            where = subprocess.run(
                [args.python, "-c", "import geopriv; print(geopriv.__file__)"],
                env=env,
                cwd=cwd,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            print(f"{label}: geopriv from {where}")

    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    print(
        f"\nPython {version} ({args.python}); {args.n} runs each, interleaved; {os.cpu_count()} CPUs; "
        "median wall seconds (ratio to python -c pass)\n"
    )
    print("| command | " + " | ".join(envs) + " |")
    print("|---|" + "---|" * len(envs))
    for name, _ in rows:
        cells = []
        for label in envs:
            base = statistics.median(times[label, rows[0][0]])
            t = statistics.median(times[label, name])
            cells.append(f"{t:.3f} ({t / base:.1f}x)")
        print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
