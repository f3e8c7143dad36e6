"""How often one release's calls enter each geopriv module (issue 42: "each module once").

A module is *entered* when a geopriv function is called from a function of another module.
A release whose orchestration lives in one plan enters the modules below it a few times each;
one that goes back and forth (frame -> release -> frame -> ...) enters them many times.
Walks ``perturb`` (epsilon) and ``aggregate`` with a budget store, on the shipped data, and
prints the entries per module, largest first.  Run against another checkout side by side with
``PYTHONPATH=<checkout> python bench/module_walk.py`` to compare.
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

import geopandas as gpd

import geopriv

DATA = Path(geopriv.__file__).parent / "data"


def entries(call) -> collections.Counter:
    """Count, per geopriv module, the calls into it from another module (or from outside geopriv)."""
    counts: collections.Counter = collections.Counter()
    stack: list = []

    def profile(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            caller = stack[-1] if stack else None
            if module.startswith("geopriv") and module != caller:
                counts[module] += 1
            stack.append(module)
        elif event == "return" and stack:
            stack.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return counts


def main() -> None:
    soho = gpd.read_file(DATA / "soho_cholera.gpkg")
    walks = {"perturb(epsilon=...)": lambda: geopriv.perturb(soho, epsilon=0.01, rng=1)}
    with tempfile.TemporaryDirectory() as tmp:
        store = geopriv.BudgetStore(f"sqlite:///{tmp}/budget.db", create=True)
        store.grant(1e9, unit="epsilon")
        soho_ids = soho.assign(person=range(len(soho)))
        area = tuple(soho.total_bounds + [-500, -500, 500, 500])
        walks["aggregate(budget_store=...)"] = lambda: geopriv.aggregate(
            soho_ids, 1.0, cells=100, bounds=area, user="person", budget_store=store, rng=1
        )
        for name, call in walks.items():
            call()  # imports and caches outside the count
            counts = entries(call)
            top = ", ".join(f"{m.removeprefix('geopriv.')} {n}" for m, n in counts.most_common(12))
            print(f"{name}: {sum(counts.values())} entries; {top}")


if __name__ == "__main__":
    main()
