#!/usr/bin/env python3
"""The kazoo-reconnect suite of make compat: kazoo (Debian's python3-kazoo,
2.8), unchanged, through reconnects of its session, against the cluster
given by COMPAT_SERVERS (issue 35).

    COMPAT_SERVERS=h1:p1,h2:p2,h3:p3 COMPAT_CTL=... python3 kazoo_reconnect.py [NAME...]

kazoo sets its xid counter to 0 before every connect, so each connection
of a session numbers its requests 1, 2, 3, ... again. After each reconnect
(the socket shut down under kazoo, the same server again; the session's
server killed; twenty drops in a row) every write must succeed and apply
exactly once: a version-checked set and the numbers of sequential nodes
show a lost or a doubled write, every node created is read back (from
this session and another), and watches set after the reconnect fire.
Also issue 35's own probe (a create at the xid of an old connection's set
must create) and SetPartitioner settling to ACQUIRED again after its
connection dropped.

It shares kazoo_suite.py's helpers; the checks that kill a server need
COMPAT_CTL ("ctl kill HOST:PORT"). NAME arguments run only the checks
whose names contain one of them. Everything it creates is under /kazoo.
"""
import logging
import queue
import socket
import sys

sys.dont_write_bytecode = True  # no __pycache__ of kazoo_suite in the checkout
import kazoo_suite as ks  # noqa: E402 - after the line above
from kazoo.protocol.states import EventType, KazooState

DROPS = 20  # reconnects in a row


class Session:
    """A kazoo client whose state changes are queued, so a reconnect can
    be waited for: SUSPENDED, then CONNECTED."""

    def __init__(self, hosts):
        self.c = ks.client(hosts)
        self.states = queue.Queue()
        self.c.add_listener(self.states.put)

    def close(self):
        self.c.stop()
        self.c.close()

    def await_reconnect(self, why):
        ks.eq(KazooState.SUSPENDED, ks.take(self.states, "SUSPENDED after " + why), "state after " + why)
        ks.eq(KazooState.CONNECTED, ks.take(self.states, "CONNECTED after " + why), "state after " + why)

    def drop(self):
        """Shuts the socket down under kazoo and waits until it has
        connected again, to the same server (its only one)."""
        addr = ks.peer(self.c)
        sid = self.c.client_id[0]
        self.c._connection._socket.shutdown(socket.SHUT_RDWR)
        self.await_reconnect("the dropped connection")
        ks.eq(addr, ks.peer(self.c), "server after the dropped connection")
        ks.eq(sid, self.c.client_id[0], "session after the dropped connection")


class Tally:
    """One session's writes below base, counted, so that every round can
    check that each of them applied exactly once. w is another session,
    which reads back and makes the changes that fire this one's watches."""

    def __init__(self, c, w, base):
        self.c, self.w, self.base = c, w, base
        self.version = 0  # base/counter's version
        self.seq = 0  # sequential nodes created below base/seq
        c.create(base + "/counter", b"0", makepath=True)
        c.create(base + "/seq")

    def round(self, tag):
        """Sets, creates (plain, sequential, ephemeral), a multi and two
        watches, each checked."""
        c, w, b = self.c, self.w, self.base
        counter = b + "/counter"
        sid = c.client_id[0]
        for i in range(3):
            st = c.set(counter, ("%s-%d" % (tag, i)).encode(), version=self.version)
            self.version += 1
            ks.eq(self.version, st.version, "%s: the counter's version after a set" % tag)
        plain, eph, multi, fired = (b + "/" + tag + s for s in ("", "-eph", "-multi", "-w"))
        ks.eq(plain, c.create(plain), "%s: plain create's path" % tag)
        ks.eq(self.seqname(), c.create(b + "/seq/s-", sequence=True), "%s: sequential create's path" % tag)
        self.seq += 1
        ks.eq(eph, c.create(eph, ephemeral=True), "%s: ephemeral create's path" % tag)
        t = c.transaction()
        t.create(multi)
        t.set_data(counter, tag.encode(), version=self.version)
        t.create(b + "/seq/s-", sequence=True)
        res = t.commit()
        ks.eq(multi, res[0], "%s: multi's create" % tag)
        ks.eq(self.version + 1, getattr(res[1], "version", res[1]), "%s: multi's set_data" % tag)
        ks.eq(self.seqname(), res[2], "%s: multi's sequential create" % tag)
        self.version += 1
        self.seq += 1

        data, st = c.get(counter)
        ks.eq((tag.encode(), self.version), (data, st.version), "%s: the counter read back" % tag)
        for who, s in (("this session", c), ("another session", w)):
            s.sync(b)
            for p in (plain, multi):
                ks.that(s.exists(p) is not None, "%s: %s created, but %s does not see it", tag, p, who)
            st = s.exists(eph)
            ks.that(st is not None and st.ephemeralOwner == sid, "%s: the ephemeral %s as %s sees it: %r",
                    tag, eph, who, st)
            ks.eq(["s-%010d" % i for i in range(self.seq)], sorted(s.get_children(b + "/seq")),
                  "%s: sequential nodes as %s sees them" % (tag, who))

        events = queue.Queue()
        ks.that(c.exists(fired, watch=events.put) is None, "%s: %s exists already", tag, fired)
        c.get(counter, watch=events.put)
        w.create(fired)
        w.set(counter, b"w", version=self.version)
        self.version += 1
        got = [ks.take(events, "%s: watch event %d" % (tag, i)) for i in range(2)]
        ks.eq([(EventType.CREATED, fired), (EventType.CHANGED, counter)], [(e.type, e.path) for e in got],
              "%s: the events of the watches set after the reconnect" % tag)

    def seqname(self):
        return "%s/seq/s-%010d" % (self.base, self.seq)


