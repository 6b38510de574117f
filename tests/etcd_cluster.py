#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A real etcd cluster on loopback, for the etcd:// store's tests.

As a module: EtcdCluster(n) starts n members (etcd --name eI, each its own
data directory and free client and peer ports, --initial-cluster-state new),
waits for `etcdctl endpoint health`, and can kill, stop, restart and wipe
members.  It stops every process it started, by pid (SIGTERM, then SIGKILL
after a deadline: a member whose peers are gone can take many seconds to
hand over leadership), and removes its directory: on close(), at exit, and
on SIGTERM/SIGINT.

As a command: etcd_cluster.py [--members N] [--etcd-arg ARG]... -- COMMAND...
(each ARG passed on to every member) runs COMMAND
with SL_ETCD_ENDPOINTS=host:port,... and SL_ETCD_URL=etcd://.../PREFIX in
its environment, and SL_ETCD_PIDS=pid,... (the members' pids, in the order
of the endpoints, for a test that kills one: the pids stay ours until this
script reaps them, after COMMAND), and returns its status; 77 (skipped)
when etcd is not installed.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from slcache_spawn import free_ports

SKIP = 77
HEALTH_DEADLINE_S = 60.0
STOP_DEADLINE_S = 10.0


def etcd_binaries():
    etcd = shutil.which("etcd")
    etcdctl = shutil.which("etcdctl")
    if not etcd or not etcdctl:
        return None
    return etcd, etcdctl


_live = []


class MemberExited(RuntimeError):
    """A member's process ended; port_taken: its log says its port was taken."""

    def __init__(self, msg, port_taken):
        super().__init__(msg)
        self.port_taken = port_taken


def _cleanup_all():
    for c in list(_live):
        c.close()


def _on_signal(signum, _frame):
    _cleanup_all()
    sys.exit(128 + signum)


atexit.register(_cleanup_all)


