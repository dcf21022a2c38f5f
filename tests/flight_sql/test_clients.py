"""The clients people use, from PyPI and unchanged, against the node's Flight SQL server: the
reference's Python client (``kamu.connect``; its own tests restated), the ADBC Flight SQL driver
(metadata, prepared statements, Arrow tables) and pandas over ADBC."""

from __future__ import annotations

from collections.abc import Iterator

import adbc_driver_flightsql.dbapi as flightsql
import adbc_driver_manager
import kamu
import pandas
import pyarrow as pa
import pytest

from tests.flight_sql.conftest import BIG_ROWS, READ_TOKEN, Node, cases_table


def anonymous_connection(url: str) -> flightsql.Connection:
    """How ``kamu.connect`` connects without a token: Basic auth as 'anonymous', no password."""
    return flightsql.connect(
        url,
        db_kwargs={
            adbc_driver_manager.DatabaseOptions.USERNAME.value: "anonymous",
            adbc_driver_manager.DatabaseOptions.PASSWORD.value: "",
        },
        autocommit=True,
    )


@pytest.fixture
def adbc(node: Node) -> Iterator[flightsql.Connection]:
    with anonymous_connection(node.url) as connection:
        yield connection


# --- kamu (the reference's client; its repository's tests restated) ------------------------------


def test_kamu_minimal_query(node: Node) -> None:
    with kamu.connect(node.url) as con:
        actual = con.query("select 1 as value")
    pandas.testing.assert_frame_equal(pandas.DataFrame({"value": [1]}), actual)


def test_kamu_repr(node: Node) -> None:
    with kamu.connect(node.url) as con:
        assert repr(con) == f"KamuConnectionFlightSql(url='{node.url}')"


def test_kamu_use_after_close(node: Node) -> None:
    con = kamu.connect(node.url)
    pandas.testing.assert_frame_equal(
        pandas.DataFrame({"value": [1]}), con.query("select 1 as value")
    )
    con.close()
    with pytest.raises(adbc_driver_manager.ProgrammingError):
        con.query("select 1 as value")


def test_kamu_pandas_interop(node: Node) -> None:
    with kamu.connect(node.url) as con:
        actual = pandas.read_sql_query("select 1 as value", con.as_adbc())
    pandas.testing.assert_frame_equal(pandas.DataFrame({"value": [1]}), actual)


def test_kamu_dataset_columns_keep_their_types(node: Node) -> None:
    """The reference client's ``test_query``, on a dataset of the same shape: a single-quoted
    table name, unquoted ``offset``, and the system columns' types as pandas sees them."""
    with kamu.connect(node.url) as con:
        actual = con.query(
            """
            select offset, op, reported_date, id, gender, age_group, location
            from 'kamu/covid19.cases'
            order by offset
            limit 1
            """
        )
    expected = pandas.DataFrame(
        {
            "offset": [0],
            "op": [0],
            "reported_date": ["2020-01-29T00:00:00.000Z"],
            "id": [1],
            "gender": ["M"],
            "age_group": ["40s"],
            "location": ["Out of Canada"],
        }
    ).astype(
        dtype={
            "offset": "int64",
            "op": "int32",
            "reported_date": "datetime64[ms, UTC]",
            "id": "int64",
        }
    )
    pandas.testing.assert_frame_equal(expected, actual)


def test_kamu_an_unquoted_dataset_name_is_answered_with_its_quoted_form(node: Node) -> None:
    """``secret.nums`` unquoted is schema ``secret``, table ``nums`` to the engine: the error
    says how to write it, for a reader who may read it and for no one else."""
    with kamu.connect(node.url, token=READ_TOKEN) as con:
        with pytest.raises(pandas.errors.DatabaseError) as raised:
            con.query("select * from secret.nums")
        assert (
            "table 'odf.secret.nums' not found: did you mean \"secret.nums\"? (dataset names go "
            "in double quotes)"
        ) in str(raised.value)
        with pytest.raises(pandas.errors.DatabaseError, match='did you mean "nums"'):
            con.query('select * from "NUMS"')
    with kamu.connect(node.url) as con:
        with pytest.raises(pandas.errors.DatabaseError) as raised:
            con.query("select * from secret.nums")
        assert "not found: no dataset of that alias" in str(raised.value)
        assert "did you mean" not in str(raised.value)


def test_kamu_a_table_under_kamu_clis_catalog_and_schema_is_answered_with_odfds(
    node: Node,
) -> None:
    """kamu-cli's sessions name the catalog and schema ``kamu``; odfd's are ``odf``: a query
    written for the reference is told the name to write, only for a dataset the caller reads."""
    with kamu.connect(node.url) as con:
        for table in ('kamu.kamu."nums"', 'kamu."nums"'):
            with pytest.raises(pandas.errors.DatabaseError) as raised:
                con.query(f"select * from {table}")
            assert (
                'catalog odf, schema odf (kamu-cli\'s are both named kamu); did you mean "nums"?'
                in (str(raised.value))
            )
        with pytest.raises(pandas.errors.DatabaseError) as raised:
            con.query('select * from kamu.kamu."secret.nums"')
        assert "did you mean" not in str(raised.value)
        assert con.query('select count(*) as n from odf.odf."nums"')["n"].tolist() == [5]


