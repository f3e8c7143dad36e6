"""Run a function once a module has been imported, without importing it (stdlib only).

``import geopriv`` imports neither pandas nor dask (issue 31: start-up under half a second), yet
``gdf.priv`` and ``ddf.priv`` must be there as soon as those are: :func:`when_imported` runs its
callback now if the module is already imported, otherwise right after the module's first import
finishes (a finder at the front of ``sys.meta_path`` wraps that module's loader; it looks the
module up with the finders behind it, so the import itself is unchanged).

A look-up that does not import (``importlib.util.find_spec``) leaves the hook in place: only a
module that has run its body fires it.  The finder removes itself once all its callbacks ran.
"""

from __future__ import annotations

import sys

__all__ = ["when_imported"]


class _AfterImport:
    """Wraps the loaders of the watched modules so that their callbacks run once they have loaded.

    A meta path finder (``find_spec`` is all the import system asks of one); not derived from
    ``importlib.abc.MetaPathFinder``, whose module imports ``importlib.resources`` (a third of the
    start-up left).
    """

    def __init__(self):
        self.callbacks: dict[str, list] = {}

    def find_spec(self, name, path=None, target=None):
        if name not in self.callbacks:
            return None
        spec = None
        for finder in sys.meta_path:  # the finders behind this one, as the import system would ask them
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            spec.loader.exec_module = original
            self.fire(name)

        spec.loader.exec_module = exec_module
        return spec

    def fire(self, name):
        callbacks = self.callbacks.pop(name, [])
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        for callback in callbacks:
            callback()


_HOOK = _AfterImport()


def when_imported(name: str, callback) -> None:
    """Call ``callback()`` once the module ``name`` is imported: now if it already is, else right after its import."""
    if name in sys.modules:
        callback()
        return
    _HOOK.callbacks.setdefault(name, []).append(callback)
    if _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)
