"""FetchStep::Mqtt: the messages that reached the broker's topics since the last poll.

odfd is an MQTT client that connects only while it pulls, so it keeps a persistent session
(MQTT v5, ``clean_start`` off, a session that never expires): between polls the broker queues the
QoS 1 and 2 messages of the subscribed topics for it (QoS 0 ones only if the broker is set up to),
and a message acknowledged once is never delivered again. The session's client id is made on the
first poll and kept in the source state, so the first poll always commits (even with no messages):
a later poll must resume the same session. QoS 1 and 2 messages are acknowledged only once the
ingest transaction that took them has committed (the ``Receipt``; the connection stays open, kept
alive by paho's network thread, while the transaction runs): if it fails or the process is killed,
the broker delivers them again to the same session (the reference acknowledges on arrival and
loses them). QoS 0 messages cannot be acknowledged: a failed ingest loses those, as MQTT intends.

Retained messages: a new subscription receives each topic's retained message once, as the broker
sends it; re-subscribing to an existing one does not resend it (retain handling 1). The source state
also keeps a digest of the last retained message taken per topic, so a broker that lost the session
(and sends retained messages again on the new subscription) does not make odfd take one twice.

TLS: the step has no field for it, so port 8883 (IANA's port for MQTT over TLS) means TLS, with
the broker's certificate checked against the system's CAs (``SSL_CERT_FILE`` adds others).

A poll ends when the broker has sent nothing for ``IDLE_SECONDS`` (or after ``MAX_POLL_SECONDS``
or ``MAX_MESSAGES`` unacknowledged messages, then ``has_more`` asks for another pull). Each
message's payload becomes one line of the fetched file (a multi-line JSON payload is compacted),
for the read step (usually NdJson) to parse.
"""

from __future__ import annotations

import hashlib
import json
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from odfd.ingest.errors import FetchError, IngestError
from odfd.ingest.fetch.base import POLLING_SOURCE_NAME, Fetched
from odfd.ingest.template import render
from protocol.model import FetchStepMqtt, MqttQos, SourceState, Timestamp

#: Source state kind: JSON with the session's client id, its topics and retained-message digests.
KIND_MQTT_SESSION = "odfd/mqtt-session"

#: Port that means MQTT over TLS (IANA "secure-mqtt").
MQTT_TLS_PORT = 8883
CONNECT_TIMEOUT_SECONDS = 10.0
IDLE_SECONDS = 1.0
MAX_POLL_SECONDS = 60.0
#: Receive Maximum the client announces: the broker sends at most this many unacknowledged
#: QoS 1/2 messages, so a poll takes at most this many (MQTT v5's largest value).
MAX_MESSAGES = 65535
_KEEPALIVE_SECONDS = 30
#: The largest session expiry interval MQTT v5 has: the session never expires.
_SESSION_NEVER_EXPIRES = 0xFFFFFFFF
_LOOP_STEP_SECONDS = 0.05

_QOS = {None: 0, MqttQos.AT_MOST_ONCE: 0, MqttQos.AT_LEAST_ONCE: 1, MqttQos.EXACTLY_ONCE: 2}


@dataclass(slots=True)
class _Session:
    """What the source state remembers between polls."""

    client_id: str
    topics: list[str] = field(default_factory=list)
    retained: dict[str, str] = field(default_factory=dict)
    """Topic → SHA-256 of the last retained message taken from it."""

    def to_state(self) -> SourceState:
        value = json.dumps(
            {"clientId": self.client_id, "topics": self.topics, "retained": self.retained},
            sort_keys=True,
            separators=(",", ":"),
        )
        return SourceState(source_name=POLLING_SOURCE_NAME, kind=KIND_MQTT_SESSION, value=value)

    @classmethod
    def from_state(cls, state: SourceState | None) -> _Session | None:
        if state is None or state.kind != KIND_MQTT_SESSION:
            return None
        try:
            raw = json.loads(state.value)
            return cls(str(raw["clientId"]), list(raw["topics"]), dict(raw["retained"]))
        except (ValueError, KeyError, TypeError):
            raise IngestError(
                f"source state {KIND_MQTT_SESSION} is not valid: {state.value!r}"
            ) from None