class EtcdCluster:
    def __init__(self, members=3, token=None, log=sys.stderr, extra_args=()):
        bins = etcd_binaries()
        if not bins:
            raise FileNotFoundError("etcd or etcdctl not installed (Debian: etcd-server etcd-client)")
        self.etcd, self.etcdctl = bins
        self.n = members
        self.log = log
        self.extra_args = list(extra_args)
        self.dir = tempfile.mkdtemp(prefix="sl-etcd-")
        self.token = token or "sl-%d-%d" % (os.getpid(), int(time.time()))
        self.procs = [None] * members
        _live.append(self)
        for sig in (signal.SIGTERM, signal.SIGINT):
            if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
                signal.signal(sig, _on_signal)
        try:
            # A port the kernel called free may be taken before a member
            # binds it (another test's client or server): that member exits
            # with "address already in use", and the cluster starts anew on
            # other ports.
            for attempt in range(5):
                ports = free_ports(2 * members)
                self.client = ports[:members]
                self.peer = ports[members:]
                for i in range(members):
                    self.start(i)
                try:
                    self.wait_healthy()
                    break
                except MemberExited as e:
                    if attempt == 4 or not e.port_taken:
                        raise
                    self.stop_all()
                    for i in range(members):
                        shutil.rmtree(self.data_dir(i), ignore_errors=True)
        except BaseException:
            self.close()
            raise

    # --- addresses ---------------------------------------------------------
    def endpoint(self, i):
        return "127.0.0.1:%d" % self.client[i]

    def endpoints(self):
        return ",".join(self.endpoint(i) for i in range(self.n))

    def url(self, prefix="softlimit"):
        return "etcd://%s/%s" % (self.endpoints(), prefix)

    # --- members -----------------------------------------------------------
    def data_dir(self, i):
        return os.path.join(self.dir, "e%d" % i)

    def start(self, i):
        """Start member i (again): with its data if it has any, else new."""
        assert self.procs[i] is None or self.procs[i].poll() is not None
        cluster = ",".join("e%d=http://127.0.0.1:%d" % (j, self.peer[j]) for j in range(self.n))
        c = "http://127.0.0.1:%d" % self.client[i]
        p = "http://127.0.0.1:%d" % self.peer[i]
        args = [self.etcd, "--name", "e%d" % i, "--data-dir", self.data_dir(i),
                "--listen-client-urls", c, "--advertise-client-urls", c,
                "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.token, "--log-level", "warn"] + self.extra_args
        logf = open(os.path.join(self.dir, "e%d.log" % i), "ab")
        self.procs[i] = subprocess.Popen(args, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        logf.close()

    def alive(self, i):
        return self.procs[i] is not None and self.procs[i].poll() is None

    def kill(self, i):
        """kill -9 member i (by pid) and reap it."""
        p = self.procs[i]
        if p and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop(self, i):
        """SIGTERM member i, SIGKILL if it has not exited by the deadline."""
        p = self.procs[i]
        if not p or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop_all(self):
        for i in range(self.n):
            if self.alive(i):
                self.procs[i].send_signal(signal.SIGTERM)
        for i in range(self.n):
            self.stop(i)

    def start_all(self):
        for i in range(self.n):
            if not self.alive(i):
                self.start(i)

    def wipe(self):
        """Stop every member, delete its data, start the cluster empty (same
        members and token, so etcd may well give it the same cluster id)."""
        self.stop_all()
        for i in range(self.n):
            shutil.rmtree(self.data_dir(i), ignore_errors=True)
        self.start_all()

    def health(self, members=None, timeout_s=5.0):
        members = range(self.n) if members is None else members
        eps = ",".join("http://" + self.endpoint(i) for i in members)
        env = dict(os.environ, ETCDCTL_API="3")
        try:
            r = subprocess.run([self.etcdctl, "--endpoints=" + eps, "--command-timeout=3s",
                                "endpoint", "health"], env=env, capture_output=True,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0

    def leader(self, deadline_s=HEALTH_DEADLINE_S):
        """The index of the member that leads now (waits for one)."""
        eps = ",".join("http://" + self.endpoint(i) for i in range(self.n) if self.alive(i))
        env = dict(os.environ, ETCDCTL_API="3")
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                r = subprocess.run([self.etcdctl, "--endpoints=" + eps, "--command-timeout=3s",
                                    "endpoint", "status", "-w", "json"], env=env,
                                   capture_output=True, text=True, timeout=10)
                for st in json.loads(r.stdout or "[]"):
                    s = st["Status"]
                    if s.get("leader") and s["leader"] == s["header"]["member_id"]:
                        port = int(st["Endpoint"].rsplit(":", 1)[1])
                        return self.client.index(port)
            except (subprocess.TimeoutExpired, ValueError, KeyError):
                pass
            time.sleep(0.2)
        raise TimeoutError("no etcd leader within %.0f s" % deadline_s)

    def wait_healthy(self, members=None, deadline_s=HEALTH_DEADLINE_S):
        """Until etcdctl finds @members (all) healthy and each is still our
        running process: an endpoint whose member exited may be answered by
        another program that took its port."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            healthy = self.health(members)
            for i in range(self.n):
                p = self.procs[i]
                if p is not None and p.poll() is not None and (members is None or i in members):
                    log = os.path.join(self.dir, "e%d.log" % i)
                    with open(log, errors="replace") as f:
                        taken = "address already in use" in f.read()
                    raise MemberExited("etcd member e%d exited (%d): see %s" % (i, p.returncode, log),
                                       taken)
            if healthy:
                return
            time.sleep(0.2)
        raise TimeoutError("etcd cluster not healthy within %.0f s" % deadline_s)

    def close(self):
        if self not in _live:
            return
        try:
            self.stop_all()
        finally:
            if os.environ.get("SL_ETCD_KEEP"):
                print("etcd data kept in %s" % self.dir, file=self.log)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)
            _live.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv):
    members = 1
    extra = []
    if "--" not in argv:
        print("usage: etcd_cluster.py [--members N] [--etcd-arg ARG]... -- COMMAND...",
              file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    while len(opts) >= 2 and opts[0] in ("--members", "--etcd-arg"):
        if opts[0] == "--members":
            members = int(opts[1])
        else:
            extra.append(opts[1])
        opts = opts[2:]
    if opts:
        print("etcd_cluster.py: unknown option %s" % opts[0], file=sys.stderr)
        return 2
    if not etcd_binaries():
        print("SKIP: etcd is not installed (apt-get install etcd-server etcd-client)")
        return SKIP
    with EtcdCluster(members, extra_args=extra) as c:
        env = dict(os.environ, SL_ETCD_ENDPOINTS=c.endpoints(), SL_ETCD_URL=c.url(),
                   SL_ETCD_PIDS=",".join(str(p.pid) for p in c.procs))
        return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
