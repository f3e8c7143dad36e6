"""Progress reporting shared by every long release (a foundation: mechanisms and the release path use it).

A bar is drawn on a terminal only, as tqdm does with ``disable=None``: output piped or redirected
to a file (a log, CI, ``2> build.log``) gets no bar at all, never carriage-return updates that
pile up on one line.  Notebooks keep their widget bars (tqdm's notebook bars are never disabled).
"""

from __future__ import annotations

__all__ = ["progress_callback", "progress_bar", "on_terminal"]


def on_terminal(file=None) -> bool:
    """Whether a progress bar would be drawn on ``file`` (default ``sys.stderr``): tqdm's rule for ``disable=None``.

    True unless ``file`` has an ``isatty`` that says it is not a terminal (a pipe, a file, a closed stream).
    """
    import sys

    file = sys.stderr if file is None else file
    isatty = getattr(file, "isatty", None)
    if isatty is None:
        return True  # tqdm draws on a stream it cannot ask
    try:
        return bool(isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def progress_bar(total, desc, unit="pt"):
    """The tqdm bar of every long computation: drawn on a terminal (or in a notebook), never on a pipe or a file."""
    from tqdm.auto import tqdm

    return tqdm(total=total, unit=unit, unit_scale=unit == "pt", desc=desc, disable=None)


def progress_callback(progress, total, desc="perturb"):
    """(callback(done, total) or None, tqdm bar or None) from a ``progress=`` argument."""
    if progress is None or progress is False:
        return None, None
    if callable(progress):
        return progress, None
    bar = progress_bar(total, desc)

    def update(done, total_):
        bar.n = done
        bar.refresh()

    return update, bar