def t_drop():
    s = Session(ks.ADDRS[0])
    w = ks.client()
    try:
        t = Tally(s.c, w, "/kazoo/drop")
        t.round("before")
        s.drop()
        t.round("after")
    finally:
        w.stop()
        w.close()
        s.close()


def t_drops():
    s = Session(ks.ADDRS[1 % len(ks.ADDRS)])
    w = ks.client()
    try:
        t = Tally(s.c, w, "/kazoo/drops")
        t.round("before")
        for i in range(DROPS):
            s.drop()
            t.round("drop%d" % i)
    finally:
        w.stop()
        w.close()
        s.close()


def t_probe():
    """Issue 35's probe: 30 sets, the socket dropped (the same server, no
    leader change), exists until kazoo's xid is back where the last set's
    was, then a create at that xid: it must create."""
    s = Session(ks.ADDRS[0])
    w = ks.client()
    c = s.c
    try:
        c.create("/kazoo/p", makepath=True)
        for i in range(30):
            c.set("/kazoo/p", str(i).encode())
        old = c._connection._xid
        s.drop()
        while c._connection._xid < old - 1:
            c.exists("/kazoo/p")
        ks.eq("/kazoo/p/new-node", c.create("/kazoo/p/new-node"), "the create's path")
        ks.eq(old, c._connection._xid, "the create's xid (the last set's of the old connection)")
        ks.that(c.exists("/kazoo/p/new-node") is not None, "the create at xid %d was answered, the node does not exist", old)
        w.sync("/kazoo/p")
        ks.that(w.exists("/kazoo/p/new-node") is not None, "another session does not see /kazoo/p/new-node")
        ks.eq(b"29", c.get("/kazoo/p")[0], "/kazoo/p's data")
        st = c.set("/kazoo/p", b"after")
        ks.eq(31, st.version, "/kazoo/p's version after a set on the new connection")
    finally:
        w.stop()
        w.close()
        s.close()


def t_partitioner():
    """SetPartitioner: acquired, its connection dropped (it must then
    release), released and acquired again; the lock nodes it holds are
    there. Before issue 35's fix, the release's deletes were refused as
    stale retries and it ended in FAILURE."""
    s = Session(ks.ADDRS[0])
    c = s.c
    items = ("a", "b", "c")
    try:
        # The application's other writes on this connection first.
        c.create("/kazoo/part-status", makepath=True)
        for i in range(30):
            c.set("/kazoo/part-status", str(i).encode())
        p = c.SetPartitioner("/kazoo/part", set=items, time_boundary=0.5)
        ks.wait_until("the partitioner acquired (state %s)" % p.state, lambda: p.acquired or p.failed)
        ks.that(p.acquired, "the partitioner: %s", p.state)
        ks.eq(list(items), sorted(p), "the items acquired")
        s.drop()
        ks.wait_until("the partitioner released after the drop (state %s)" % p.state, lambda: p.release or p.failed)
        ks.that(p.release, "the partitioner after the drop: %s, not RELEASE", p.state)
        p.release_set()
        ks.wait_until("the partitioner acquired again", lambda: p.acquired or p.failed)
        ks.that(p.acquired, "the partitioner after the drop: %s, not ACQUIRED", p.state)
        ks.eq(list(items), sorted(p), "the items acquired again")
        for it in items:
            ks.eq(1, len(c.get_children("/kazoo/part/locks/" + it)), "lock nodes of %s" % it)
        p.finish()
        for it in items:
            ks.eq([], c.get_children("/kazoo/part/locks/" + it), "lock nodes of %s after finish()" % it)
    finally:
        s.close()


def t_kill():
    s = Session(ks.SERVERS)
    first = ks.peer(s.c)
    # The other session on the servers that stay.
    w = ks.client(",".join(a for a in ks.ADDRS if a != first))
    try:
        sid = s.c.client_id[0]
        t = Tally(s.c, w, "/kazoo/kill")
        t.round("before")
        ks.kill(first)
        s.await_reconnect("the kill of %s" % first)
        ks.that(ks.peer(s.c) != first, "still on the killed server %s", first)
        ks.eq(sid, s.c.client_id[0], "session after the kill")
        t.round("after")
    finally:
        w.stop()
        w.close()
        s.close()


def main():
    if not ks.ADDRS:
        print("COMPAT_SERVERS: the client addresses of the cluster, comma-separated", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ks.test("socket dropped, the same server: writes, creates, multi and watches after", t_drop)
    ks.test("%d dropped sockets in a row, each followed by writes, creates, multi and watches" % DROPS, t_drops)
    ks.test("issue 35's probe: a create at the xid of an old connection's set creates", t_probe)
    ks.test("SetPartitioner: ACQUIRED again after its connection dropped", t_partitioner)
    # Last: it kills a server, which the harness restarts after the suite.
    ks.test("the session's server killed: writes, creates, multi and watches after", t_kill)
    admin = ks.client()
    try:
        admin.sync("/kazoo")  # so that its server lists every node below
        admin.delete("/kazoo", recursive=True)
    finally:
        admin.stop()
        admin.close()
    print("kazoo-reconnect: %d passed, %d failed" % (ks.passed, ks.failed))
    return 0 if ks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