def test_kamu_with_a_token_reads_private_datasets(node: Node) -> None:
    with kamu.connect(node.url, token=READ_TOKEN) as con:
        actual = con.query('select value from "secret.nums" order by offset')
    assert actual["value"].tolist() == [7, 8]


def test_kamu_token_from_the_environment_and_the_references_refusal(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KAMU_CLIENT_TOKEN`` is the token ``kamu.connect`` sends when given none; a token the
    node does not know is refused in the reference's words, a forgotten anonymous session token
    is served as anonymous (as the reference serves it)."""
    monkeypatch.setenv("KAMU_CLIENT_TOKEN", READ_TOKEN)
    with kamu.connect(node.url) as con:
        assert con.query('select count(*) as n from "secret.nums"')["n"].tolist() == [2]
    monkeypatch.setenv("KAMU_CLIENT_TOKEN", "not-a-token-of-this-node")
    with pytest.raises(pandas.errors.DatabaseError, match="Invalid access token"):
        with kamu.connect(node.url) as con:
            con.query("select 1 as value")
    monkeypatch.delenv("KAMU_CLIENT_TOKEN")
    with kamu.connect(node.url, token="anon_SESSION-FROM-YESTERDAY") as con:
        assert con.query("select count(*) as n from nums")["n"].tolist() == [5]
        with pytest.raises(pandas.errors.DatabaseError, match="not found"):
            con.query('select * from "secret.nums"')


# --- ADBC --------------------------------------------------------------------------------------


def test_adbc_get_objects_lists_every_readable_dataset(adbc: flightsql.Connection) -> None:
    objects = adbc.adbc_get_objects().read_all().to_pylist()
    assert [catalog["catalog_name"] for catalog in objects] == ["odf"]
    system, schema = objects[0]["catalog_db_schemas"]
    assert (system["db_schema_name"], schema["db_schema_name"]) == ("information_schema", "odf")
    tables = {table["table_name"]: table for table in schema["db_schema_tables"]}
    assert sorted(tables) == ["big", "kamu/covid19.cases", "nums"]  # not "secret.nums"
    columns = [column["column_name"] for column in tables["kamu/covid19.cases"]["table_columns"]]
    assert columns == cases_table().column_names


def test_adbc_table_schema_matches_the_query_result(adbc: flightsql.Connection) -> None:
    declared = adbc.adbc_get_table_schema("kamu/covid19.cases", catalog_filter="odf")
    with adbc.cursor() as cursor:
        cursor.execute('select * from "kamu/covid19.cases"')
        table = cursor.fetch_arrow_table()
    assert declared == table.schema == cases_table().schema
    assert table.equals(cases_table())


def test_adbc_filters_tables_by_pattern(adbc: flightsql.Connection) -> None:
    objects = adbc.adbc_get_objects(depth="tables", table_name_filter="n_m%").read_all()
    names = [
        table["table_name"]
        for catalog in objects.to_pylist()
        for schema in catalog["catalog_db_schemas"]
        for table in schema["db_schema_tables"]
    ]
    assert names == ["nums"]


def test_adbc_table_types(adbc: flightsql.Connection) -> None:
    """The reference's two types; every dataset is a TABLE, so asking for views finds only
    ``information_schema``'s."""
    assert adbc.adbc_get_table_types() == ["TABLE", "VIEW"]
    [schemas] = (
        adbc.adbc_get_objects(depth="tables", table_types_filter=["VIEW"])
        .read_all()["catalog_db_schemas"]
        .to_pylist()
    )
    tables = {schema["db_schema_name"]: schema["db_schema_tables"] for schema in schemas}
    assert tables["odf"] == []
    assert "columns" in {table["table_name"] for table in tables["information_schema"]}


def test_adbc_current_catalog_and_schema_are_the_ones_tables_are_under(
    adbc: flightsql.Connection,
) -> None:
    """What tools show as where a connection is (Flight's session options); setting them to
    what they are is accepted, anything else refused naming the option."""
    assert (adbc.adbc_current_catalog, adbc.adbc_current_db_schema) == ("odf", "odf")
    [catalog] = adbc.adbc_get_objects(depth="db_schemas").read_all().to_pylist()
    assert catalog["catalog_name"] == adbc.adbc_current_catalog
    schemas = [schema["db_schema_name"] for schema in catalog["catalog_db_schemas"]]
    assert schemas == ["information_schema", adbc.adbc_current_db_schema]
    adbc.adbc_current_catalog = "odf"
    adbc.adbc_current_db_schema = "odf"
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="'catalog' \\(invalid value\\)"):
        adbc.adbc_current_catalog = "other"
    with pytest.raises(adbc_driver_manager.ProgrammingError, match="'foo' \\(invalid name\\)"):
        adbc.adbc_connection.set_options(**{"adbc.flight.sql.session.option.foo": "x"})


