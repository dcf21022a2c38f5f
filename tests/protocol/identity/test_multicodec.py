"""Multicodec codes: public ones agree with the multiformats table, ODF's own are not in it."""

from __future__ import annotations

import pytest
from multiformats import multicodec as table

from protocol.errors import ParseError
from protocol.identity import Multicodec

PRIVATE = {
    Multicodec.ARROW0_SHA3_256,
    Multicodec.ODF_METADATA_BLOCK,
    Multicodec.ODF_DATASET_SNAPSHOT,
}


@pytest.mark.parametrize("code", sorted(set(Multicodec) - PRIVATE))
def test_public_codes_and_names_match_the_multiformats_table(code: Multicodec) -> None:
    assert table.get(code=int(code)).name == str(code)


@pytest.mark.parametrize("code", sorted(PRIVATE))
def test_odf_codes_are_unassigned_in_the_public_table(code: Multicodec) -> None:
    with pytest.raises(KeyError):
        table.get(code=int(code))


@pytest.mark.parametrize("code", list(Multicodec))
def test_names_round_trip(code: Multicodec) -> None:
    assert Multicodec.from_name(str(code)) is code


def test_reference_names_of_odf_codes() -> None:
    assert str(Multicodec.ARROW0_SHA3_256) == "arrow0-sha3-256"
    assert str(Multicodec.ODF_METADATA_BLOCK) == "odf-metadata-block"
    with pytest.raises(ParseError, match="unsupported multicodec name 'sha1'"):
        Multicodec.from_name("sha1")
