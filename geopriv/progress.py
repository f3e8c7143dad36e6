"""Progress reporting shared by every long release (a foundation: mechanisms and the release path use it)."""

from __future__ import annotations

__all__ = ["progress_callback"]


def progress_callback(progress, total, desc="perturb"):
    """(callback(done, total) or None, tqdm bar or None) from a ``progress=`` argument."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="pt", unit_scale=True, desc=desc, disable=None)

    def update(done, total_):
        bar.n = done
        bar.refresh()

    return update, bar
