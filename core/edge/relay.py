"""A TCP relay that delays every byte by a fixed time: edge-link latency where ``tc netem`` is
missing (as in this project's CI kernel).

``python -m core.edge.relay --listen IP:PORT --target IP:PORT --delay-ms 20`` accepts
connections on ``--listen`` and forwards each to ``--target``; data in both directions is
released ``delay`` after it was read (order kept, throughput not throttled), so a round trip
through the relay takes ``2 * delay`` longer. TLS passes through untouched (the relay never sees
plaintext). Used by the network-namespace tests and ``benchmarks/edge_dispatch.py``; it is a test
instrument, not part of a deployment.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import time
from collections.abc import Sequence

__all__ = ["serve", "main"]

LOGGER = logging.getLogger(__name__)
_CHUNK = 65536
_CONNECT_S = 10.0


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

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
            queue.put_nowait((time.monotonic() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
        writer.close()


async def serve(listen: tuple[str, int], target: tuple[str, int], delay: float) -> None:
    """Run the relay until cancelled."""

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
        await asyncio.gather(_pump(reader, up_writer, delay), _pump(up_reader, writer, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, *listen)
    LOGGER.info("relay %s:%d -> %s:%d, %.0f ms each way", *listen, *target, delay * 1000)
    async with server:
        await server.serve_forever()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m core.edge.relay", description=__doc__)
    parser.add_argument("--listen", required=True, type=_addr)
    parser.add_argument("--target", required=True, type=_addr)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    asyncio.run(serve(args.listen, args.target, args.delay_ms / 1000.0))


if __name__ == "__main__":
    main()
