"""Runs a command with its standard error on a pseudo-terminal, as a user's terminal would be, and prints what the
command wrote there as JSON: {"output": TEXT, "status": N}.

Usage: pty-run.py [--stdout-too] COLUMNS[:RESIZED] COMMAND...
With --stdout-too the command's standard output is the same terminal, as a user's is. The terminal is COLUMNS wide; with RESIZED, it becomes RESIZED wide (SIGWINCH sent) once the command has drawn its
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
    arguments = sys.argv[1:]
    stdout_too = arguments[0] == "--stdout-too"
    if stdout_too:
        arguments = arguments[1:]
    columns, _, resized = arguments[0].partition(":")
    master, slave = pty.openpty()
    attributes = termios.tcgetattr(slave)
    attributes[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    set_columns(master, int(columns))
    process = subprocess.Popen(arguments[1:], stdin=subprocess.DEVNULL,
                               stdout=slave if stdout_too else subprocess.DEVNULL, stderr=slave)
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
