"""Register ``.priv`` on dask-geopandas frames without importing dask.

``import geopriv`` must not import dask (it is an optional extra).  If ``dask_geopandas`` is
already imported, the accessor is registered now; otherwise an import hook
(:func:`geopriv.importhook.when_imported`) registers it right after ``dask_geopandas`` is first imported.  ``geopriv.perturb(ddf, ...)`` and the other
functions dispatch on dask frames in any case.
"""

from __future__ import annotations

import functools
import importlib
import inspect

from .importhook import when_imported

__all__ = ["is_dask", "register_lazy", "lazy", "dispatches_dask", "schema_of"]

#: the lazy forms of the release functions, registered by ``geopriv.distributed`` when it loads
_LAZY: dict = {}


def register_lazy(name: str, fn) -> None:
    """Register ``fn`` as the lazy (dask) form of the release function ``name`` (called by ``geopriv.distributed``)."""
    _LAZY[name] = fn


def lazy(name: str):
    """The lazy form of ``name``: the core dispatches dask frames here and never imports ``geopriv.distributed``.

    The extension registers itself when it is imported, which the import hook below does as soon
    as ``dask_geopandas`` is; for a dask frame built without it, it is loaded here by name.
    """
    if name not in _LAZY:
        importlib.import_module(__package__ + ".distributed")
    return _LAZY[name]


def dispatches_dask(name: str, check=None):
    """Decorate a public release function: a dask frame as its first argument goes to the lazy form ``name``.

    The one dispatch of every release kind (no function writes its own): the lazy form receives the
    same arguments, bound by the public signature with its defaults (the lazy form has the same
    names and defaults: ``tests/test_distributed.py`` checks it).  ``check(arguments)``, if given,
    runs first on either path (the bound arguments as a dict): checks of values that need no row,
    such as an output path, made before any partition is read.
    """

    def wrap(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if check is not None or (args and is_dask(args[0])):
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                if check is not None:
                    check(bound.arguments)
                if is_dask(bound.args[0] if bound.args else None):
                    return lazy(name)(*bound.args, **bound.kwargs)
            return fn(*args, **kwargs)

        return call

    return wrap


def is_dask(obj) -> bool:
    """Whether ``obj`` is a dask (geo)dataframe or series, without importing dask."""
    return any(c.__module__.split(".")[0] in ("dask", "dask_geopandas", "dask_expr") for c in type(obj).__mro__)


def schema_of(data):
    """What ``data``'s columns and types are: a dask frame's empty ``_meta`` (no partition is read), else ``data``."""
    return data._meta if is_dask(data) else data


def _register():
    try:  # the extension registers its accessor and lazy functions when it loads
        importlib.import_module(__package__ + ".distributed")
    except ImportError:  # pragma: no cover - dask without dataframe support
        pass


when_imported("dask_geopandas", _register)
