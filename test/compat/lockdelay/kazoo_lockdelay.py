#!/usr/bin/env python3
"""The kazoo-lockdelay suite of make compat (coordd only: ZooKeeper has no
lock-delay): kazoo's Lock (Debian's python3-kazoo, 2.8), unchanged, against a
coordd cluster started with --lock-delay PREFIX=DURATION.

    COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 COMPAT_LOCK_DELAY=/lockdelay=4s \\
        python3 kazoo_lockdelay.py [NAME...]

A holder is a process of its own (this script, "holder PATH MARKER"): it
takes the lock at PATH and creates the ephemeral MARKER outside the prefix,
whose deletion tells the suite when the holder's session expired. Stopped
with SIGSTOP past its session timeout, the holder loses its session: the
waiter must acquire only once the lock-delay has passed since that expiry,
and the holder, resumed, must be told its session was lost. A holder that
releases the lock, or closes its session, hands it over at once. It prints
"ok NAME" or "FAIL NAME: why" per check and exits 1 if any failed.
Everything it creates is under the prefix and /lockdelay-markers. Every wait
is bounded (COMPAT_WAIT seconds, default 30); every holder process is
killed by its PID at the end of its check.
"""
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

WAIT = float(os.environ.get("COMPAT_WAIT", "30"))
SERVERS = os.environ.get("COMPAT_SERVERS", "")
HOLDER_TIMEOUT = 3.0  # the holder's session timeout, seconds
MARKERS = "/lockdelay-markers"

passed = 0
failed = 0


class Failure(Exception):
    """A check that did not hold."""


def that(cond, msg, *args):
    if not cond:
        raise Failure(msg % args if args else msg)


def parse_rule(rule):
    """PREFIX=DURATION (as coordd's --lock-delay, seconds or ms) -> (prefix,
    seconds)."""
    m = re.fullmatch(r"(/[^=]*)=([0-9.]+)(ms|s)", rule or "")
    if not m:
        raise SystemExit("COMPAT_LOCK_DELAY: want PREFIX=DURATION such as /lockdelay=4s, not %r" % rule)
    v = float(m.group(2))
    return m.group(1), v / 1000 if m.group(3) == "ms" else v


def client(timeout=15.0):
    c = KazooClient(hosts=SERVERS, timeout=timeout)
    c.start(timeout=WAIT)
    return c


def test(name, fn):
    global passed, failed
    only = sys.argv[1:]
    if only and not any(o in name for o in only):
        return
    t0 = time.monotonic()
    try:
        note = fn()
    except Exception as e:  # noqa: BLE001 - every failure is reported
        failed += 1
        print("FAIL %s: %s" % (name, e if isinstance(e, Failure) else repr(e)), flush=True)
        print("FAIL %s:" % name, file=sys.stderr)
        traceback.print_exc()
    else:
        passed += 1
        print("ok   %s (%d ms)%s" % (name, (time.monotonic() - t0) * 1000, ": " + note if note else ""), flush=True)


class Holder:
    """A holder process: this script in holder mode, its output read line
    by line."""

    def __init__(self, path, marker):
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "holder", path, marker],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                  env=dict(os.environ))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(line.strip())

    def expect(self, word):
        """Waits for a line starting with word, and returns it."""
        deadline = time.monotonic() + WAIT
        while True:
            left = deadline - time.monotonic()
            that(left > 0 and self.p.poll() is None or not self.lines.empty(),
                 "the holder did not say %r within %gs (exit %r)", word, WAIT, self.p.poll())
            try:
                line = self.lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                continue
            if line.startswith("error"):
                raise Failure("holder: " + line)
            if line.startswith(word):
                return line

    def tell(self, word):
        self.p.stdin.write(word + "\n")
        self.p.stdin.flush()

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGCONT)
            self.p.kill()
        self.p.wait(timeout=WAIT)


class Waiter:
    """A contender on another session, acquiring in a thread."""

    def __init__(self, c, path):
        self.lock = c.Lock(path, "waiter")
        self.acquired = queue.Queue()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            if self.lock.acquire(timeout=2 * WAIT):
                self.acquired.put(time.monotonic())
        except Exception as e:  # noqa: BLE001 - reported when taken
            self.acquired.put(e)

    def when(self):
        try:
            v = self.acquired.get(timeout=2 * WAIT)
        except queue.Empty:
            raise Failure("the waiter did not acquire within %gs" % (2 * WAIT))
        if isinstance(v, Exception):
            raise Failure("the waiter's acquire: %r" % v)
        return v


