"""``-o csv`` writes what the reference's CSV writer writes (kamu-cli ``data-utils``
``format/csv.rs``, its own test's sample): fields and header quoted only when they must be,
timestamps in RFC 3339, binary as hex, lists as JSON text, null as an empty field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import run

QUERY = """SELECT
  arrow_cast(NULL, 'UInt64') AS nullable,
  'foo' AS utf8,
  'sep,quotes''",newline' || chr(10) || 'fin' AS utf8_special,
  arrow_cast('foo', 'Binary') AS bin,
  arrow_cast(1577880000000, 'Timestamp(Millisecond, Some("UTC"))') AS ts_milli,
  make_array('foo', 'bar') AS list_str,
  true AS "a,b"
"""


def test_csv_output_is_the_reference_writers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    assert run(capsys, "init", "--root", str(root))[0] == 0
    code, out, err = run(capsys, "sql", "--root", str(root), "-o", "csv", "-c", QUERY)
    assert code == 0, err
    assert out == (
        'nullable,utf8,utf8_special,bin,ts_milli,list_str,"a,b"\n'
        ',foo,"sep,quotes\'"",newline\nfin",666f6f,2020-01-01T12:00:00Z,"[""foo"",""bar""]",true\n'
    )
