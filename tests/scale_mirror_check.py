#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_scale's mirror of the store (benchmarks/scale_store.py's Mirror)
against a real 1-member etcd on loopback (tests/etcd_cluster.py; 77,
skipped, without etcd): it starts from what the store has, follows puts and
deletes, keeps budgets apart whose names share a prefix (b1, b10), and after
a break whose next revision was compacted reads everything again."""
import base64
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))
from scale_store import Gateway, Mirror, count_budget  # noqa: E402

SKIP = 77
LIM = {"max": "1000", "min": "100", "soft": "0"}
CLUSTER = None


def b64(s):
    return base64.b64encode(s.encode()).decode()


def wait(cond, what, timeout=30.0):
    t0 = time.monotonic()
    while not cond():
        if time.monotonic() - t0 > timeout:
            raise AssertionError("no %s in %.0f s" % (what, timeout))
        time.sleep(0.05)


class MirrorCheck(unittest.TestCase):
    def setUp(self):
        self.gw = Gateway(CLUSTER.endpoints().split(","))
        self.prefix = "mirror-%s" % self.id().rsplit(".", 1)[1]

    def put(self, key, doc):
        self.gw.post("/v3/kv/put", {"key": b64("%s/budgets/%s" % (self.prefix, key)),
                                    "value": b64(json.dumps(doc))})

    def delete(self, key):
        self.gw.post("/v3/kv/deleterange",
                     {"key": b64("%s/budgets/%s" % (self.prefix, key))})

    def test_follows_the_store(self):
        self.put("b1", LIM)
        self.put("b10", {"max": "5", "min": "0", "soft": "0"})
        m = Mirror(self.gw, self.prefix)
        try:
            wait(lambda: not m.down, "watch")
            self.assertEqual(m.budget_kvs("b1"), {"": LIM})
            self.put("b1/member/p0:1", {"floor": "10"})
            self.put("b1/rep/p0:1", {"held": "300", "session": "7"})
            self.put("b1/grant/p0:1", {"held": "400", "floor": "10", "session": "7"})
            self.put("b10/rep/p1:1", {"held": "1", "session": "8"})
            # Events come in revision order: b10's report, put last,
            # says the others are in too.
            wait(lambda: "rep/p1:1" in m.budget_kvs("b10"), "the last put")
            b = count_budget(m.budget_kvs("b1"))
            self.assertEqual((b.counted, b.shares, b.max), (400, {"p0": 400}, 1000))
            self.assertEqual(set(m.budget_kvs("b10")), {"", "rep/p1:1"})
            # The report's session ran out: the grant's floor counts.
            self.delete("b1/rep/p0:1")
            wait(lambda: "rep/p0:1" not in m.budget_kvs("b1"), "delete")
            self.assertEqual(count_budget(m.budget_kvs("b1")).counted, 10)
        finally:
            m.close()

    def test_reads_again_after_a_compaction(self):
        self.put("b1", LIM)
        m = Mirror(self.gw, self.prefix)
        try:
            wait(lambda: not m.down, "watch")
            self.put("b1/rep/p0:1", {"held": "500", "session": "7"})
            wait(lambda: "rep/p0:1" in m.budget_kvs("b1"), "report")
            at = m.rev
            self.gw.post("/v3/kv/compaction", {"revision": str(at)})
            # As if the mirror had fallen behind before the compaction:
            # its next watch starts at a compacted revision.
            with m.lock:
                m.rev = 1
            m.conn.sock.shutdown(2)
            self.put("b1/rep/p0:1", {"held": "700", "session": "7"})
            wait(lambda: not m.down and m.rev > at, "watch again")
            self.assertGreaterEqual(m.restarts, 2)
            self.assertEqual(m.budget_kvs("b1")["rep/p0:1"]["held"], "700")
        finally:
            m.close()


def main():
    global CLUSTER
    from etcd_cluster import EtcdCluster, etcd_binaries
    if not etcd_binaries():
        print("SKIP: etcd is not installed (apt-get install etcd-server etcd-client)")
        return SKIP
    with EtcdCluster(1) as cl:
        CLUSTER = cl
        prog = unittest.main(exit=False, argv=sys.argv[:1])
        return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
