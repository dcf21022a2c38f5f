"""A ``pyarrow.flight`` client that cancels its own queries, run as a process of its own by the
tests: pyarrow's client answers a CANCELLED status with a simulated Ctrl-C (``KeyboardInterrupt``
in its main thread), which a test process must not receive.

Usage: ``python -m tests.flight_sql.cancelling_client URL SQL``. Prints one JSON line: the
CancelFlightInfo answer and what the DoGet of a running query and of a cancelled ticket ended
with.
"""

from __future__ import annotations

import json
import sys
import threading

import pyarrow.flight as flight

from odfd.flight_sql import messages


def ended(client: flight.FlightClient, info: flight.FlightInfo, options: object) -> str:
    try:
        client.do_get(info.endpoints[0].ticket, options).read_all()
    except (flight.FlightCancelledError, KeyboardInterrupt) as err:
        return "cancelled: " + str(getattr(err, "args", [""])[:1])
    except flight.FlightError as err:
        return f"{type(err).__name__}: {err}"
    return "completed"


def main(url: str, sql: str) -> None:
    client = flight.FlightClient(url)
    options = flight.FlightCallOptions(headers=[client.authenticate_basic_token("anonymous", "")])
    command = messages.pack(messages.new("CommandStatementQuery", query=sql))
    describe = flight.FlightDescriptor.for_command(command)
    answers: list[int] = []

    def cancel(info: flight.FlightInfo) -> None:
        request = messages.new("CancelFlightInfoRequest", info=info.serialize())
        action = flight.Action("CancelFlightInfo", request.SerializeToString())
        (result,) = client.do_action(action, options)
        answers.append(messages.parse("CancelFlightInfoResult", result.body.to_pybytes()).status)

    running = client.get_flight_info(describe, options)
    timer = threading.Timer(0.5, cancel, (running,))
    timer.start()
    while_running = ended(client, running, options)
    timer.join()
    later = client.get_flight_info(describe, options)
    cancel(later)
    before_started = ended(client, later, options)
    print(json.dumps({"answers": answers, "running": while_running, "later": before_started}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
