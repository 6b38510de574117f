# SPDX-License-Identifier: MIT
"""Starting slcache for the tests' Python harnesses.

spawn() starts slcache on loopback ports the kernel says are free and
returns once the server's own standard error says "slcache: listening on",
which slcache prints after every port it was given is bound.  A successful
connect() proves nothing: when another program took the port first, the
connect reaches that program while our slcache exits with "Address already
in use" (seen once in 27 runs of the builds' tests side by side).  A port
taken between the kernel's pick and the server's bind makes it exit, and
spawn() tries other ports.  memcached, which says nothing when it listens,
is known by its pid in the answer to "stats" (answers_as()).
"""

import os
import socket
import subprocess
import time

READY = b"slcache: listening on "


class SpawnError(Exception):
    pass


def free_ports(n):
    """n distinct ports free now on 127.0.0.1 (the kernel's pick)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def answers_as(port, pid):
    """True when the server on @port says its pid is @pid (STAT pid)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"stats\r\n")
            got = b""
            while not got.endswith(b"END\r\n"):
                part = s.recv(65536)
                if not part:
                    break
                got += part
    except OSError:
        return False
    return (b"\r\nSTAT pid %d\r\n" % pid) in b"\r\n" + got


def request(port, data, timeout):
    """Sends @data to the server on @port and returns every byte it answers
    until it closes the connection (an HTTP/1.0 exchange, say)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = bytearray()
        while True:
            part = s.recv(65536)
            if not part:
                return bytes(got)
            got += part


def _since(log, offset):
    """What the file behind @log holds past @offset."""
    fd = log.fileno()
    return os.pread(fd, max(os.fstat(fd).st_size - offset, 0), offset)


def spawn(cmd, log, nports=1, extra=None, ready=None, deadline_s=30.0, tries=20):
    """Starts cmd -l 127.0.0.1 -p PORT [extra(ports)...], its standard error
    appended to @log (a real file opened for writing: a TemporaryFile will
    do; None: /dev/null), stdout to /dev/null.  @nports free ports are
    picked; the first is the server's -p, and @extra(ports), if given,
    returns more arguments (say ["--metrics-port", str(ports[1])]).  Returns
    (proc, ports) once the server is ready: slcache said it listens, or
    @ready(proc, ports) is true (answers_as() for memcached).  Up to
    @deadline_s a try (a loaded machine starts an ASan build slowly).  A
    server that exits is tried again on other ports; raises SpawnError, with
    the end of the log, when one is not ready in time or @tries tries
    failed."""
    if log is None and ready is None:
        raise ValueError("spawn() needs a log to read, or a ready() check")
    status, said = None, ""
    for _ in range(tries):
        ports = free_ports(nports)
        args = list(cmd) + ["-l", "127.0.0.1", "-p", str(ports[0])]
        if extra:
            args += extra(ports)
        offset = 0
        if log is not None:
            log.flush()
            offset = os.fstat(log.fileno()).st_size
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                stderr=log if log is not None else subprocess.DEVNULL)
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if ready(proc, ports) if ready else READY in _since(log, offset):
                return proc, ports
            if proc.poll() is not None:
                break
            time.sleep(0.05)
        late = proc.poll() is None
        if late:
            proc.kill()
        status = proc.wait()
        said = "" if log is None else _since(log, offset)[-3000:].decode(errors="replace")
        if late:
            raise SpawnError("%s was not ready within %.0f s: %s" % (cmd[0], deadline_s, said))
        # It exited: a port was taken (or bad arguments, which every try
        # will meet; the error below shows the log).
    raise SpawnError("%s exited in each of %d tries (last status %s): %s"
                     % (cmd[0], tries, status, said))
