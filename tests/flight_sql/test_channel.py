"""A query's batches go from the loop to the sending thread: in order, the producer waiting
while the channel is full, an error raised after the items put before it."""

from __future__ import annotations

import asyncio
import threading

import pytest

from odfd.flight_sql.channel import Channel, Pending


def test_items_arrive_in_order_and_a_full_channel_holds_its_producer() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever)
    runner.start()
    try:
        channel: Channel[int | None] = Channel(loop, depth=2)
        produced: list[int] = []

        async def produce() -> None:
            for item in range(5):
                await channel.space()
                produced.append(item)
                channel.put(item)
            channel.put(None)

        done = asyncio.run_coroutine_threadsafe(produce(), loop)
        assert isinstance(channel.take(5.0), int)
        taken = [0]
        assert not done.done()
        while (item := channel.take(5.0)) is not None:
            assert not isinstance(item, Pending)
            taken.append(item)
            assert len(produced) - len(taken) <= 2  # never more than `depth` waiting
        assert taken == [0, 1, 2, 3, 4]
        done.result(5.0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(5.0)
        loop.close()


def test_nothing_yet_is_pending_and_an_error_follows_the_items() -> None:
    loop = asyncio.new_event_loop()
    channel: Channel[int] = Channel(loop)
    assert isinstance(channel.take(0.01), Pending)
    channel.put(1)
    channel.fail(ValueError("the engine failed"))
    assert channel.take(0.01) == 1
    with pytest.raises(ValueError, match="the engine failed"):
        channel.take(0.01)
    loop.close()
