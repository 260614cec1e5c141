#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that cuts chosen connections after chosen byte counts, as a dropped network would.

Usage: fault-proxy.py TARGET_PORT [CUT ...]
  CUT   bytes (K, M or G suffixes: powers of 1024). The first connection to carry CUT bytes from the client since it
        opened is reset in both directions after exactly that many, and the next CUT waits for the next connection.
        `stall:BYTES` stalls it instead, as a sleeping laptop or a network that drops packets silently would: the
        target's side is reset, and the client's is kept open but neither read nor answered (for 120 s).
        `outage:BYTES:SECONDS` cuts it as CUT does and begins an outage, as when a network is down: every open
        connection is reset, and for SECONDS every new one as soon as it is accepted (each counted as a try during
        the outage).
        `delay:MS` puts a link of MS ms each way between them, as a network far away does: each connection's bytes
        start to pass a round trip (2 × MS) after it opened (its TCP handshake), and every chunk in either direction
        is passed MS after it came, in order.
Prints its port on the first line of stdout, and on stderr a line for each connection, cut and stall with its time
(`at SECONDS`, Unix time). For each line on standard input, and when it closes, it prints one JSON line,
{"forwarded": BYTES, "connections": N, "cuts": N, "stalls": N, "flowing": SECONDS, "outage_tries": N,
"outage_end": SECONDS, "first_after_outage": SECONDS, "tenths": [[TENTH, BYTES], ...]}, BYTES counting every client
byte it passed to the target (`tenths` by the tenth of a second, Unix time times 10, that passed them: a link's rate),
`flowing` the Unix time when they first passed 64 KiB (a body is flowing: a request's head is far smaller), or null,
`outage_end` when the outage ends and `first_after_outage` when the first connection after it came, or null; once
standard input closes, it exits.
"""
import asyncio
import json
import socket
import struct
import sys
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    unit = UNITS.get(text[-1:].upper())
    return int(text[:-1]) * unit if unit else int(text)


class Proxy:
    def __init__(self, target, cuts, delay=0.0):
        self.target = target
        self.cuts = list(cuts)
        self.delay = delay
        self.forwarded = 0
        self.connections = 0
        self.made_cuts = 0
        self.made_stalls = 0
        self.flowing = None
        self.outage_end = None
        self.outage_tries = 0
        self.first_after_outage = None
        # The writers of every open connection, which an outage resets all at once.
        self.open = set()
        # Client bytes passed, by the tenth of a second (Unix time times 10): the rate at the link.
        self.tenths = {}

    def count(self, forwarded):
        self.forwarded += forwarded
        tenth = int(time.time() * 10)
        self.tenths[tenth] = self.tenths.get(tenth, 0) + forwarded
        if self.flowing is None and self.forwarded > 1 << 16:
            self.flowing = time.time()

    @staticmethod
    async def pass_on(writer, data):
        """Writes `data` to `writer`, or (None) ends its side of the connection."""
        if data is None:
            if writer.can_write_eof():
                writer.write_eof()
            return
        writer.write(data)
        await writer.drain()

    @staticmethod
    def reset(*writers):
        """Closes with RST rather than FIN: the peer sees the connection reset, as when a network drops it."""
        for writer in writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            writer.transport.abort()

    async def handle(self, client_reader, client_writer):
        self.connections += 1
        number = self.connections
        now = time.time()
        print(f"fault-proxy: connection {number} at {now:.3f}", file=sys.stderr, flush=True)
        if self.outage_end is not None:
            if now < self.outage_end:
                self.outage_tries += 1
                self.reset(client_writer)
                return
            if self.first_after_outage is None:
                self.first_after_outage = now
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            self.reset(client_writer)
            return
        if self.outage_end is not None and time.time() < self.outage_end:
            # Accepted as the outage began, and missed by its resets.
            self.reset(client_writer, upstream_writer)
            return
        sent = 0
        stalled = False
        pair = (client_writer, upstream_writer)
        self.open.add(pair)
        if self.delay:
            # The handshake's round trip, before the client's first byte can be on its way.
            await asyncio.sleep(2 * self.delay)

        def link(writer):
            """What writes to `writer` `self.delay` after each chunk came, in order; None ends the stream."""
            if not self.delay:
                return None, None
            queue = asyncio.Queue()

            async def deliver():
                while True:
                    due, data = await queue.get()
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                    await self.pass_on(writer, data)
                    if data is None:
                        return

            return queue, asyncio.ensure_future(deliver())

        up_link, up_task = link(upstream_writer)
        down_link, down_task = link(client_writer)

        async def write(writer, queue, data):
            if queue is None:
                await self.pass_on(writer, data)
            else:
                queue.put_nowait((time.monotonic() + self.delay, data))

        async def upward():
            nonlocal sent, stalled
            while True:
                data = await client_reader.read(1 << 16)
                if not data:
                    await write(upstream_writer, up_link, None)
                    return
                if self.cuts and sent + len(data) >= self.cuts[0][0]:
                    at, stalls, outage = self.cuts.pop(0)
                    allowed = at - sent
                    upstream_writer.write(data[:allowed])
                    await upstream_writer.drain()
                    self.count(allowed)
                    if stalls:
                        stalled = True
                        self.made_stalls += 1
                        print(f"fault-proxy: stalled connection {number} after {at} bytes at {time.time():.3f}",
                              file=sys.stderr, flush=True)
                        self.reset(upstream_writer)
                        await asyncio.sleep(120)
                        self.reset(client_writer)
                        return
                    self.made_cuts += 1
                    if outage:
                        self.outage_end = time.time() + outage
                        for writers in list(self.open):
                            self.reset(*writers)
                    print(f"fault-proxy: cut connection {number} after {at} bytes", file=sys.stderr, flush=True)
                    self.reset(client_writer, upstream_writer)
                    return
                await write(upstream_writer, up_link, data)
                sent += len(data)
                self.count(len(data))

        async def downward():
            while True:
                try:
                    data = await upstream_reader.read(1 << 16)
                except (ConnectionError, OSError):
                    data = b""
                if stalled:
                    # The client hears nothing more: not the target's reset, not an end.
                    return
                if not data:
                    await write(client_writer, down_link, None)
                    return
                await write(client_writer, down_link, data)

        tasks = [asyncio.ensure_future(upward()), asyncio.ensure_future(downward())]
        # The link's deliveries end the connection only once they delivered all they hold.
        tasks += [task for task in (up_task, down_task) if task is not None]
        try:
            await asyncio.gather(*tasks)
        except (ConnectionError, OSError, asyncio.CancelledError):
            # Cancelled: a connection kept alive when the proxy stops.
            pass
        finally:
            self.open.discard(pair)
            for task in tasks:
                task.cancel()
            for writer in (client_writer, upstream_writer):
                writer.close()


async def main():
    target = int(sys.argv[1])
    cuts = []
    delay = 0.0
    for cut in sys.argv[2:]:
        if cut.startswith("delay:"):
            delay = float(cut.removeprefix("delay:")) / 1000
        elif cut.startswith("outage:"):
            _, size, seconds = cut.split(":")
            cuts.append((parse_size(size), False, float(seconds)))
        else:
            cuts.append((parse_size(cut.removeprefix("stall:")), cut.startswith("stall:"), None))
    proxy = Proxy(target, cuts, delay)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        print(json.dumps({"forwarded": proxy.forwarded, "connections": proxy.connections, "cuts": proxy.made_cuts,
                          "stalls": proxy.made_stalls, "flowing": proxy.flowing, "outage_tries": proxy.outage_tries,
                          "outage_end": proxy.outage_end, "first_after_outage": proxy.first_after_outage,
                          "tenths": sorted(proxy.tenths.items())}),
              flush=True)
        if not line:
            break
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