@dataclass(slots=True)
class _Poll:
    """What the client's callbacks saw; filled on the polling thread by ``client.loop``."""

    connected: bool = False
    refused: str | None = None
    subscribed: bool = False
    sub_failures: list[str] = field(default_factory=list)
    disconnected: str | None = None
    last_activity: float = 0.0
    messages: list[mqtt.MQTTMessage] = field(default_factory=list)


class MqttFetcher:
    """Fetches ``FetchStepMqtt`` sources."""

    def fetch(
        self,
        step: FetchStepMqtt,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        prev = _Session.from_state(prev_state)
        session = prev or _Session(client_id=f"odfd-{uuid.uuid4().hex}")
        where = f"fetch.mqtt: broker {step.host}:{step.port}"
        if not step.topics:
            raise IngestError("fetch.mqtt: the step subscribes to no topics")
        client, poll, more = _poll(step, session, where)
        receipt = _Acknowledgement(client, poll.messages)
        try:
            out_topics = sorted(t.path for t in step.topics)
            retained = dict(session.retained)
            lines: list[bytes] = []
            for message in poll.messages:
                if message.retain:
                    digest = hashlib.sha256(message.payload).hexdigest()
                    if retained.get(message.topic) == digest:
                        continue  # taken by an earlier poll; the broker lost the session, resent it
                    retained[message.topic] = digest
                lines.append(_line(message))
            new = _Session(session.client_id, out_topics, retained)
            if prev is not None and not lines and new == prev:
                receipt.settle(committed=True)  # only repeats of what an earlier poll took
                return None
            work_dir.mkdir(parents=True, exist_ok=True)
            target = work_dir / f"fetch-{uuid.uuid4().hex}.ndjson"
            with open(target, "wb") as out:
                for line in lines:
                    out.write(line)
        except BaseException:
            receipt.settle(committed=False)
            raise
        receipt.keep_alive()
        return Fetched(target, True, new.to_state(), None, has_more=more, receipt=receipt)


class _Acknowledgement:
    """Acknowledges a poll's messages once its transaction committed, then disconnects (the
    broker keeps the session); without a commit it only disconnects, and the broker delivers the
    unacknowledged messages again on the next poll."""

    def __init__(self, client: mqtt.Client, messages: list[mqtt.MQTTMessage]) -> None:
        self._client = client
        # A copy: the connection stays open while the transaction runs, and messages the broker
        # sends meanwhile (appended by the callback) are not in the fetched file. Left
        # unacknowledged, they are delivered again on the next poll.
        self._messages = list(messages)
        self._threaded = False

    def keep_alive(self) -> None:
        """Hands the connection to paho's network thread (pings) while the transaction runs."""
        self._client.loop_start()
        self._threaded = True

    def settle(self, committed: bool) -> None:
        try:
            if committed:
                for message in self._messages:
                    if message.qos > 0:
                        self._client.ack(message.mid, message.qos)
            self._client.disconnect()  # sent after the acknowledgements, on the same connection
            if not self._threaded:
                self._client.loop(_LOOP_STEP_SECONDS)
        finally:
            if self._threaded:
                self._client.loop_stop()


def _poll(step: FetchStepMqtt, session: _Session, where: str) -> tuple[mqtt.Client, _Poll, bool]:
    """Connects, (re)subscribes, collects until the broker is idle; returns the client still
    connected with nothing acknowledged (on an error: disconnected), and whether more may wait."""
    poll = _Poll()
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=session.client_id,
        protocol=mqtt.MQTTv5,
        manual_ack=True,
    )
    if step.username is not None:
        password = render(step.password, "fetch.password") if step.password is not None else None
        client.username_pw_set(step.username, password)
    if step.port == MQTT_TLS_PORT:
        client.tls_set_context(ssl.create_default_context())
    _wire(client, poll)
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = _SESSION_NEVER_EXPIRES
    props.ReceiveMaximum = MAX_MESSAGES
    try:
        client.connect(
            step.host, step.port, _KEEPALIVE_SECONDS, clean_start=False, properties=props
        )
    except ssl.SSLCertVerificationError as err:
        raise FetchError(
            f"{where}: its TLS certificate is not trusted: {err.verify_message}"
        ) from None
    except ssl.SSLError as err:
        raise FetchError(f"{where}: TLS failed: {err.reason or err}") from None
    except OSError as err:
        raise FetchError(f"{where} is unreachable: {err.strerror or err}") from None
    try:
        _loop_until(client, poll, lambda: poll.connected or poll.refused is not None, where)
        if poll.refused is not None:
            raise FetchError(f"{where} refused the connection: {poll.refused}")
        stale = sorted(set(session.topics) - {t.path for t in step.topics})
        if stale:
            client.unsubscribe(stale)
        options = [
            (t.path, SubscribeOptions(qos=_QOS[t.qos], retainHandling=1)) for t in step.topics
        ]
        client.subscribe(options)
        _loop_until(client, poll, lambda: poll.subscribed, where)
        if poll.sub_failures:
            raise FetchError(f"{where} refused the subscription: {'; '.join(poll.sub_failures)}")
        started = time.monotonic()
        poll.last_activity = started
        while time.monotonic() - poll.last_activity < IDLE_SECONDS:
            if time.monotonic() - started > MAX_POLL_SECONDS or len(poll.messages) >= MAX_MESSAGES:
                return client, poll, True
            _loop_once(client, poll, where)
        return client, poll, False
    except BaseException:
        if poll.disconnected is None:
            client.disconnect()
            client.loop(_LOOP_STEP_SECONDS)  # sends DISCONNECT, so the broker keeps the session
        raise


