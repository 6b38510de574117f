#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""slcache_metrics.py SLCACHE - slcache --metrics-port serves the OpenMetrics
dump of its whole tree over HTTP, as a Prometheus scrape expects:

- GET /metrics answers 200 with Content-Type
  application/openmetrics-text; version=1.0.0; charset=utf-8, a body of
  Content-Length bytes that python3-prometheus-client's strict OpenMetrics
  parser accepts, with every softlimit family of openmetrics_check.py, and
  a group label per tenant whose usage shows the items stored through the
  memcached port;
- other paths get 404, other methods 405, what is not HTTP/1.x 400, and
  every answer ends with the server closing the connection;
- the cache port keeps serving, and SIGTERM stops the server with status 0.

Exits 77 (ctest's skip) when the parser is not installed.
"""
import atexit
import os
import signal
import socket
import subprocess
import sys
import tempfile

from slcache_spawn import SpawnError, request, spawn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    from openmetrics_check import FAMILIES
except ImportError:
    print("slcache_metrics: python3-prometheus-client is not installed: skipped")
    sys.exit(77)

CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
LOG = tempfile.TemporaryFile()  # the server's standard error


def fail(msg, proc=None):
    print("slcache_metrics: FAIL: " + msg)
    if proc is not None:
        proc.kill()
        proc.wait()
        LOG.seek(0)
        err = LOG.read().decode(errors="replace")
        print("--- slcache stderr:\n" + err[-3000:])
    sys.exit(1)


def start(binary):
    try:
        proc, ports = spawn([binary, "-m", "16"], LOG, nports=2,
                            extra=lambda ports: ["--metrics-port", str(ports[1])])
    except SpawnError as e:
        fail("could not start slcache: %s" % e)
    return proc, ports[0], ports[1]


def http(mport, raw):
    """Sends the raw request; returns (status line, headers, body) once the
    server closes the connection."""
    data = request(mport, raw, 30)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0], headers, body


def memcached(port, payload, expect_lines):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(payload)
    data = b""
    while data.count(b"\r\n") < expect_lines:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    return data


def main():
    if len(sys.argv) != 2:
        fail("usage: slcache_metrics.py SLCACHE")
    proc, port, mport = start(sys.argv[1])
    # Whatever ends this script, the server goes too: it holds ctest's
    # output pipe, and a test stopped by an exception would otherwise wait
    # for ctest's timeout.
    atexit.register(lambda: proc.poll() is None and proc.kill())

    value = b"x" * 50000
    payload = b""
    for tenant in ("alpha", "beta"):
        for i in range(20):
            payload += b"set %s:k%d 0 0 %d\r\n%s\r\n" % (tenant.encode(), i, len(value), value)
    payload += b"set plain 0 0 5\r\nhello\r\n"
    got = memcached(port, payload, 41)
    if got != b"STORED\r\n" * 41:
        fail("the sets were answered %r" % got[:200], proc)

    status, headers, body = http(mport, b"GET /metrics HTTP/1.0\r\nAccept: "
                                 b"application/openmetrics-text\r\n\r\n")
    if status != "HTTP/1.0 200 OK":
        fail("GET /metrics: %r" % status, proc)
    if headers.get("content-type") != CONTENT_TYPE:
        fail("Content-Type %r" % headers.get("content-type"), proc)
    if int(headers.get("content-length", "-1")) != len(body):
        fail("Content-Length %s, body %d bytes" % (headers.get("content-length"), len(body)), proc)
    text = body.decode("utf-8")
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except ValueError as e:
        fail("the OpenMetrics parser rejects the scrape: %s" % e, proc)
    missing = set(FAMILIES) - set(families)
    if missing:
        fail("families missing from the scrape: %s" % sorted(missing), proc)
    usage = {s.labels["group"]: s.value for s in families["softlimit_usage_bytes"].samples}
    for group in ("/", "/alpha", "/beta", "/default"):
        if group not in usage:
            fail("no group %r in the scrape (groups: %s)" % (group, sorted(usage)), proc)
    for group in ("/alpha", "/beta"):
        if usage[group] < 20 * len(value):
            fail("%s uses %d bytes after 20 values of %d" % (group, usage[group], len(value)), proc)
    if usage["/"] < usage["/alpha"] + usage["/beta"]:
        fail("the root's usage %d is below its tenants'" % usage["/"], proc)
    # A Prometheus scrape as sent (HTTP/1.1, a query string) is served too.
    status, headers, _ = http(mport, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    if status != "HTTP/1.0 200 OK" or headers.get("content-type") != CONTENT_TYPE:
        fail("GET /metrics?x=1 HTTP/1.1: %r" % status, proc)

    bad = [
        (b"GET / HTTP/1.0\r\n\r\n", "404"),
        (b"GET /metricsx HTTP/1.0\r\n\r\n", "404"),
        (b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n", "405"),
        (b"get /metrics HTTP/1.0\r\n\r\n", "405"),
        (b"GET /metrics\r\n\r\n", "400"),
        (b"GET /metrics HTTP/2.0\r\n\r\n", "400"),
        (b"GET  /metrics HTTP/1.0\r\n\r\n", "400"),
        (b"stats\r\n\r\n", "400"),
        (b"GET /metrics HTTP/1.0\r\n" + b"X: " + b"y" * 5000 + b"\r\n\r\n", "400"),
    ]
    for req, code in bad:
        status, _, _ = http(mport, req)
        if status.split(" ")[1:2] != [code]:
            fail("%r: expected %s, got %r" % (req[:40], code, status), proc)
    # A client that connects and says nothing is dropped, and does not
    # keep the next scrape from being served.
    idle = socket.create_connection(("127.0.0.1", mport), timeout=30)
    status, _, _ = http(mport, b"GET /metrics HTTP/1.0\r\n\r\n")
    idle.close()
    if status != "HTTP/1.0 200 OK":
        fail("a scrape behind an idle client: %r" % status, proc)

    got = memcached(port, b"get alpha:k0\r\n", 3)
    if not got.startswith(b"VALUE alpha:k0 0 50000\r\n"):
        fail("the cache port after the scrapes: %r" % got[:80], proc)
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        fail("slcache did not stop within 60 s of SIGTERM", proc)
    if rc != 0:
        fail("slcache exited with status %d after SIGTERM" % rc, proc)
    print("slcache_metrics: %d families, %d groups served; %d bad requests refused"
          % (len(families), len(usage), len(bad)))


if __name__ == "__main__":
    main()
