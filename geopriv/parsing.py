"""Numbers and epsilon tables written as text, as the command line and the QGIS dialogs take them.

One parser for both front ends: ``0.0069``, ``ln4``, ``ln(4)``, ``log(4)`` and quotients such as
``ln4/200`` ("ln 4 within 200 m"); an epsilon-of-distance table ``"1:ln4/50 4:ln4/2000"``.
Errors are ValueErrors that show an example.
"""

from __future__ import annotations

import math
import re

from .exceptions import ParameterError

__all__ = ["parse_number", "parse_epsilon_pair", "parse_epsilon_table"]

_LOG = re.compile(r"^(?:ln|log)\(?([^()/]+)\)?$")


def parse_number(text) -> float:
    """A number, also written ``ln4``, ``ln(4)``, ``log(4)`` and divided: ``ln4/200``."""
    t = str(text).strip().lower().replace(" ", "")
    num, _, den = t.partition("/")
    try:
        m = _LOG.match(num)
        value = math.log(float(m.group(1))) if m else float(num)
        if den:
            value /= float(den)
    except (ValueError, ZeroDivisionError):
        raise ParameterError(f"not a number: {text!r} (give e.g. 0.0069, ln4 or ln4/200)") from None
    return value


def parse_epsilon_pair(text) -> tuple[float, float]:
    """``D:EPSILON``: a network distance and the epsilon there, e.g. ``2:ln4/200``."""
    d, sep, e = str(text).strip().partition(":")
    if not sep:
        raise ParameterError(f"not a DISTANCE:EPSILON pair: {text!r} (give e.g. 1:ln4/50 or 0.5:0.02)")
    return parse_number(d), parse_number(e)


def parse_epsilon_table(text) -> tuple[list, list]:
    """``"1:ln4/50 4:ln4/2000"`` (pairs separated by spaces, commas or semicolons) -> (distances, epsilons), sorted."""
    pairs = [parse_epsilon_pair(item) for item in re.split(r"[\s,;]+", str(text).strip()) if item]
    if not pairs:
        raise ParameterError("the epsilon table is empty (give e.g. 1:ln4/50 4:ln4/2000)")
    pairs.sort()
    return [d for d, _ in pairs], [e for _, e in pairs]
