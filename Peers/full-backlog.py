"""A listener on 127.0.0.1 that never accepts, its backlog already full: a client's connect waits for an answer
to its SYN that never comes, as with a server that is down behind a firewall. For --connect-timeout tests.

Prints its port on the first line; exits when stdin closes.
"""
import socket
import sys

listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(0)
port = listener.getsockname()[1]
# Linux queues backlog + 1 connections; fill the queue so that later SYNs are dropped.
fillers = []
for _ in range(4):
    filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    filler.setblocking(False)
    try:
        filler.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    fillers.append(filler)
print(port, flush=True)
sys.stdin.read()