def _wire(client: mqtt.Client, poll: _Poll) -> None:
    def on_connect(_c: Any, _u: Any, _f: Any, reason: ReasonCode, _p: Any) -> None:
        if reason.is_failure:
            poll.refused = str(reason)
        else:
            poll.connected = True

    def on_subscribe(_c: Any, _u: Any, _mid: int, reasons: list[ReasonCode], _p: Any) -> None:
        poll.subscribed = True
        poll.sub_failures.extend(str(r) for r in reasons if r.is_failure)

    def on_message(_c: Any, _u: Any, message: mqtt.MQTTMessage) -> None:
        poll.messages.append(message)
        poll.last_activity = time.monotonic()

    def on_disconnect(_c: Any, _u: Any, _f: Any, reason: ReasonCode, _p: Any) -> None:
        poll.disconnected = str(reason)

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.on_disconnect = on_disconnect


def _loop_until(client: mqtt.Client, poll: _Poll, done: Callable[[], bool], where: str) -> None:
    deadline = time.monotonic() + CONNECT_TIMEOUT_SECONDS
    while not done():
        if time.monotonic() > deadline:
            raise FetchError(f"{where} did not answer within {CONNECT_TIMEOUT_SECONDS:g} s")
        _loop_once(client, poll, where)


def _loop_once(client: mqtt.Client, poll: _Poll, where: str) -> None:
    rc = client.loop(_LOOP_STEP_SECONDS)
    if poll.refused is not None:
        return
    if poll.disconnected is not None or rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_AGAIN):
        reason = poll.disconnected or mqtt.error_string(rc)
        raise FetchError(f"{where} closed the connection: {reason}")


def _line(message: mqtt.MQTTMessage) -> bytes:
    """One line of the fetched file; multi-line JSON is compacted so NdJson can read it."""
    payload = message.payload.strip()
    if b"\n" in payload or b"\r" in payload:
        try:
            payload = json.dumps(json.loads(payload), separators=(",", ":")).encode()
        except ValueError:
            raise FetchError(
                f"fetch.mqtt: a message on topic {message.topic} spans several lines and is "
                "not JSON"
            ) from None
    return payload + b"\n"
