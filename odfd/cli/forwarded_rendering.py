"""How a forwarded command's answer is printed when its local run draws a status line
(``ingest``, ``pull``): ``Working`` events start and stop the line, every other event goes to
the command's own printer, as a local run prints it."""

from __future__ import annotations

from typing import Any

from odfd.app.events import Event, EventSink, Working, event_from_json


class StatusLineRendering:
    """The daemon's events for one command, printed as a local run prints them."""

    def __init__(self, events: tuple[type[Event], ...], printer: EventSink) -> None:
        from odfd.cli.status_line import StatusLine  # the terminal code only once it is used

        self.events = (*events, Working)
        self.printer = printer
        self.line = StatusLine()

    def event(self, data: dict[str, Any]) -> None:
        event = event_from_json(data, self.events)
        if isinstance(event, Working) and event.label is not None:
            self.line.start(event.label)
        elif isinstance(event, Working):
            self.line.stop()
        else:
            self.printer.emit(event)

    def result(self, data: Any) -> int:
        return 0
