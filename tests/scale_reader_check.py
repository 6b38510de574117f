#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The counting rules of bench_scale's store reader (benchmarks/scale_store.py)
over hand-made key sets: the decentralized layout (lib/lease/store_etcd.c)
and the coordinated one (lib/lease/coord.h: what the store counts), so that
the reader is right before the coordinated store exists."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from scale_store import count_budget, maxmin, who, within  # noqa: E402

LIM = {"max": "1000", "soft": "0", "min": "100"}


def grant(held, floor, session, term="7"):
    return {"held": str(held), "floor": str(floor), "term": term, "session": str(session)}


def rep(held, session, usage=0, demand=0):
    return {"held": str(held), "usage": str(usage), "demand": str(demand), "session": str(session)}


class Decentralized(unittest.TestCase):
    def test_records_count_held_and_floor_once_expired(self):
        b = count_budget({"": LIM, "version": None,
                          "rec/p0:1:a:1": {"held": "400", "floor": "50", "usage": "1",
                                           "demand": "1", "exp": "0"},
                          "floor/p0:1:a:1": {"floor": "50"},
                          "floor/p1:2:b:1": {"floor": "60"}})
        self.assertEqual(b.mode, "decentralized")
        self.assertEqual(b.counts, {"p0:1:a:1": 400, "p1:2:b:1": 60})
        self.assertEqual(b.counted, 460)
        self.assertEqual(b.shares, {"p0": 400, "p1": 60})
        self.assertFalse(b.over)

    def test_over_only_past_max(self):
        at = {"": LIM, "rec/p0:1:a:1": {"held": "1000"}}
        self.assertFalse(count_budget(at).over)
        at["floor/p1:1:a:2"] = {"floor": "1"}
        self.assertTrue(count_budget(at).over)

    def test_no_limits_never_over(self):
        b = count_budget({"rec/p0:1:a:1": {"held": "5000"}})
        self.assertIsNone(b.max)
        self.assertFalse(b.over)


class Coordinated(unittest.TestCase):
    def test_same_session_counts_the_larger_of_grant_and_report(self):
        kvs = {"": LIM, "member/p0:1:a": {}, "grant/p0:1:a": grant(300, 50, 11),
               "rep/p0:1:a": rep(200, 11),
               "member/p1:1:b": {}, "grant/p1:1:b": grant(100, 50, 12),
               "rep/p1:1:b": rep(250, 12)}  # a shrink not yet acknowledged
        b = count_budget(kvs)
        self.assertEqual(b.mode, "coordinated")
        self.assertEqual(b.counts, {"p0:1:a": 300, "p1:1:b": 250})
        self.assertEqual(b.counted, 550)
        self.assertEqual(b.shares, {"p0": 300, "p1": 100})

    def test_new_session_counts_floor_or_report(self):
        kvs = {"": LIM, "member/p0:1:a": {}, "grant/p0:1:a": grant(700, 80, 11),
               "rep/p0:1:a": rep(30, 99),
               "member/p1:1:b": {}, "grant/p1:1:b": grant(700, 20, 12),
               "rep/p1:1:b": rep(30, 98)}
        b = count_budget(kvs)
        self.assertEqual(b.counts, {"p0:1:a": 80, "p1:1:b": 30})
        # A grant of another session is not applied: no share yet.
        self.assertEqual(b.shares, {"p0": 0, "p1": 0})

    def test_expired_report_counts_the_floor(self):
        b = count_budget({"": LIM, "member/p0:1:a": {}, "grant/p0:1:a": grant(900, 70, 11)})
        self.assertEqual(b.counted, 70)
        self.assertEqual(b.shares, {"p0": 0})

    def test_member_without_grant(self):
        b = count_budget({"": LIM, "member/p0:1:a": {}, "rep/p0:1:a": rep(40, 5),
                          "member/p1:1:b": {}})
        self.assertEqual(b.counts, {"p0:1:a": 40, "p1:1:b": 0})

    def test_grants_and_reports_of_non_members_are_strays(self):
        b = count_budget({"": LIM, "member/p0:1:a": {}, "grant/p0:1:a": grant(10, 0, 1),
                          "rep/p0:1:a": rep(10, 1), "rep/p9:1:z": rep(500, 3),
                          "grant/p8:1:y": grant(500, 0, 4)})
        self.assertEqual(b.counted, 10)
        self.assertEqual(b.strays, 2)

    def test_mixed_fleet_counts_records_too(self):
        b = count_budget({"": LIM, "member/p0:1:a": {}, "grant/p0:1:a": grant(600, 0, 1),
                          "rep/p0:1:a": rep(600, 1), "rec/p1:2:b:1": {"held": "401"}})
        self.assertEqual(b.mode, "mixed")
        self.assertEqual(b.counted, 1001)
        self.assertTrue(b.over)

    def test_version_bounds_the_counted_sum(self):
        kvs = {"": LIM, "version": {"counted": "300"}, "member/p0:1:a": {},
               "grant/p0:1:a": grant(300, 0, 1), "rep/p0:1:a": rep(100, 1)}
        b = count_budget(kvs)
        self.assertEqual(b.version_counted, 300)
        self.assertFalse(b.version_low)
        kvs["rep/p0:1:a"] = rep(301, 1)
        self.assertTrue(count_budget(kvs).version_low)
        # The decentralized version holds no bound.
        self.assertFalse(count_budget({"": LIM, "version": None,
                                       "rec/p0:1:a:1": {"held": "9"}}).version_low)

    def test_session_compared_as_written(self):
        # Integers and decimal strings of the same session are the same.
        kvs = {"": {"max": 1000}, "member/p0:1:a": {},
               "grant/p0:1:a": {"held": 300, "floor": 0, "session": "694d7"},
               "rep/p0:1:a": {"held": 100, "session": "694d7"}}
        self.assertEqual(count_budget(kvs).counted, 300)


class Targets(unittest.TestCase):
    def test_maxmin(self):
        t = maxmin(1000, {"p0": 1500, "p1": 100, "p2": 1500, "p3": 100})
        self.assertEqual(t, {"p0": 400, "p1": 100, "p2": 400, "p3": 100})
        self.assertEqual(maxmin(1000, {"p0": 100, "p1": 100}), {"p0": 500, "p1": 500})

    def test_within(self):
        t = {"p0": 100, "p1": 300}
        self.assertTrue(within({"p0": 109, "p1": 271}, t))
        self.assertFalse(within({"p0": 111, "p1": 300}, t))
        self.assertFalse(within({"p0": 100}, t))

    def test_who(self):
        self.assertEqual(who("p12:345:abc:7"), "p12")
        self.assertEqual(who("p3"), "p3")


if __name__ == "__main__":
    unittest.main()
