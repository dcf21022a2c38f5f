"""FetchStep::Mqtt end to end against a real Mosquitto broker, with a real publisher."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt import publish

from odfd.coordinator import ingest
from odfd.coordinator.ingest import pull_root
from odfd.ingest.errors import FetchError
from odfd.ingest.fetch import fetch
from odfd.ingest.fetch.mqtt import KIND_MQTT_SESSION
from protocol.model import FetchStepMqtt, MqttQos, MqttTopicSubscription, Timestamp
from storage.dataset import Dataset
from storage.errors import DiskFullError
from storage.workspace import Workspace
from tests.fixtures.mosquitto import PASSWORD, USERNAME, Broker
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, rows
from verifier.audit import VerifyOptions, verify

pytestmark = pytest.mark.spark


def _manifest(broker: Broker, password: str = "${{ env.ODFD_TEST_MQTT_PASSWORD }}") -> str:
    return f"""
kind: DatasetSnapshot
version: 1
content:
  name: sensors
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Mqtt
        host: {broker.host}
        port: {broker.port}
        username: {USERNAME}
        password: "{password}"
        topics:
          - path: sensors/#
            qos: AtLeastOnce
      read:
        kind: NdJson
        schema:
          fields:
            - name: id
              type: int64
            - name: temp
              type: float64
      merge:
        kind: Append
