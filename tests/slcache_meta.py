#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Meta commands answered as memcached 1.6.18 answers them, byte for byte.

    slcache_meta.py SLCACHE [CORPUS]

Plays tests/slcache_meta_corpus.txt (tests/slcache_meta_gen.py writes it:
random and crafted mg, ms, md, ma, mn and me lines, hostile ones among
them) against slcache and against Debian's memcached 1.6.18, each started
here (-m 64 -t 2, memcached with -U 0 -o no_lru_segmented), each exchange on a fresh
connection followed by "mn", and requires the same answers.  Exits 77
(skipped) when memcached 1.6.18 is not installed (as root on Debian it is
installed first, as tests/slcache_capable.sh installs its tool).

Normalised before comparing, because the two servers cannot agree on them:
- clocks: the t return flag (seconds left) and me's exp=, where both are
  numbers of the same sign within 2 of each other, compare equal (the
  servers' seconds tick at different instants).  A t that memcached shows
  as a huge unsigned number and slcache as a negative one still differs.
- the time since the last access (l, me's la=): memcached moves an item's
  time only when its segmented LRU bumps it (on the second fetch, then as
  its LRU maintainer thread moves it), machinery slcache does not have;
  its number is masked, the flag's place in the answer still compared.
- memcached's own race is kept out: an incr whose number does not grow
  is done in place (the item stays fetched, stale, ...) only when nothing
  else holds the item, else a new item replaces it; its segmented LRU's
  asynchronous bump of a second read holds the item until its maintainer
  thread gets to it, and its LRU crawler holds each item it looks at.
  memcached runs with -o no_lru_maintainer,no_lru_crawler, which bumps
  in place (the flags, the fetched bit and every answer here are the
  same; only the last access time differs, masked above).
- nothing else: cas values, item sizes and every error text are compared
  as they are.
"""

import os
import re
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slcache_spawn import SpawnError, answers_as, spawn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
QUIET_S = 3.0  # silence that ends an exchange the corpus never expects
CLOCK = re.compile(rb"(?<= )(t|exp=)(-?[0-9]+)(?=[ \r])")
LAST = re.compile(rb"(?<= )(l|la=)[0-9]+(?=[ \r])")


def unescape(line):
    out = bytearray()
    i = 0
    while i < len(line):
        ch = line[i]
        if ch != "\\":
            out.append(ord(ch))
            i += 1
            continue
        nxt = line[i + 1]
        if nxt == "x":
            out.append(int(line[i + 2:i + 4], 16))
            i += 4
            continue
        out.append({"r": 13, "n": 10, "\\": 92}[nxt])
        i += 2
    return bytes(out)


def exchange(port, data):
    """The answer to @data then "mn", up to the last MN, a close, or QUIET_S
    of silence."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    out = b""
    try:
        s.sendall(data + b"mn\r\n")
        s.settimeout(QUIET_S)
        want = data.count(b"mn") + 1
        while not (out.endswith(b"MN\r\n") and out.count(b"MN\r\n") >= want):
            chunk = s.recv(1 << 16)
            if not chunk:
                return out + b"<closed>"
            out += chunk
        return out
    except socket.timeout:
        return out + b"<silence>"
    except OSError:
        return out + b"<reset>"
    finally:
        s.close()


def same(mc, sl):
    """Equal once the clock fields are allowed 2 seconds (same sign) and
    the last-access ones masked."""
    a, b = (CLOCK.split(LAST.sub(rb"\1<s>", x)) for x in (mc, sl))
    if len(a) != len(b):
        return False
    for i in range(0, len(a), 3):
        if a[i] != b[i]:
            return False
        if i + 2 < len(a):
            x, y = int(a[i + 2]), int(b[i + 2])
            if a[i + 1] != b[i + 1] or (x < 0) != (y < 0) or abs(x - y) > 2:
                return False
    return True


def memcached_path():
    path = shutil.which("memcached")
    if not path and os.getuid() == 0 and shutil.which("apt-get"):
        subprocess.call(["apt-get", "install", "-y", "--no-install-recommends", "memcached"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = shutil.which("memcached")
    if not path:
        return None
    ver = subprocess.run([path, "-V"], capture_output=True, text=True).stdout.split()
    return path if ver[1:2] == ["1.6.18"] else None


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: slcache_meta.py SLCACHE [CORPUS]")
    corpus = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HERE, "slcache_meta_corpus.txt")
    mc_bin = memcached_path()
    if not mc_bin:
        print("SKIP: memcached 1.6.18 is not installed (apt-get install memcached)")
        return 77
    with open(corpus, encoding="latin-1") as f:
        reqs = [unescape(ln.rstrip("\n")) for ln in f if ln.strip() and not ln.startswith("#")]
    user = ["-u", "root"] if os.getuid() == 0 else []
    procs = []
    try:
        mc, mports = spawn([mc_bin, "-U", "0", "-m", "64", "-t", "2", "-o", "no_lru_maintainer,no_lru_crawler"] + user, None,
                           ready=lambda p, ports: answers_as(ports[0], p.pid))
        procs.append(mc)
        with open(os.devnull, "w") as null:
            sl, sports = spawn([sys.argv[1], "-m", "64", "-t", "2", "--stall-timeout", "0"], None,
                               ready=lambda p, ports: answers_as(ports[0], p.pid))
        procs.append(sl)
        differ = 0
        for n, req in enumerate(reqs, 1):
            got_mc, got_sl = exchange(mports[0], req), exchange(sports[0], req)
            if same(got_mc, got_sl):
                continue
            differ += 1
            if differ <= int(os.environ.get("SL_META_SHOW", "40")):
                print("exchange %d: %r" % (n, req[:300]))
                print("  memcached: %r" % got_mc[:400])
                print("  slcache:   %r" % got_sl[:400])
        # A clean exit too (under ASan: no report, no leak).
        sl.terminate()
        if sl.wait(timeout=60) != 0:
            print("FAIL: slcache exited with status %s" % sl.returncode)
            return 1
    except SpawnError as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if differ:
        print("FAIL: %d of %d exchanges answered differently from memcached 1.6.18"
              % (differ, len(reqs)))
        return 1
    print("PASS: %d meta exchanges answered as memcached 1.6.18 does" % len(reqs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