def handover(name, how):
    """A holder that releases (how: "release") or closes its session
    ("close") hands the lock over at once."""
    prefix, delay = parse_rule(os.environ.get("COMPAT_LOCK_DELAY"))
    path = "%s/%s" % (prefix, name)
    c = client()
    h = Holder(path, "%s/%s" % (MARKERS, name))
    try:
        h.expect("held")
        w = Waiter(c, path)
        wait_queued(c, path)
        t0 = time.monotonic()
        h.tell(how)
        h.expect("done")
        at = w.when()
        that(at - t0 < delay / 2, "acquired %.2fs after the %s, not at once (lock-delay %gs)", at - t0, how, delay)
        w.lock.release()
        return "the waiter acquired %.0f ms after the holder's %s" % ((at - t0) * 1000, how)
    finally:
        h.kill()
        c.stop()
        c.close()


def wait_queued(c, path):
    deadline = time.monotonic() + WAIT
    while len(c.get_children(path)) < 2:
        that(time.monotonic() < deadline, "the waiter did not queue on %s within %gs", path, WAIT)
        time.sleep(0.05)


def t_release():
    return handover("release", "release")


def t_close():
    return handover("close", "close")


def t_expiry():
    prefix, delay = parse_rule(os.environ.get("COMPAT_LOCK_DELAY"))
    path, marker = prefix + "/expiry", MARKERS + "/expiry"
    c = client()
    h = Holder(path, marker)
    try:
        sid = int(h.expect("held").split()[1])
        w = Waiter(c, path)
        wait_queued(c, path)
        gone = queue.Queue()
        that(c.exists(marker, watch=lambda ev: gone.put(time.monotonic())) is not None, "no marker %s", marker)
        h.p.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            expired = gone.get(timeout=WAIT)
        except queue.Empty:
            raise Failure("the holder's session did not expire within %gs of SIGSTOP" % WAIT)
        that(w.acquired.empty(), "the waiter acquired when the holder's session expired")
        # During the delay the holder's node is there, still owned by it.
        kids = sorted(c.get_children(path), key=lambda k: k[-10:])
        owner = c.exists("%s/%s" % (path, kids[0])).ephemeralOwner
        that(owner == sid, "the lock's first node is owned by %#x, not the expired holder %#x", owner, sid)
        at = w.when()
        waited = at - expired
        that(waited >= delay - 0.5, "acquired %.2fs after the holder's session expired: before the lock-delay of %gs ended", waited, delay)
        that(waited <= delay + 3, "acquired %.2fs after the holder's session expired: long after the lock-delay of %gs", waited, delay)
        # Resumed, the holder is told its session is gone.
        h.p.send_signal(signal.SIGCONT)
        h.expect("lost")
        w.lock.release()
        return "session expired %.1fs after SIGSTOP; the waiter acquired %.2fs after the expiry (lock-delay %gs)" % (
            expired - stopped, waited, delay)
    finally:
        h.kill()
        c.stop()
        c.close()


def holder(path, marker):
    """The holder process: takes the lock, creates the marker, says "held
    SESSION"; on "release" releases the lock, on "close" closes its session
    (each then says "done"); says "lost" when its session is lost."""
    try:
        c = KazooClient(hosts=SERVERS, timeout=HOLDER_TIMEOUT)
        c.start(timeout=WAIT)
        c.add_listener(lambda st: st == KazooState.LOST and print("lost", flush=True))
        lock = c.Lock(path, "holder")
        if not lock.acquire(timeout=WAIT):
            print("error: lock not acquired", flush=True)
            return 1
        c.ensure_path(MARKERS)
        c.create(marker, ephemeral=True)
        print("held %d" % c.client_id[0], flush=True)
        for line in sys.stdin:
            if line.strip() == "release":
                lock.release()
            elif line.strip() == "close":
                c.stop()
                c.close()
            print("done", flush=True)
    except Exception as e:  # noqa: BLE001 - the suite reports it
        print("error: %r" % e, flush=True)
        return 1
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "holder":
        return holder(sys.argv[2], sys.argv[3])
    if not SERVERS:
        print("COMPAT_SERVERS: the client addresses of the cluster, comma-separated", file=sys.stderr)
        return 2
    prefix, _ = parse_rule(os.environ.get("COMPAT_LOCK_DELAY"))
    test("Lock: a holder that releases hands over at once", t_release)
    test("Lock: a holder that closes its session hands over at once", t_close)
    test("Lock: a holder stopped past its session timeout hands over only after the lock-delay", t_expiry)
    admin = client()
    try:
        for p in (prefix, MARKERS):
            if admin.exists(p):
                admin.delete(p, recursive=True)
    finally:
        admin.stop()
        admin.close()
    print("kazoo-lockdelay: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
