"""Which format a request is answered in: Atom, the reference's and the default, or OData's
verbose JSON when ``$format=json`` asks for it or the ``Accept`` header prefers
``application/json;odata=verbose`` to Atom, or plain ``application/json`` from a client of
OData 2 (as SAP's ``pyodata`` sends it). OData 3's other JSON ("JSON light",
``odata=minimalmetadata`` and the like, also what plain ``application/json`` means to a client
sending ``MaxDataServiceVersion: 3.0``, an OData 3 client), which this node does not write,
leaves a request in Atom, as the reference answers every request."""

from __future__ import annotations

from collections.abc import Mapping

from odfd.app.odata_query import UnsupportedODataError

_ATOM_TYPES = ("application/atom+xml", "application/xml", "text/xml")
_JSON_FORMATS = ("json", "verbosejson", "application/json", "application/json;odata=verbose")
_ATOM_FORMATS = ("atom", "xml", "application/atom+xml", "application/xml")


def wants_json(query: Mapping[str, str], headers: Mapping[str, str]) -> bool:
    """Whether the answer is verbose JSON (``$format`` first, then ``Accept``); an unknown
    ``$format`` is refused naming it."""
    fmt = query.get("$format")
    if fmt is not None:
        chosen = fmt.strip().lower().replace(" ", "")
        if chosen in _JSON_FORMATS:
            return True
        if chosen in _ATOM_FORMATS:
            return False
        raise UnsupportedODataError(
            f"$format={fmt} is not supported: this node answers in Atom or, with $format=json, "
            "OData's verbose JSON"
        )
    best_json, best_atom = 0.0, 0.0
    plain = "minimalmetadata" if _version(headers.get("MaxDataServiceVersion", "")) >= 3 else ""
    for item in headers.get("Accept", "").split(","):
        media, *params = (part.strip().lower() for part in item.split(";"))
        quality, odata = 1.0, plain or "verbose"
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                quality = _quality(value)
            elif name.strip() == "odata":
                odata = value.strip()
        if media == "application/json" and odata == "verbose":
            best_json = max(best_json, quality)
        elif media in _ATOM_TYPES:
            best_atom = max(best_atom, quality)
    return best_json > best_atom


def _version(text: str) -> float:
    """``3.0`` of ``3.0;NetFx`` (0 when absent or unreadable)."""
    return _quality(text.split(";")[0].strip())


def _quality(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
