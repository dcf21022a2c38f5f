"""The service document (``GET /odata``) and the CSDL ``$metadata`` document (OData 3.0), byte
for byte as the reference writes them: one namespace ``default``, one entity type and entity set
per collection, keyed by its first property (the offset), properties in schema order."""

from __future__ import annotations

from collections.abc import Sequence

from odfd.app.odata import ODataCollection
from odfd.server.odata.edm import edm_type, xml_escape

NAMESPACE = "default"
XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'


def service_document(base: str, collections: Sequence[ODataCollection]) -> str:
    """The AtomPub service document listing ``collections`` under ``base`` (no trailing /)."""
    parts = [
        XML_DECLARATION,
        f'<service xml:base="{xml_escape(base)}" xmlns="http://www.w3.org/2007/app"'
        ' xmlns:atom="http://www.w3.org/2005/Atom">',
        f"<workspace><atom:title>{NAMESPACE}</atom:title>",
    ]
    for collection in collections:
        name = xml_escape(collection.name)
        parts.append(f'<collection href="{name}"><atom:title>{name}</atom:title></collection>')
    parts.append("</workspace></service>")
    return "".join(parts)


def metadata_document(collections: Sequence[ODataCollection]) -> str:
    """The ``$metadata`` document of ``collections``: fields of a type without an Edm type
    (``edm.edm_type``) are left out, as the reference leaves them out."""
    parts = [
        XML_DECLARATION,
        '<edmx:Edmx xmlns:edmx="http://schemas.microsoft.com/ado/2007/06/edmx" Version="1.0">'
        "<edmx:DataServices"
        ' xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"'
        ' m:DataServiceVersion="3.0" m:MaxDataServiceVersion="3.0">'
        f'<Schema Namespace="{NAMESPACE}" xmlns="http://schemas.microsoft.com/ado/2009/11/edm">',
    ]
    for collection in collections:
        fields = [(field, edm_type(field.type)) for field in collection.schema]
        typed = [(xml_escape(field.name), typ, field.nullable) for field, typ in fields if typ]
        # Keyed by the first property, as the reference (no key column is assigned there): the
        # offset, first in every dataset's schema.
        key = typed[0][0] if typed else ""
        properties = "".join(
            f'<Property Name="{name}" Type="{typ}" Nullable="{"true" if nullable else "false"}"/>'
            for name, typ, nullable in typed
        )
        parts.append(
            f'<EntityType Name="{xml_escape(collection.name)}">'
            f'<Key><PropertyRef Name="{key}"/></Key>{properties}</EntityType>'
        )
    container = f'<EntityContainer Name="{NAMESPACE}" m:IsDefaultEntityContainer="true"'
    sets = [
        f'<EntitySet Name="{xml_escape(c.name)}" EntityType="{NAMESPACE}.{xml_escape(c.name)}"/>'
        for c in collections
    ]
    parts.append(f"{container}>{''.join(sets)}</EntityContainer>" if sets else f"{container}/>")
    parts.append("</Schema></edmx:DataServices></edmx:Edmx>")
    return "".join(parts)
