"""Runs a command with its standard error on a pseudo-terminal, as a user's terminal would be, and prints what the
command wrote there as JSON: {"output": TEXT, "status": N}.

Usage: pty-run.py COLUMNS[:RESIZED] COMMAND...
The terminal is COLUMNS wide; with RESIZED, it becomes RESIZED wide (SIGWINCH sent) once the command has drawn its
second frame (a second carriage return). Output processing is off, so the bytes are the command's own.
"""
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios


def set_columns(descriptor, columns):
    fcntl.ioctl(descriptor, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))


def main():
    columns, _, resized = sys.argv[1].partition(":")
    master, slave = pty.openpty()
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    set_columns(master, int(columns))
    process = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    output = b""
    resize_pending = bool(resized)
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                data = b""
            if not data:
                break
            output += data
            if resize_pending and output.count(b"\r") >= 2:
                set_columns(master, int(resized))
                process.send_signal(signal.SIGWINCH)
                resize_pending = False
        elif process.poll() is not None:
            break
    print(json.dumps({"output": output.decode("utf-8", "replace"), "status": process.wait()}))


if __name__ == "__main__":
    main()
