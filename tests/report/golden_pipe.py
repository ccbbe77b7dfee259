#!/usr/bin/env python3
"""golden_pipe.py SRC CLI ARGS...: runs `CLI ARGS...` in a fresh directory where each report of SRC that
ARGS name (NAME.mgr) is a FIFO, not a file, so that the command reads it as a pipe, once
(report.golden_pipe.*, run_golden.cmake); exits with the command's status.

Each FIFO has its writer before the command opens it (a FIFO with no writer reads as empty:
report::open_report), and the writer stays until the command has read everything it wrote (a FIFO's
data goes when its last descriptor closes), then closes it: the command reads the end of the file.
"""
import fcntl
import os
import subprocess
import sys
import tempfile
import termios
import threading
import time


def feed(fd, data, stop):
    """Writes `data` into the FIFO open on `fd`, waits until it was read, and closes it."""
    view = memoryview(data)
    while view and not stop.is_set():
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            time.sleep(0.001)
    while not stop.is_set():
        pending = bytearray(4)
        fcntl.ioctl(fd, termios.FIONREAD, pending)
        if int.from_bytes(pending, sys.byteorder) == 0:
            break
        time.sleep(0.001)
    os.close(fd)


def main():
    src, cli, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory(prefix="memguard-golden-pipe.") as d:
        stop = threading.Event()
        feeders = []
        for a in args:
            path = os.path.join(d, a)
            if a.endswith(".mgr") and "/" not in a and os.path.isfile(os.path.join(src, a)) and not os.path.exists(path):
                os.mkfifo(path)
                fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)  # a FIFO open for writing, with no reader yet
                with open(os.path.join(src, a), "rb") as f:
                    data = f.read()
                t = threading.Thread(target=feed, args=(fd, data, stop), daemon=True)
                t.start()
                feeders.append(t)
        rc = subprocess.run([cli] + args, cwd=d).returncode
        stop.set()
        for t in feeders:
            t.join()
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
