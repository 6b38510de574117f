# SPDX-License-Identifier: MIT
"""What an etcd:// lease store counts for a budget, read from outside
(bench_scale.sh's reader; the rules are tested by tests/scale_reader_check.py).

count_budget(kvs) takes one budget's keys, relative to PREFIX/budgets/NAME
("" for the limits, "version", "rec/ID", "member/NODE", ...), each with its
value parsed from JSON, and returns what the store counts for it in both
protocols at once (a mixed fleet is counted as the coordinator would):

  decentralized (plain etcd://, lib/lease/store_etcd.c):
    rec/ID present: its held; absent (its etcd lease ran out): floor/ID's floor.
    The participant's share is the same figure.
  coordinated (etcd://...?coordinated, lib/lease/coord.h, "What the store
  counts"), for each member/NODE with grant g (absent: held = floor = 0) and
  report r (rep/NODE, absent once its session expired):
    r present, r.session == g.session:        max(g.held, r.held)
    r present, g absent or another session:   max(g.floor, r.held)
    r absent:                                 g.floor
    The member's share is g.held when its report is on the grant's session
    (rule 2: a node applies only a grant of its own session), else 0.
  rep/ or grant/ keys of a node that is no member are not counted (the
  design counts members) but reported as "strays".  The version's
  {"counted":S} is an upper bound of that sum: version_low says it is not.

Values are u64 as decimal strings (ints are taken too).  A participant's
fleet number is its id's first ':'-separated field ("pI", bench_scale_node's
node name).
"""
import base64
import http.client
import json
import socket
import threading
import time
import urllib.request


def u64(doc, field, default=0):
    v = doc.get(field, default) if isinstance(doc, dict) else default
    return int(v)


def who(ident):
    return ident.split(":", 1)[0]


class Budget:
    def __init__(self):
        self.max = None
        self.counted = 0
        self.shares = {}   # participant (who) -> share, summed over its ids
        self.counts = {}   # id -> what the store counts for it
        self.strays = 0
        self.mode = None   # "decentralized", "coordinated", "mixed" or None
        self.version_counted = None  # coordinated: the version's bound

    @property
    def over(self):
        return self.max is not None and self.counted > self.max

    @property
    def version_low(self):
        return self.version_counted is not None and self.counted > self.version_counted

    def add(self, ident, share, counted):
        self.counts[ident] = counted
        self.counted += counted
        self.shares[who(ident)] = self.shares.get(who(ident), 0) + share


def _split(kvs):
    kinds = {}
    for key, doc in kvs.items():
        kind, _, ident = key.partition("/")
        if ident:
            kinds.setdefault(kind, {})[ident] = doc
    return kinds


def count_budget(kvs):
    b = Budget()
    limits = kvs.get("")
    if isinstance(limits, dict) and "max" in limits:
        b.max = u64(limits, "max")
    version = kvs.get("version")
    if isinstance(version, dict) and "counted" in version:
        b.version_counted = u64(version, "counted")
    k = _split(kvs)
    recs, floors = k.get("rec", {}), k.get("floor", {})
    members, reps, grants = k.get("member", {}), k.get("rep", {}), k.get("grant", {})
    for ident in sorted(set(recs) | set(floors)):
        if ident in recs:
            held = u64(recs[ident], "held")
        else:
            held = u64(floors[ident], "floor")
        b.add(ident, held, held)
    for node in sorted(members):
        g, r = grants.get(node), reps.get(node)
        g_held, g_floor = (u64(g, "held"), u64(g, "floor")) if g else (0, 0)
        same = r is not None and g is not None and str(r.get("session")) == str(g.get("session"))
        if r is None:
            counted = g_floor
        elif same:
            counted = max(g_held, u64(r, "held"))
        else:
            counted = max(g_floor, u64(r, "held"))
        b.add(node, g_held if same else 0, counted)
    b.strays = len((set(reps) | set(grants)) - set(members))
    dec, coord = bool(recs or floors), bool(members or reps or grants)
    b.mode = "mixed" if dec and coord else "decentralized" if dec else \
        "coordinated" if coord else None
    return b


