// ReconnectSuite: ZooKeeper's Java client (Debian's zookeeper.jar, 3.8),
// unchanged, through reconnects of its session (issue 35); the
// "java-reconnect" suite of make compat, against the cluster given by
// COMPAT_SERVERS. One ZooKeeper object keeps numbering its requests
// across its reconnects; a new object resuming a session (a restarted
// program) numbers them from 1 again. After each reconnect (a dropped
// connection to the same server, 20 in a row, a new object resuming the
// session after the old one's 30 writes, the session's server killed) the
// same round runs: version-checked sets, a plain, a sequential and an
// ephemeral create, a multi, everything read back from this session and
// another, and watches set after the reconnect that must fire.
// COMPAT_CTL is the harness's helper that kills a server. Everything it
// creates is under /java.
import static org.apache.zookeeper.ZooDefs.Ids.OPEN_ACL_UNSAFE;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZKUtil;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

public final class ReconnectSuite {
    private static final int TIMEOUT = 15_000;
    private static final int DROPS = 20;
    private static final int WRITES = 30;
    private static String servers;
    private static String[] addrs;

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the servers' client addresses, comma-separated");
            System.exit(2);
        }
        addrs = servers.split(",");
        Check.only = args;
        ZooKeeper admin = Check.connect(servers, TIMEOUT);
        admin.create("/java", new byte[0], OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        admin.close();

        Check.test("connection dropped, the same server: writes, creates, multi and watches after", () -> drops("/java/drop", 1));
        Check.test(DROPS + " dropped connections in a row, each followed by writes, creates, multi and watches", () -> drops("/java/drops", DROPS));
        Check.test("a new ZooKeeper object resuming the session after " + WRITES + " writes: writes, creates, multi and watches",
                ReconnectSuite::resume);
        // Last: it kills a server, which the harness restarts after the suite.
        Check.test("the session's server killed: writes, creates, multi and watches after", ReconnectSuite::kill);

        ZooKeeper cleanup = Check.connect(servers, TIMEOUT);
        try {
            Check.sync(cleanup, "/java"); // so that its server lists every node below
            ZKUtil.deleteRecursive(cleanup, "/java");
        } finally {
            cleanup.close();
        }
        System.exit(Check.finish("java-reconnect"));
    }

    /**
     * One session's writes below base, counted, so that every round can
     * check that each applied exactly once. w is another session, which
     * reads back and makes the changes that fire this one's watches.
     */
    static final class Tally {
        private final ZooKeeper zk;
        private final ZooKeeper w;
        private final String base;
        private int version; // base/counter's
        private int seq; // sequential nodes created below base/seq

        Tally(ZooKeeper zk, ZooKeeper w, String base) throws Exception {
            this.zk = zk;
            this.w = w;
            this.base = base;
            zk.create(base, null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create(base + "/counter", Check.bytes("0"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create(base + "/seq", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        }

        private String seqName() {
            return String.format("%s/seq/s-%010d", base, seq);
        }

        /** Sets, creates (plain, sequential, ephemeral), a multi and two watches, each checked. */
        void round(String tag) throws Exception {
            String counter = base + "/counter";
            String plain = base + "/" + tag;
            String eph = plain + "-eph";
            String multi = plain + "-multi";
            String fired = plain + "-w";
            long sid = zk.getSessionId();
            for (int i = 0; i < 3; i++) {
                Stat st = zk.setData(counter, Check.bytes(tag + "-" + i), version);
                version++;
                Check.eq(version, st.getVersion(), tag + ": the counter's version after a set");
            }
            Check.eq(plain, zk.create(plain, null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT), tag + ": plain create's path");
            Check.eq(seqName(), zk.create(base + "/seq/s-", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL),
                    tag + ": sequential create's path");
            seq++;
            Check.eq(eph, zk.create(eph, null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL), tag + ": ephemeral create's path");
            List<OpResult> rs = zk.multi(List.of(
                    Op.create(multi, null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.setData(counter, Check.bytes(tag), version),
                    Op.create(base + "/seq/s-", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL)));
            Check.eq(multi, ((OpResult.CreateResult) rs.get(0)).getPath(), tag + ": multi's create");
            Check.eq(version + 1, ((OpResult.SetDataResult) rs.get(1)).getStat().getVersion(), tag + ": multi's setData");
            Check.eq(seqName(), ((OpResult.CreateResult) rs.get(2)).getPath(), tag + ": multi's sequential create");
            version++;
            seq++;

            Stat st = new Stat();
            Check.eq(tag + " " + version, Check.str(zk.getData(counter, false, st)) + " " + st.getVersion(), tag + ": the counter read back");
            List<String> want = new ArrayList<>();
            for (int i = 0; i < seq; i++) {
                want.add(String.format("s-%010d", i));
            }
            for (ZooKeeper s : List.of(zk, w)) {
                String who = s == zk ? "this session" : "another session";
                Check.sync(s, base);
                for (String p : List.of(plain, multi)) {
                    Check.that(s.exists(p, false) != null, "%s: %s created, but %s does not see it", tag, p, who);
                }
                Stat es = s.exists(eph, false);
                Check.that(es != null && es.getEphemeralOwner() == sid, "%s: the ephemeral %s as %s sees it: %s", tag, eph, who, es);
                List<String> kids = s.getChildren(base + "/seq", false);
                kids.sort(null);
                Check.eq(want, kids, tag + ": sequential nodes as " + who + " sees them");
            }

            Check.Events ev = new Check.Events();
            Check.that(zk.exists(fired, ev) == null, "%s: %s exists already", tag, fired);
            zk.getData(counter, ev, null);
            w.create(fired, null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            w.setData(counter, Check.bytes("w"), version);
            version++;
            ev.expect(EventType.NodeCreated, fired);
            ev.expect(EventType.NodeDataChanged, counter);
        }
    }

    /**
     * Drops the session's connection (through the proxy, to its one
     * server) and waits until it has connected again, to the same session.
     */
    private static void drop(ZooKeeper zk, Check.Events ev, Check.Proxy proxy) throws Exception {
        long id = zk.getSessionId();
        int from = ev.stateCount();
        proxy.cut();
        proxy.heal();
        from = ev.awaitState(KeeperState.Disconnected, from);
        ev.awaitState(KeeperState.SyncConnected, from);
        Check.eq(id, zk.getSessionId(), "session after the dropped connection");
    }

    /** The addresses but one, comma-separated. */
    private static String others(String but) {
        return Arrays.stream(addrs).filter(a -> !a.equals(but)).collect(Collectors.joining(","));
    }

    private static void drops(String base, int n) throws Exception {
        // The session through a proxy to the first server alone: a cut
        // drops its connection, and it connects again to the same server.
        try (Check.Proxy proxy = new Check.Proxy(addrs[0])) {
            Check.Events ev = new Check.Events();
            ZooKeeper zk = Check.connect(proxy.addressTwice(), TIMEOUT, ev);
            ZooKeeper w = Check.connect(servers, TIMEOUT);
            try {
                Tally t = new Tally(zk, w, base);
                t.round("before");
                for (int i = 0; i < n; i++) {
                    drop(zk, ev, proxy);
                    t.round(n == 1 ? "after" : "drop" + i);
                }
            } finally {
                w.close();
                zk.close();
            }
        }
    }

    /**
     * A program's ZooKeeper object makes WRITES sets and is cut off for
     * good, as if its process had died; a new object resumes the session
     * by its id and password, its xids from 1 again.
     */
    private static void resume() throws Exception {
        ZooKeeper old = null;
        ZooKeeper zk = null;
        ZooKeeper w = Check.connect(servers, TIMEOUT);
        try {
            long id;
            byte[] pw;
            try (Check.Proxy proxy = new Check.Proxy(addrs[0])) {
                Check.Events oldEv = new Check.Events();
                old = Check.connect(proxy.address(), TIMEOUT, oldEv);
                old.create("/java/resume", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                old.create("/java/resume/p", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                for (int i = 0; i < WRITES; i++) {
                    old.setData("/java/resume/p", Check.bytes(Integer.toString(i)), i);
                }
                id = old.getSessionId();
                pw = old.getSessionPasswd();
                int from = oldEv.stateCount();
                proxy.close();
                oldEv.awaitState(KeeperState.Disconnected, from);
            }
            Check.Events ev = new Check.Events();
            zk = new ZooKeeper(servers, TIMEOUT, ev, id, pw);
            ev.awaitState(KeeperState.SyncConnected, 0);
            Check.eq(id, zk.getSessionId(), "the resumed session's id");
            Tally t = new Tally(zk, w, "/java/resume/t");
            t.round("resumed");
            Stat st = zk.exists("/java/resume/p", false);
            Check.eq(WRITES, st.getVersion(), "/java/resume/p's version (the old object's sets)");
            Check.eq(WRITES + 1, zk.setData("/java/resume/p", Check.bytes("after"), WRITES).getVersion(),
                    "/java/resume/p's version after a set of the new object");
        } finally {
            // The old object cannot reach a server any more: its close
            // ends with a connection loss, not with the session.
            if (old != null) {
                old.close();
            }
            if (zk != null) {
                zk.close();
            }
            w.close();
        }
    }

    private static void kill() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper zk = Check.connect(servers, TIMEOUT, ev);
        String first = Check.remote(zk);
        // The other session on the servers that stay.
        ZooKeeper w = Check.connect(others(first), TIMEOUT);
        try {
            long id = zk.getSessionId();
            Tally t = new Tally(zk, w, "/java/kill");
            t.round("before");
            int from = ev.stateCount();
            Check.kill(first);
            from = ev.awaitState(KeeperState.Disconnected, from);
            ev.awaitState(KeeperState.SyncConnected, from);
            Check.eq(id, zk.getSessionId(), "session after the kill");
            Check.that(!Check.remote(zk).equals(first), "still connected to the killed server %s", first);
            t.round("after");
        } finally {
            w.close();
            zk.close();
        }
    }
}
