"""The dask forms of the public functions (``perturb_dask``, ...): the public function's own signature.

A dask form is documented on its own (what a lazy release does differently), but takes the
same parameters as the public function and runs the same plan: :func:`lazy_form` writes it
from the public function, so its parameter list is never written again.
"""

from __future__ import annotations

import functools
import importlib
import inspect

__all__ = ["lazy_form"]


def lazy_form(public: str):
    """Decorate a docstring-only stub ``name(data, *args, **kwargs)`` as the dask form of ``geopriv.<public>``.

    The result has the public function's signature (names, kinds, default objects) and calls it
    with a dask frame; the public function builds the plan, and the plan's run sends the frame
    to its lazy runner.  Anything but a dask frame is refused with the in-memory function's name.
    """
    module, name = public.rsplit(".", 1)

    def wrap(stub):
        function = getattr(importlib.import_module(f"{__package__.rsplit('.', 1)[0]}.{module}"), name)

        @functools.wraps(stub)
        def form(data, *args, **kwargs):
            from ..daskhook import is_dask
            from ..exceptions import ParameterTypeError

            if not is_dask(data):
                raise ParameterTypeError(
                    f"{stub.__name__} takes a dask_geopandas GeoDataFrame: use geopriv.{name} for one in memory."
                )
            return function(data, *args, **kwargs)

        form.__signature__ = inspect.signature(function)
        return form

    return wrap