"""


def _publish(broker: Broker, *messages: tuple[str, object, bool]) -> None:
    """Publishes (topic, payload, retain) with QoS 1, as a device would."""
    publish.multiple(
        [
            {
                "topic": topic,
                "payload": payload if isinstance(payload, str) else json.dumps(payload),
                "qos": 1,
                "retain": retain,
            }
            for topic, payload, retain in messages
        ],
        hostname=broker.host,
        port=broker.port,
        auth={"username": USERNAME, "password": PASSWORD},
        protocol=mqtt.MQTTv5,
    )


async def _pull(workspace: Workspace, dataset: Dataset, day: int) -> tuple[bool, int]:
    [outcome] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, day), engines=TEST_ENGINES
    )
    return outcome.up_to_date, outcome.num_records


async def test_mqtt_source_takes_each_message_once(
    workspace: Workspace, mosquitto: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_TEST_MQTT_PASSWORD", PASSWORD)
    _publish(mosquitto, ("sensors/a", {"id": 1, "temp": 20.5}, True))  # before odfd subscribed
    dataset = await create(workspace, _manifest(mosquitto))

    assert await _pull(workspace, dataset, 1) == (False, 1)  # the retained message
    assert await _pull(workspace, dataset, 2) == (True, 0)  # nothing new, retained not resent

    # published while odfd is away: the broker keeps them in odfd's persistent session
    _publish(
        mosquitto,
        ("sensors/b", {"id": 2, "temp": 21.0}, False),
        ("sensors/a", '{\n  "id": 3,\n  "temp": 22.5\n}', True),  # pretty JSON, retained
        ("other/x", {"id": 99, "temp": 0.0}, False),  # not subscribed
    )
    assert await _pull(workspace, dataset, 3) == (False, 2)
    assert await _pull(workspace, dataset, 4) == (True, 0)

    # the broker restarts and forgets every session: it sends the retained message again,
    # which odfd already took
    mosquitto.restart()
    assert await _pull(workspace, dataset, 5) == (True, 0)
    _publish(mosquitto, ("sensors/c", {"id": 4, "temp": 23.0}, False))
    assert await _pull(workspace, dataset, 6) == (False, 1)

    assert await rows(dataset, "id", "temp") == [(1, 20.5), (2, 21.0), (3, 22.5), (4, 23.0)]
    states = [e.new_source_state for e in await data_events(dataset)]
    assert all(s is not None and s.kind == KIND_MQTT_SESSION for s in states)
    assert len({json.loads(s.value)["clientId"] for s in states if s}) == 1  # one session
    report = await verify(workspace, ["sensors"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
    assert report.exit_code == 0, report.dumps(None)


async def test_first_poll_without_messages_keeps_the_session(
    workspace: Workspace, mosquitto: Broker
) -> None:
    dataset = await create(workspace, _manifest(mosquitto, password=PASSWORD))
    assert await _pull(workspace, dataset, 1) == (False, 0)  # commits the session's client id
    _publish(mosquitto, ("sensors/a", {"id": 1, "temp": 1.0}, False))
    assert await _pull(workspace, dataset, 2) == (False, 1)
    assert await rows(dataset, "id") == [(1,)]


async def test_messages_of_a_failed_ingest_are_delivered_again(
    workspace: Workspace, mosquitto: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = await create(workspace, _manifest(mosquitto, password=PASSWORD))
    assert await _pull(workspace, dataset, 1) == (False, 0)  # the session
    _publish(
        mosquitto,
        ("sensors/a", {"id": 1, "temp": 1.0}, False),
        ("sensors/b", {"id": 2, "temp": 2.0}, False),
    )
    head = await dataset.chain.head()

    async def disk_full(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(ingest, "commit_transaction", disk_full)
        with pytest.raises(DiskFullError):
            await pull_root(
                workspace, dataset, system_time=Timestamp.of(2024, 7, 2), engines=TEST_ENGINES
            )
    assert await dataset.chain.head() == head
    # not acknowledged: the broker delivers both again to the same session
    assert await _pull(workspace, dataset, 3) == (False, 2)
    assert await _pull(workspace, dataset, 4) == (True, 0)  # acknowledged once committed
    assert await rows(dataset, "id") == [(1,), (2,)]


async def test_a_message_sent_while_the_transaction_runs_is_taken_next_time(
    workspace: Workspace, mosquitto: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = await create(workspace, _manifest(mosquitto, password=PASSWORD))
    assert await _pull(workspace, dataset, 1) == (False, 0)  # the session
    _publish(mosquitto, ("sensors/a", {"id": 1, "temp": 1.0}, False))
    commit = ingest.commit_transaction

    async def commit_after_a_late_message(*args: Any, **kwargs: Any) -> Any:
        # reaches odfd's still-open connection, after the fetched file was written
        _publish(mosquitto, ("sensors/b", {"id": 2, "temp": 2.0}, False))
        return await commit(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ingest, "commit_transaction", commit_after_a_late_message)
        assert await _pull(workspace, dataset, 2) == (False, 1)
    assert await _pull(workspace, dataset, 3) == (False, 1)  # not acknowledged with the first
    assert await rows(dataset, "id") == [(1,), (2,)]


@pytest.mark.parametrize(
    ("password", "stop", "message"),
    [
        ("wrong", False, "refused the connection: Not authorized"),
        (PASSWORD, True, "is unreachable: Connection refused"),
    ],
    ids=["auth-refused", "broker-down"],
)
async def test_mqtt_failures_name_the_broker_and_commit_nothing(
    workspace: Workspace, mosquitto: Broker, password: str, stop: bool, message: str
) -> None:
    dataset = await create(workspace, _manifest(mosquitto, password=password))
    head = await dataset.chain.head()
    if stop:
        mosquitto.stop()
    with pytest.raises(FetchError) as caught:
        await pull_root(workspace, dataset, engines=TEST_ENGINES)
    text = str(caught.value)
    assert "\n" not in text
    assert text == f"fetch.mqtt: broker {mosquitto.host}:{mosquitto.port} {message}"
    assert await dataset.chain.head() == head


def test_port_8883_connects_with_tls_and_checks_the_certificate(
    mosquitto_tls: tuple[Broker, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker, ca = mosquitto_tls
    step = FetchStepMqtt(
        host=broker.host,
        port=broker.port,
        username=USERNAME,
        password=PASSWORD,
        topics=(MqttTopicSubscription(path="sensors/#", qos=MqttQos.AT_LEAST_ONCE),),
    )
    now = Timestamp.of(2024, 7, 1)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(
        FetchError,
        match=r"^fetch.mqtt: broker [0-9.]+:8883: its TLS certificate is not trusted: ",
    ):
        fetch(step, None, tmp_path / "a", now)

    monkeypatch.setenv("SSL_CERT_FILE", str(ca))  # the test CA, as a user adds theirs
    first = fetch(step, None, tmp_path / "b", now)
    assert first is not None and first.path.read_text() == ""
    assert first.receipt is not None
    first.receipt.settle(committed=True)  # as the ingest does once it committed
    publish.single(
        "sensors/a",
        json.dumps({"id": 1, "temp": 2.0}),
        qos=1,
        hostname=broker.host,
        port=broker.port,
        auth={"username": USERNAME, "password": PASSWORD},
        tls={"ca_certs": str(ca)},
        protocol=mqtt.MQTTv5,
    )
    second = fetch(step, first.source_state, tmp_path / "c", now)
    assert second is not None and second.path.read_text() == '{"id": 1, "temp": 2.0}\n'
    assert second.receipt is not None
    second.receipt.settle(committed=True)
