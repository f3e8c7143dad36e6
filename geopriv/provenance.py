"""Provenance records attached to every release as ``result.attrs["geopriv"]``."""
from __future__ import annotations

import datetime as _dt

from ._version import __version__

__all__ = ["make_record", "attach"]


def make_record(mechanism: str, *, seeded: bool, **fields) -> dict:
    """A provenance record: what was released, with which guarantee, by which version.

    ``seeded`` says whether the noise is reproducible; the seed itself is never stored, because
    anyone holding it could regenerate the noise and recover the true locations.
    """
    record = {"mechanism": mechanism}
    record.update(fields)
    record["seeded"] = bool(seeded)
    record["geopriv_version"] = __version__
    record["created_utc"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return record


def attach(result, source, record: dict):
    """Set ``result.attrs["geopriv"]`` to ``record``, keeping earlier releases of ``source`` in ``previous``."""
    prior = getattr(source, "attrs", {}).get("geopriv")
    if prior:
        previous = list(prior.get("previous", []))
        previous.append({k: v for k, v in prior.items() if k != "previous"})
        record = dict(record, previous=previous)
    result.attrs = {k: v for k, v in getattr(source, "attrs", {}).items() if k != "geopriv"}
    result.attrs["geopriv"] = record
    return result