def test_adbc_driver_info_names_the_server(adbc: flightsql.Connection) -> None:
    info = adbc.adbc_get_info()
    assert info["vendor_name"] == "odfd"
    assert info["vendor_arrow_version"] == pa.__version__


def test_adbc_fetches_an_arrow_table(adbc: flightsql.Connection) -> None:
    with adbc.cursor() as cursor:
        cursor.execute("select offset, value from big order by offset")
        table = cursor.fetch_arrow_table()
    assert table.num_rows == BIG_ROWS
    assert table.column("value").to_pylist() == list(range(BIG_ROWS))
    assert table.schema == pa.schema([("offset", pa.int64()), ("value", pa.int64())])


def test_adbc_prepared_statement_runs_again_and_closes(adbc: flightsql.Connection) -> None:
    query = "select value from nums where value > 2 order by value"
    with adbc.cursor() as cursor:
        assert cursor.adbc_prepare(query) is None  # it takes no parameters
        for _ in range(2):
            cursor.execute(query)
            assert cursor.fetch_arrow_table().column("value").to_pylist() == [3, 4, 5]


def test_adbc_prepared_statement_with_parameters(adbc: flightsql.Connection) -> None:
    query = "select value from nums where value > $1 and value < $2 order by value"
    with adbc.cursor() as cursor:
        for low, high, expected in ((1, 5, [2, 3, 4]), (3, 9, [4, 5])):
            cursor.execute(query, parameters=(low, high))
            assert cursor.fetch_arrow_table().column("value").to_pylist() == expected
        cursor.execute("select $1 || '!' as shout", parameters=("odf",))
        assert cursor.fetchall() == [("odf!",)]


def test_adbc_prepared_statement_announces_its_parameter_schema(adbc: flightsql.Connection) -> None:
    with adbc.cursor() as cursor:
        schema = cursor.adbc_prepare(
            'select id from "kamu/covid19.cases" where id > $1 and gender = $2 and $3 is null'
        )
    # typed as the columns they are compared with; unknown (null) where nothing says
    assert schema == pa.schema([("$1", pa.int64()), ("$2", pa.utf8()), ("$3", pa.null())])


def test_adbc_binds_question_mark_parameters_in_order(adbc: flightsql.Connection) -> None:
    query = "select value, '?' as mark from nums where value > ? and value < ? order by value"
    with adbc.cursor() as cursor:
        schema = cursor.adbc_prepare(query)
        assert schema == pa.schema([("$1", pa.int64()), ("$2", pa.int64())])
        for low, high, expected in ((1, 5, [2, 3, 4]), (3, 9, [4, 5])):
            cursor.execute(query, parameters=(low, high))
            table = cursor.fetch_arrow_table()
            assert table.column("value").to_pylist() == expected
            assert set(table.column("mark").to_pylist()) == {"?"}  # a literal, not a parameter


def test_adbc_binds_an_arrow_batch_of_parameters(adbc: flightsql.Connection) -> None:
    bound = pa.record_batch([pa.array(["F"]), pa.array([2], pa.int64())], names=["g", "low"])
    with adbc.cursor() as cursor:
        cursor.execute(
            'select id from "kamu/covid19.cases" where gender = ? and id >= ? order by id', bound
        )
        assert cursor.fetch_arrow_table().column("id").to_pylist() == [2, 4]


def test_adbc_mixed_placeholders_are_refused(adbc: flightsql.Connection) -> None:
    with adbc.cursor() as cursor, pytest.raises(adbc_driver_manager.Error, match="mixes"):
        cursor.execute("select value from nums where value > ? and value < $2", parameters=(1, 2))


def test_adbc_execute_schema_plans_without_running(adbc: flightsql.Connection) -> None:
    with adbc.cursor() as cursor:
        schema = cursor.adbc_execute_schema("select 1 as one, 'x' as letter")
    assert schema == pa.schema(
        [pa.field("one", pa.int64(), nullable=False), pa.field("letter", pa.utf8(), False)]
    )


def test_adbc_empty_result_keeps_its_schema(adbc: flightsql.Connection) -> None:
    with adbc.cursor() as cursor:
        cursor.execute("select value from nums where value > 100")
        table = cursor.fetch_arrow_table()
    assert table.num_rows == 0 and table.schema.names == ["value"]


# --- pandas over ADBC --------------------------------------------------------------------------


def test_pandas_read_sql_over_adbc(adbc: flightsql.Connection) -> None:
    frame = pandas.read_sql(
        'select id, gender, reported_date from "kamu/covid19.cases" order by id', adbc
    )
    assert frame["id"].tolist() == [1, 2, 3, 4]
    assert frame["gender"].tolist()[:2] == ["M", "F"] and pandas.isna(frame["gender"][2])
    assert str(frame["reported_date"].dtype) == "datetime64[ms, UTC]"