def maxmin(budget, demands):
    """Max-min fair shares of @budget for @demands ({who: demand}), as
    lib/lease/alloc.c gives them: every one gets its demand if it fits, the
    rest is shared equally by those who want more, and room nobody asks for
    is spread over everyone as headroom."""
    out, left, want = {}, budget, dict(demands)
    while want:
        each = left / len(want)
        small = {w: d for w, d in want.items() if d <= each}
        if not small:
            for w in want:
                out[w] = each
            return out
        for w, d in small.items():
            out[w] = d
            left -= d
            del want[w]
    for w in out:
        out[w] += left / len(out)
    return out


def within(shares, targets, tolerance=0.10):
    """Every participant of @targets holds a share within @tolerance of its
    target (a missing one is not)."""
    return all(w in shares and abs(shares[w] - t) <= tolerance * t for w, t in targets.items())


# ---- reading the store through etcd's JSON gateway ------------------------

def _b64(s):
    return base64.b64encode(s.encode()).decode()


class Gateway:
    """etcd's v3 JSON gateway on @endpoints ("host:port", ...), one after
    another; counts the requests it sends (self.requests), so that they can
    be taken out of etcd's own request counters."""

    def __init__(self, endpoints, timeout=10.0):
        self.endpoints = list(endpoints)
        self.timeout = timeout
        self.next = 0
        self.requests = 0

    def post(self, path, body):
        last = None
        for _ in range(len(self.endpoints)):
            ep = self.endpoints[self.next % len(self.endpoints)]
            self.next += 1
            req = urllib.request.Request("http://%s%s" % (ep, path), json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            self.requests += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as f:
                    return json.loads(f.read())
            except OSError as e:
                last = e
        raise last

    def followers(self):
        """The endpoints of the members that are not the leader (all of
        them when that cannot be told), from /v3/maintenance/status."""
        leader, members = None, []
        for ep in self.endpoints:
            req = urllib.request.Request("http://%s/v3/maintenance/status" % ep, b"{}",
                                         {"Content-Type": "application/json"})
            self.requests += 1
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as f:
                    st = json.loads(f.read())
                members.append((ep, st.get("header", {}).get("member_id")))
                leader = st.get("leader", leader)
            except (OSError, ValueError):
                pass
        out = [ep for ep, mid in members if leader is not None and mid != leader]
        return out or list(self.endpoints)

    def delete_prefix(self, prefix):
        p = prefix.rstrip("/") + "/"
        end = p[:-1] + "0"
        return self.post("/v3/kv/deleterange", {"key": _b64(p), "range_end": _b64(end)})

    def messages_received(self):
        """grpc_server_msg_received_total summed over the members' /metrics:
        every unary request and every message on a stream (the gateway's
        requests included: it calls etcd's gRPC server)."""
        return self.metric("grpc_server_msg_received_total")

    def metric(self, name):
        """The counter @name summed over its labels and the members."""
        total = 0.0
        for ep in self.endpoints:
            for attempt in range(3):
                try:
                    with urllib.request.urlopen("http://%s/metrics" % ep,
                                                timeout=self.timeout) as f:
                        text = f.read().decode()
                    break
                except OSError:
                    # A busy member may refuse for a moment; a dead one
                    # fails the measurement.
                    if attempt == 2:
                        raise
                    time.sleep(0.5)
            for line in text.splitlines():
                if line.startswith(name + "{"):
                    total += float(line.rsplit(" ", 1)[1])
        return total


class Mirror:
    """PREFIX/budgets/ as etcd has it, kept by one watch: a range read of
    the prefix, then a watch from the revision after it, on a member that
    is not the leader.  The events of one watch answer (whole revisions)
    are applied together, so budget_kvs() gives one budget as it was at one
    revision, as a range read would, but etcd sends each change once
    instead of a thousand members' keys every 100 ms (at 1,000 x 100 the
    reads of two budgets every 100 ms were 60,000 keys a second of JSON on
    the two cores etcd shares with the fleet).  Its requests are counted
    in self.requests (the harness's own, as gw.requests are)."""

    def __init__(self, gw, prefix):
        # A gateway of its own: its thread does not touch the caller's.
        self.gw, self.base = Gateway(gw.endpoints, gw.timeout), prefix + "/budgets/"
        self.range = {"key": _b64(self.base), "range_end": _b64(self.base[:-1] + "0")}
        self.lock = threading.Lock()
        self.kvs = {}       # budget name -> {key under it: raw value}
        self.rev = 0        # every event up to this revision is applied
        self.events = 0
        self.creates = 0    # the watches' create requests
        self.restarts = 0
        self.down = True    # no watch running: reads count as errors
        self.stopping = False
        self.conn = None
        self.compacted = False
        self._reload()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _reload(self):
        """The whole prefix again, at one revision (at the start, and when
        the revisions after ours were compacted)."""
        resp = self.gw.post("/v3/kv/range", dict(self.range, serializable=True))
        with self.lock:
            kvs, self.kvs = self.kvs, {}
            try:
                for kv in resp.get("kvs", []):
                    self._put(base64.b64decode(kv["key"]).decode(),
                              base64.b64decode(kv.get("value", "")))
            except (KeyError, ValueError):
                self.kvs = kvs
                raise
            self.rev = int(resp.get("header", {}).get("revision", 0))
            self.compacted = False

    def _put(self, key, raw):
        if not key.startswith(self.base):
            return
        name, _, sub = key[len(self.base):].partition("/")
        if raw is None:
            self.kvs.get(name, {}).pop(sub, None)
        else:
            self.kvs.setdefault(name, {})[sub] = raw

    def _run(self):
        while not self.stopping:
            try:
                if self.compacted:
                    self._reload()
                self._watch()
            except (OSError, ValueError, KeyError, http.client.HTTPException):
                pass
            if self.conn is not None:
                self.conn.close()
            self.down = True
            if not self.stopping:
                self.restarts += 1
                time.sleep(0.5)

    def _watch(self):
        readers = self.gw.followers()
        ep = readers[self.restarts % len(readers)]
        host, port = ep.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port))
        body = {"create_request": dict(self.range, start_revision=self.rev + 1)}
        self.creates += 1
        self.conn.request("POST", "/v3/watch", json.dumps(body),
                          {"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        if resp.status != 200:
            raise OSError("watch: HTTP %d" % resp.status)
        for line in resp:
            if self.stopping:
                return
            res = json.loads(line).get("result", {})
            if res.get("canceled"):
                # The revisions after ours were compacted: read it all
                # again (self.down until the new watch is created).
                self.compacted = int(res.get("compact_revision", 0) or 0) > 0
                raise OSError("watch canceled (compacted at %s)" % res.get("compact_revision"))
            if res.get("created"):
                self.down = False
            evs = res.get("events", [])
            if not evs:
                continue
            # Decoded first, applied together: an answer that does not
            # decode changes nothing, and is had again from self.rev + 1.
            batch, rev = [], self.rev
            for ev in evs:
                kv = ev["kv"]
                raw = None if ev.get("type") == "DELETE" else \
                    base64.b64decode(kv.get("value", ""))
                batch.append((base64.b64decode(kv["key"]).decode(), raw))
                rev = max(rev, int(kv.get("mod_revision", 0)))
            with self.lock:
                for key, raw in batch:
                    self._put(key, raw)
                self.rev = rev
                self.events += len(evs)

    @property
    def requests(self):
        """The requests it made: reads, status calls, watch creates."""
        return self.gw.requests + self.creates

    def budget_kvs(self, name):
        """One budget's keys as count_budget() takes them, at one revision;
        OSError while the watch is down."""
        if self.down:
            raise OSError("the watch is down")
        with self.lock:
            raw = dict(self.kvs.get(name, {}))
        kvs = {}
        for sub, v in raw.items():
            try:
                kvs[sub] = json.loads(v.decode() or "null")
            except ValueError:
                kvs[sub] = None
        return kvs

    def close(self):
        self.stopping = True
        try:
            if self.conn is not None and self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
