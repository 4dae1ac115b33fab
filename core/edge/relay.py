"""A TCP relay that shapes an edge link: every byte is delayed by a fixed time and, optionally,
paced to a bandwidth -- link latency and throughput where ``tc netem`` is missing (as in this
project's CI kernel).

``python -m core.edge.relay --listen IP:PORT --target IP:PORT --delay-ms 20 [--rate-kbps 1000]``
accepts connections on ``--listen`` and forwards each to ``--target``. In each direction a chunk
is sent on when the link is free (the previous chunk has been "transmitted" at ``rate``) plus its
transmission time, then released ``delay`` later; order is kept. So a round trip through the
relay takes ``2 * delay`` longer, and ``n`` bytes take at least ``n / rate`` seconds. TLS passes
through untouched (the relay never sees plaintext).

Two uses: the network-namespace tests and ``benchmarks/edge_dispatch.py`` run it as a process
between namespaces; :class:`LinkRelay` runs it in a thread of the ``ianvs`` process, so a job can
set the link to its edge node (the ``link_delay_ms`` and ``link_rate_kbps`` of the
``edge_node`` generator, :mod:`core.edge.models`). It emulates a link; it is not part of a
deployment, whose network is the real one.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import threading
import time
from collections.abc import Sequence

__all__ = ["LinkRelay", "serve", "main"]

LOGGER = logging.getLogger(__name__)
_CHUNK = 65536
_CONNECT_S = 10.0


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                rate: float = 0.0) -> None:
    """Copy ``reader`` to ``writer``; each chunk leaves ``delay`` after its transmission ends
    (``rate`` bytes/s, 0 = unlimited) on a link that sends one chunk at a time."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    link_free = 0.0

    async def release() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(_CHUNK)
            now = time.monotonic()
            sent = now
            if rate > 0 and data:
                sent = max(now, link_free) + len(data) / rate
                link_free = sent
            queue.put_nowait((sent + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
        writer.close()


async def _start(listen: tuple[str, int], target: tuple[str, int], delay: float,
                 rate: float = 0.0) -> asyncio.base_events.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        deadline = time.monotonic() + _CONNECT_S
        while True:  # the target may still be starting: retry like a SYN would
            try:
                up_reader, up_writer = await asyncio.open_connection(*target)
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    LOGGER.warning("relay: cannot reach %s:%d: %s", *target, exc)
                    writer.close()
                    return
                await asyncio.sleep(0.1)
        await asyncio.gather(_pump(reader, up_writer, delay, rate),
                             _pump(up_reader, writer, delay, rate), return_exceptions=True)

    server = await asyncio.start_server(handle, *listen)
    port = server.sockets[0].getsockname()[1]
    LOGGER.info("relay %s:%d -> %s:%d, %.0f ms each way%s", listen[0], port, *target,
                delay * 1000, f", {rate * 8 / 1000:g} kbit/s" if rate else "")
    return server


async def serve(listen: tuple[str, int], target: tuple[str, int], delay: float,
                rate: float = 0.0) -> None:
    """Run the relay until cancelled (``delay`` in seconds, ``rate`` in bytes/s, 0 = none)."""
    server = await _start(listen, target, delay, rate)
    async with server:
        await server.serve_forever()


class LinkRelay:
    """The relay in a daemon thread of this process, listening on ``127.0.0.1`` (a free port):
    :attr:`port` after :meth:`start`; :meth:`close` stops it and drops its connections.
    ``delay`` in seconds each way, ``rate`` in bytes per second (0: unlimited)."""

    def __init__(self, target: tuple[str, int], delay: float, rate: float = 0.0) -> None:
        self.target, self.delay, self.rate = target, delay, rate
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ianvs-link-relay",
                                        daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> "LinkRelay":
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            _start(("127.0.0.1", 0), self.target, self.delay, self.rate), self._loop)
        self._server = fut.result(timeout=10)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    def close(self) -> None:
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing: nothing left to save
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m core.edge.relay", description=__doc__)
    parser.add_argument("--listen", required=True, type=_addr)
    parser.add_argument("--target", required=True, type=_addr)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rate-kbps", type=float, default=0.0,
                        help="bandwidth in kbit/s each way (default 0: unlimited)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    asyncio.run(serve(args.listen, args.target, args.delay_ms / 1000.0,
                      args.rate_kbps * 1000.0 / 8.0))


if __name__ == "__main__":
    main()
