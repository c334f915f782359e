// ClientSuite: ZooKeeper's own Java client (Debian's zookeeper.jar, 3.8),
// unchanged, against a 3-server cluster given by COMPAT_SERVERS. It is the
// "java" suite of make compat (scripts/compat.sh), which also runs it
// against a real ZooKeeper ensemble (TARGET=zookeeper) to prove each check
// on ZooKeeper first. COMPAT_CTL is the harness's helper that kills a
// server ("ctl kill HOST:PORT"). Everything it creates is under /java.
import static org.apache.zookeeper.ZooDefs.Ids.OPEN_ACL_UNSAFE;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.Op;
import org.apache.zookeeper.OpResult;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZKUtil;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Stat;

public final class ClientSuite {
    private static final int TIMEOUT = 15_000;
    private static String servers;
    private static String[] addrs;
    /** A session for setting up and observing. */
    private static ZooKeeper admin;

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the servers' client addresses, comma-separated");
            System.exit(2);
        }
        addrs = servers.split(",");
        Check.only = args;
        admin = Check.connect(servers, TIMEOUT);
        admin.create("/java", new byte[0], OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        Check.test("session: id, password, negotiated timeout", ClientSuite::session);
        Check.test("session: resuming with a wrong password is refused, the session lives on", ClientSuite::wrongPassword);
        Check.test("create, getData, setData, exists, getChildren, delete and their errors", ClientSuite::crud);
        Check.test("empty data stays empty (not null), null data stays null", ClientSuite::emptyData);
        Check.test("compare-and-set: BadVersion on setData, delete and check", ClientSuite::cas);
        Check.test("sequential nodes", ClientSuite::sequential);
        Check.test("ephemeral: owner, no children, gone with its session", ClientSuite::ephemeral);
        Check.test("create2 and getChildren2 return the node's Stat", ClientSuite::stats);
        Check.test("a chroot in the connection string", ClientSuite::chroot);
        Check.test("container and TTL nodes are reaped", ClientSuite::containerAndTtl);
        Check.test("multi: a result per op", ClientSuite::multiOk);
        Check.test("multi with a failing op: nothing applied, per-op ErrorResults", ClientSuite::multiFails);
        Check.test("multiRead: per-op results, errors in place", ClientSuite::multiRead);
        Check.test("getAllChildrenNumber, getEphemerals, sync, whoAmI, getACL, /zookeeper", ClientSuite::misc);
        Check.test("getConfig: one membership, the same on every server, with each client address", ClientSuite::config);
        Check.test("watches: one-shot, in order, before the reply that shows the change", ClientSuite::watchOrder);
        Check.test("addWatch PERSISTENT and PERSISTENT_RECURSIVE, removeWatches", ClientSuite::persistentWatches);
        Check.test("session moves when its server dies: ephemeral kept, watches re-registered (2000 of them)", ClientSuite::sessionMove);
        Check.test("session expiry after its client is cut off for longer than its timeout", ClientSuite::expiry);

        try {
            Check.waitUntil("the admin session connected", () -> admin.getState().isConnected());
            ZKUtil.deleteRecursive(admin, "/java");
        } finally {
            admin.close();
        }
        System.exit(Check.finish("java"));
    }

    private static void session() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper zk = Check.connect(servers, TIMEOUT, ev);
        try {
            Check.that(zk.getSessionId() != 0, "session id 0");
            Check.eq(16, zk.getSessionPasswd().length, "password length");
            Check.eq(TIMEOUT, zk.getSessionTimeout(), "negotiated timeout");
            String conf = Check.fourLetters(Check.remote(zk), "conf");
            int min = confInt(conf, "minSessionTimeout");
            int max = confInt(conf, "maxSessionTimeout");
            ZooKeeper low = Check.connect(servers, min / 2);
            ZooKeeper high = Check.connect(servers, max * 2);
            try {
                Check.eq(min, low.getSessionTimeout(), "timeout asked below the minimum");
                Check.eq(max, high.getSessionTimeout(), "timeout asked above the maximum");
                Check.that(low.getSessionId() != zk.getSessionId(), "two sessions share an id");
            } finally {
                low.close();
                high.close();
            }
        } finally {
            zk.close();
        }
        ev.awaitState(KeeperState.Closed, 0);
    }

    private static void wrongPassword() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            byte[] wrong = zk.getSessionPasswd().clone();
            wrong[0] ^= 1;
            Check.Events ev = new Check.Events();
            ZooKeeper thief = new ZooKeeper(servers, TIMEOUT, ev, zk.getSessionId(), wrong);
            try {
                ev.awaitState(KeeperState.Expired, 0);
            } finally {
                thief.close();
            }
            // ZooKeeper drops the session's own connection to that server
            // before it checks the password (the client reconnects at once);
            // coordd leaves it alone. Either way the session goes on.
            long id = zk.getSessionId();
            Check.waitUntil("the session answers after the refused resume", () -> {
                try {
                    zk.create("/java/pw-alive", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
                    return true;
                } catch (KeeperException.ConnectionLossException e) {
                    return false;
                } catch (KeeperException.NodeExistsException e) {
                    return true; // created before the connection was lost
                }
            });
            Check.eq(id, zk.getSessionId(), "session id");
            Check.eq(id, zk.exists("/java/pw-alive", false).getEphemeralOwner(), "the ephemeral's owner");
            zk.delete("/java/pw-alive", -1);
        } finally {
            zk.close();
        }
    }

    private static int confInt(String conf, String key) {
        for (String line : conf.split("\n")) {
            if (line.startsWith(key + "=")) {
                return Integer.parseInt(line.substring(key.length() + 1).trim());
            }
        }
        throw new AssertionError("conf has no " + key + ":\n" + conf);
    }

    private static void crud() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            Check.eq("/java/crud", zk.create("/java/crud", Check.bytes("v0"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT), "created path");
            Stat st = new Stat();
            Check.eq("v0", Check.str(zk.getData("/java/crud", false, st)), "data");
            Check.eq(0, st.getVersion(), "version");
            Check.eq(2, st.getDataLength(), "dataLength");
            Stat set = zk.setData("/java/crud", Check.bytes("v1"), 0);
            Check.eq(1, set.getVersion(), "version after setData");
            Check.that(set.getMzxid() > set.getCzxid(), "mzxid %x not after czxid %x", set.getMzxid(), set.getCzxid());
            Check.eq(set, zk.exists("/java/crud", false), "exists' Stat");
            zk.create("/java/crud/c", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            Check.eq(List.of("c"), zk.getChildren("/java/crud", false), "children");
            Check.eq(null, zk.getData("/java/crud/c", false, null), "null data stays null");
            Check.fails(Code.NODEEXISTS, () -> zk.create("/java/crud", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            Check.fails(Code.NONODE, () -> zk.create("/java/none/x", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
            Check.fails(Code.NONODE, () -> zk.getData("/java/none", false, null));
            Check.fails(Code.NONODE, () -> zk.setData("/java/none", null, -1));
            Check.fails(Code.NOTEMPTY, () -> zk.delete("/java/crud", -1));
            Check.eq(null, zk.exists("/java/none", false), "exists of an absent node");
            zk.delete("/java/crud/c", -1);
            zk.delete("/java/crud", 1);
            Check.eq(null, zk.exists("/java/crud", false), "exists after delete");
            Check.fails(Code.NONODE, () -> zk.delete("/java/crud", -1));
            // Data of up to ZooKeeper's default limit (jute.maxbuffer, 1 MiB with the request).
            byte[] big = new byte[1_000_000];
            Arrays.fill(big, (byte) 'b');
            zk.create("/java/big", big, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            Check.that(Arrays.equals(big, zk.getData("/java/big", false, null)), "1 MB of data came back changed");
            zk.delete("/java/big", -1);
        } finally {
            zk.close();
        }
    }

    private static String show(byte[] b) {
        return b == null ? "null" : "byte[" + b.length + "]";
    }

    private static void emptyData() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/empty", new byte[0], OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/null", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/set-empty", Check.bytes("x"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.setData("/java/set-empty", new byte[0], -1);
            zk.multi(List.of(Op.create("/java/multi-empty", new byte[0], OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)));
            Check.eq("byte[0]", show(zk.getData("/java/empty", false, null)), "created with byte[0]");
            Check.eq("byte[0]", show(zk.getData("/java/set-empty", false, null)), "set to byte[0]");
            Check.eq("byte[0]", show(zk.getData("/java/multi-empty", false, null)), "created with byte[0] in a multi");
            Check.eq("null", show(zk.getData("/java/null", false, null)), "created with null");
            Check.eq("byte[0]", show(zk.getData("/", false, null)), "the root's data");
            Check.eq("byte[0]", show(zk.getData("/zookeeper", false, null)), "/zookeeper's data");
        } finally {
            zk.close();
        }
    }

    private static void cas() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/cas", Check.bytes("a"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.setData("/java/cas", Check.bytes("b"), 0);
            Check.fails(Code.BADVERSION, () -> zk.setData("/java/cas", Check.bytes("lost"), 0));
            Check.fails(Code.BADVERSION, () -> zk.delete("/java/cas", 5));
            Check.fails(Code.BADVERSION, () -> zk.multi(List.of(Op.check("/java/cas", 0))));
            Stat st = new Stat();
            Check.eq("b", Check.str(zk.getData("/java/cas", false, st)), "data after the failed writes");
            Check.eq(1, st.getVersion(), "version after the failed writes");
            zk.delete("/java/cas", 1);
        } finally {
            zk.close();
        }
    }

    private static void sequential() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/seq", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            Check.eq("/java/seq/n-0000000000", zk.create("/java/seq/n-", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL), "first");
            Check.eq("/java/seq/n-0000000001", zk.create("/java/seq/n-", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL), "second");
            zk.delete("/java/seq/n-0000000001", -1);
            String eph = zk.create("/java/seq/e-", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
            // The number counts the children ever created under the parent
            // (a delete frees none).
            Check.eq("/java/seq/e-0000000002", eph, "ephemeral sequential after a delete");
            Check.that(zk.exists(eph, false).getEphemeralOwner() == zk.getSessionId(), "not owned by the session");
        } finally {
            zk.close();
        }
    }

    private static void ephemeral() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        zk.create("/java/eph", Check.bytes("e"), OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        Check.sync(admin, "/java/eph");
        Stat st = admin.exists("/java/eph", ev);
        Check.eq(zk.getSessionId(), st.getEphemeralOwner(), "ephemeralOwner");
        Check.fails(Code.NOCHILDRENFOREPHEMERALS, () -> zk.create("/java/eph/c", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT));
        zk.close();
        ev.expect(EventType.NodeDeleted, "/java/eph");
        Check.eq(null, admin.exists("/java/eph", false), "the ephemeral after its session closed");
    }

    private static void stats() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            Stat st = new Stat();
            zk.create("/java/st", Check.bytes("abc"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, st);
            Check.that(st.getCzxid() != 0, "create2: czxid 0");
            Check.eq(st.getCzxid(), st.getMzxid(), "create2: mzxid");
            Check.eq(st.getCzxid(), st.getPzxid(), "create2: pzxid");
            Check.eq(3, st.getDataLength(), "create2: dataLength");
            Check.eq(0, st.getNumChildren(), "create2: numChildren");
            Check.eq(st, zk.exists("/java/st", false), "create2's Stat against exists'");
            Stat c = new Stat();
            zk.create("/java/st/a", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT, c);
            zk.create("/java/st/b", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            Stat parent = new Stat();
            List<String> kids = new ArrayList<>(zk.getChildren("/java/st", false, parent));
            Collections.sort(kids);
            Check.eq(List.of("a", "b"), kids, "getChildren2's children");
            Check.eq(2, parent.getNumChildren(), "getChildren2: numChildren");
            Check.eq(2, parent.getCversion(), "getChildren2: cversion");
            Check.that(parent.getPzxid() > c.getCzxid(), "getChildren2: pzxid %x not after the first child's czxid %x", parent.getPzxid(), c.getCzxid());
            Check.eq(parent, zk.exists("/java/st", false), "getChildren2's Stat against exists'");
        } finally {
            zk.close();
        }
    }

    private static void chroot() throws Exception {
        admin.create("/java/chroot", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        Check.Events ev = new Check.Events();
        String rooted = String.join(",", addrs) + "/java/chroot";
        ZooKeeper zk = Check.connect(rooted, TIMEOUT);
        try {
            Check.eq("/x", zk.create("/x", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT), "created path");
            Check.eq(List.of("x"), zk.getChildren("/", false), "children of the chroot");
            zk.getData("/x", ev, null);
            admin.setData("/java/chroot/x", Check.bytes("1"), -1);
            ev.expect(EventType.NodeDataChanged, "/x");
        } finally {
            zk.close();
        }
    }

    private static void containerAndTtl() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/cont", null, OPEN_ACL_UNSAFE, CreateMode.CONTAINER);
            zk.create("/java/cont/c", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            Stat ttlStat = new Stat();
            zk.create("/java/ttl", Check.bytes("t"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_WITH_TTL, ttlStat, 1000);
            Check.eq(0L, ttlStat.getEphemeralOwner(), "a TTL node's ephemeralOwner");
            Check.eq(0L, zk.exists("/java/cont", false).getEphemeralOwner(), "a container's ephemeralOwner");
            Check.that(zk.exists("/java/cont", false) != null, "the container went while it had a child");
            zk.delete("/java/cont/c", -1);
            Check.waitUntil("the emptied container is deleted", () -> zk.exists("/java/cont", false) == null);
            Check.waitUntil("the TTL node is deleted", () -> zk.exists("/java/ttl", false) == null);
        } finally {
            zk.close();
        }
    }

    private static void multiOk() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/m", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/m/old", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            List<OpResult> res = zk.multi(List.of(
                    Op.create("/java/m/a", Check.bytes("1"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.create("/java/m/s-", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL),
                    Op.check("/java/m/a", 0),
                    Op.setData("/java/m/a", Check.bytes("2"), 0),
                    Op.delete("/java/m/old", 0)));
            Check.eq(5, res.size(), "results");
            Check.eq("/java/m/a", ((OpResult.CreateResult) res.get(0)).getPath(), "create's path");
            Check.eq("/java/m/s-0000000002", ((OpResult.CreateResult) res.get(1)).getPath(), "sequential create's path");
            Check.that(res.get(2) instanceof OpResult.CheckResult, "op 3: %s", res.get(2));
            Stat st = ((OpResult.SetDataResult) res.get(3)).getStat();
            Check.eq(1, st.getVersion(), "setData's Stat version");
            Check.that(res.get(4) instanceof OpResult.DeleteResult, "op 5: %s", res.get(4));
            // Every op of one multi has the same zxid.
            Stat created = zk.exists("/java/m/s-0000000002", false);
            Check.eq(st.getMzxid(), created.getCzxid(), "one zxid for the whole multi");
            // The Transaction builder, too.
            List<OpResult> tx = zk.transaction().create("/java/m/t", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT).delete("/java/m/t", 0).commit();
            Check.eq(2, tx.size(), "transaction results");
            Check.eq(null, zk.exists("/java/m/t", false), "created and deleted in one transaction");
        } finally {
            zk.close();
        }
    }

    private static String codes(List<OpResult> results) {
        List<String> out = new ArrayList<>();
        for (OpResult r : results) {
            out.add(r instanceof OpResult.ErrorResult ? Code.get(((OpResult.ErrorResult) r).getErr()).name() : r.getClass().getSimpleName());
        }
        return out.toString();
    }

    private static void multiFails() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/mf", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/mf/b", Check.bytes("b"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            List<Op> ops = List.of(
                    Op.create("/java/mf/a", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT),
                    Op.check("/java/mf/b", 5),
                    Op.setData("/java/mf/b", Check.bytes("lost"), -1));
            KeeperException e = Check.fails(Code.BADVERSION, () -> zk.multi(ops));
            Check.that(e.getResults() != null, "the failed multi's exception carries no per-op results");
            // Ops before the failing one: OK (rolled back); the failing one: its
            // error; the ones after it: RuntimeInconsistency. Kafka reads these.
            Check.eq("[OK, BADVERSION, RUNTIMEINCONSISTENCY]", codes(e.getResults()), "per-op results");
            Check.eq(null, zk.exists("/java/mf/a", false), "an op of the failed multi was applied");
            Check.eq("b", Check.str(zk.getData("/java/mf/b", false, null)), "an op of the failed multi was applied");

            // The failing op first, through the asynchronous call.
            AtomicReference<String> got = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            zk.multi(List.of(
                    Op.delete("/java/mf/none", -1),
                    Op.create("/java/mf/c", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT)),
                    (rc, path, ctx, results) -> {
                        got.set(Code.get(rc).name() + " " + (results == null ? "null" : codes(results)));
                        done.countDown();
                    }, null);
            Check.await(done, "the asynchronous multi's callback");
            Check.eq("NONODE [NONODE, RUNTIMEINCONSISTENCY]", got.get(), "asynchronous multi's rc and per-op results");
            Check.eq(null, zk.exists("/java/mf/c", false), "an op of the failed multi was applied");
        } finally {
            zk.close();
        }
    }

    private static void multiRead() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/mr", Check.bytes("r"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/mr/x", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            List<OpResult> res = zk.multi(List.of(
                    Op.getData("/java/mr"),
                    Op.getChildren("/java/mr"),
                    Op.getData("/java/mr/none")));
            Check.eq(3, res.size(), "results");
            Check.eq("r", Check.str(((OpResult.GetDataResult) res.get(0)).getData()), "getData's data");
            Check.eq(List.of("x"), ((OpResult.GetChildrenResult) res.get(1)).getChildren(), "getChildren's children");
            Check.that(res.get(2) instanceof OpResult.ErrorResult, "op 3: %s", res.get(2));
            Check.eq(Code.NONODE.intValue(), ((OpResult.ErrorResult) res.get(2)).getErr(), "op 3's error");
        } finally {
            zk.close();
        }
    }

    private static void misc() throws Exception {
        ZooKeeper zk = Check.connect(servers, TIMEOUT);
        try {
            zk.create("/java/misc", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/misc/a", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/misc/a/b", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            zk.create("/java/misc/e", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            Check.eq(3, zk.getAllChildrenNumber("/java/misc"), "getAllChildrenNumber");
            List<String> eph = new ArrayList<>(zk.getEphemerals("/java/misc"));
            Collections.sort(eph);
            Check.eq(List.of("/java/misc/a/b", "/java/misc/e"), eph, "getEphemerals");

            CountDownLatch synced = new CountDownLatch(1);
            AtomicReference<Integer> rc = new AtomicReference<>();
            zk.sync("/java/misc", (r, path, ctx) -> {
                rc.set(r);
                synced.countDown();
            }, null);
            Check.await(synced, "sync's callback");
            Check.eq(0, rc.get(), "sync's rc");

            Check.that(admin.exists("/zookeeper", false) != null, "no /zookeeper");
            Check.that(admin.exists("/zookeeper/quota", false) != null, "no /zookeeper/quota");
            Check.that(admin.exists(ZooDefs.CONFIG_NODE, false) != null, "no /zookeeper/config");
            List<String> system = new ArrayList<>(admin.getChildren("/zookeeper", false));
            Collections.sort(system);
            Check.eq(List.of("config", "quota"), system, "children of /zookeeper");

            List<ClientInfo> who = zk.whoAmI();
            Check.eq(1, who.size(), "whoAmI: identities " + who);
            Check.eq("ip", who.get(0).getAuthScheme(), "whoAmI: scheme");
            Check.eq("127.0.0.1", who.get(0).getUser(), "whoAmI: user");

            Stat as = new Stat();
            List<ACL> acl = zk.getACL("/java/misc", as);
            Check.eq(OPEN_ACL_UNSAFE, acl, "getACL");
            Check.eq(0, as.getAversion(), "aversion");
        } finally {
            zk.close();
        }
    }

    private static void config() throws Exception {
        String first = null;
        for (String addr : addrs) {
            ZooKeeper zk = Check.connect(addr, TIMEOUT);
            try {
                Stat st = new Stat();
                String config = Check.str(zk.getConfig(false, st));
                List<String> lines = Arrays.asList(config.strip().split("\n"));
                Check.eq(addrs.length + 1, lines.size(), "lines of getConfig on " + addr + ":\n" + config);
                for (int i = 0; i < addrs.length; i++) {
                    String line = lines.get(i);
                    Check.that(line.matches("server\\.\\d+=[^:]+:\\d+:\\d+:participant;.*"), "%s: not server.N=HOST:PORT:PORT:participant;CLIENT: %s", addr, line);
                    String client = line.substring(line.indexOf(';') + 1);
                    Check.that(Arrays.asList(addrs).contains(client), "%s: client address %s is none of the cluster's %s", addr, client, servers);
                }
                Check.that(lines.get(addrs.length).matches("version=[0-9a-f]+"), "%s: no version= line last: %s", addr, config);
                Check.eq(config, Check.str(zk.getData(ZooDefs.CONFIG_NODE, false, null)), "/zookeeper/config against getConfig on " + addr);
                if (first == null) {
                    first = config;
                } else {
                    Check.eq(first, config, "getConfig on " + addr + " against on " + addrs[0]);
                }
            } finally {
                zk.close();
            }
        }
    }

    private static void watchOrder() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper zk = Check.connect(addrs[0], TIMEOUT);
        ZooKeeper other = Check.connect(addrs[1], TIMEOUT);
        try {
            zk.create("/java/wo", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/wo/a", Check.bytes("0"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.getData("/java/wo/a", ev, null);
            Check.eq(null, zk.exists("/java/wo/b", ev), "exists of /java/wo/b");
            zk.getChildren("/java/wo", ev);
            zk.exists("/java/wo/a", ev); // the same watcher twice on one path: called once

            // Writes from another session, on another server.
            other.setData("/java/wo/a", Check.bytes("1"), -1);
            other.create("/java/wo/b", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            other.setData("/java/wo/a", Check.bytes("2"), -1); // no watch left on /java/wo/a
            other.delete("/java/wo/b", -1); // nor on /java/wo/b or its parent

            // An asynchronous read of the last write: ZooKeeper delivers every
            // notification before a reply that reflects its change, and the
            // client calls watchers and callbacks in the order they arrive.
            CountDownLatch read = new CountDownLatch(1);
            AtomicReference<List<String>> seen = new AtomicReference<>();
            zk.sync("/java/wo", (rc, p, c) -> { }, null);
            zk.getData("/java/wo/a", false, (rc, path, ctx, data, stat) -> {
                seen.set(ev.pending());
                read.countDown();
            }, null);
            Check.await(read, "getData's callback");
            Check.eq(List.of(
                    "NodeDataChanged /java/wo/a",
                    "NodeCreated /java/wo/b",
                    "NodeChildrenChanged /java/wo"), seen.get(), "events before the reply, in order");
            Check.eq(List.of(), ev.pending(), "events after the reply (one-shot watches fired twice)");
        } finally {
            zk.close();
            other.close();
        }
    }

    private static void persistentWatches() throws Exception {
        Check.Events pw = new Check.Events();
        Check.Events rw = new Check.Events();
        Check.Events marker = new Check.Events();
        ZooKeeper zk = Check.connect(addrs[0], TIMEOUT);
        ZooKeeper other = Check.connect(addrs[1], TIMEOUT);
        try {
            zk.create("/java/pw", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/rw", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.addWatch("/java/pw", pw, AddWatchMode.PERSISTENT);
            zk.addWatch("/java/rw", rw, AddWatchMode.PERSISTENT_RECURSIVE);

            other.setData("/java/pw", Check.bytes("1"), -1);
            other.create("/java/pw/c", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            other.setData("/java/pw/c", Check.bytes("not watched"), -1);
            other.delete("/java/pw/c", -1);
            other.setData("/java/pw", Check.bytes("2"), -1);
            pw.expect(EventType.NodeDataChanged, "/java/pw");
            pw.expect(EventType.NodeChildrenChanged, "/java/pw");
            pw.expect(EventType.NodeChildrenChanged, "/java/pw");
            pw.expect(EventType.NodeDataChanged, "/java/pw");

            other.create("/java/rw/a", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            other.create("/java/rw/a/b", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            other.setData("/java/rw/a/b", Check.bytes("x"), -1);
            other.delete("/java/rw/a/b", -1);
            other.setData("/java/rw", Check.bytes("y"), -1);
            rw.expect(EventType.NodeCreated, "/java/rw/a");
            rw.expect(EventType.NodeCreated, "/java/rw/a/b");
            rw.expect(EventType.NodeDataChanged, "/java/rw/a/b");
            rw.expect(EventType.NodeDeleted, "/java/rw/a/b");
            rw.expect(EventType.NodeDataChanged, "/java/rw");

            // removeWatches: the watcher is told, and fires no more. A one-shot
            // watch set after the writes marks when every earlier event has come.
            zk.removeWatches("/java/rw", rw, Watcher.WatcherType.Any, false);
            rw.expect(EventType.PersistentWatchRemoved, "/java/rw");
            Check.fails(Code.NOWATCHER, () -> zk.removeWatches("/java/rw", rw, Watcher.WatcherType.Any, false));
            zk.create("/java/mark", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.getData("/java/mark", marker, null);
            other.create("/java/rw/a/after", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            other.setData("/java/pw", Check.bytes("3"), -1);
            other.setData("/java/mark", Check.bytes("m"), -1);
            marker.expect(EventType.NodeDataChanged, "/java/mark");
            Check.eq(List.of(), rw.pending(), "events after removeWatches");
            pw.expect(EventType.NodeDataChanged, "/java/pw");
            other.delete("/java/pw", -1);
            pw.expect(EventType.NodeDeleted, "/java/pw");
        } finally {
            zk.close();
            other.close();
        }
    }

    private static void sessionMove() throws Exception {
        Check.Events ev = new Check.Events();
        Check.Events data = new Check.Events();
        ZooKeeper zk = Check.connect(servers, TIMEOUT, ev);
        String first = Check.remote(zk);
        String otherAddr = Arrays.stream(addrs).filter(a -> !a.equals(first)).findFirst().get();
        ZooKeeper other = Check.connect(otherAddr, TIMEOUT);
        try {
            long id = zk.getSessionId();
            zk.create("/java/mv", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.create("/java/mv/eph", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
            zk.create("/java/mv/w", Check.bytes("0"), OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            zk.getData("/java/mv/w", data, null);
            zk.exists("/java/mv/new", data);
            // More watches than one setWatches2 carries (the client splits them
            // into requests of 128 KiB, ZOOKEEPER-706): each must come back.
            Check.Events many = new Check.Events();
            String pad = "x".repeat(100);
            int n = 2000;
            CountDownLatch set = new CountDownLatch(n);
            for (int i = 0; i < n; i++) {
                zk.exists("/java/mv/absent-" + pad + "-" + i, many, (rc, path, ctx, stat) -> set.countDown(), null);
            }
            Check.await(set, n + " exists watches set");
            int from = ev.stateCount();

            Check.kill(first);
            from = ev.awaitState(KeeperState.Disconnected, from);
            ev.awaitState(KeeperState.SyncConnected, from);
            Check.eq(id, zk.getSessionId(), "session id after the move");
            Check.that(!Check.remote(zk).equals(first), "still connected to the killed server %s", first);
            Check.that(zk.exists("/java/mv/eph", false) != null, "the ephemeral went with the server");
            Check.sync(other, "/java/mv/eph");
            Check.eq(id, other.exists("/java/mv/eph", false).getEphemeralOwner(), "the ephemeral's owner, seen by another session");

            other.setData("/java/mv/w", Check.bytes("1"), -1);
            data.expect(EventType.NodeDataChanged, "/java/mv/w");
            other.create("/java/mv/new", null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
            data.expect(EventType.NodeCreated, "/java/mv/new");
            for (int i : new int[] {0, n / 2, n - 1}) {
                other.create("/java/mv/absent-" + pad + "-" + i, null, OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                many.expect(EventType.NodeCreated, "/java/mv/absent-" + pad + "-" + i);
            }
            zk.delete("/java/mv/eph", -1);
        } finally {
            zk.close();
            other.close();
        }
    }

    private static void expiry() throws Exception {
        Check.Events ev = new Check.Events();
        Check.Events gone = new Check.Events();
        // An observer of its own: the session-move check may have killed admin's server.
        ZooKeeper observer = Check.connect(servers, TIMEOUT);
        try (Check.Proxy proxy = new Check.Proxy(servers)) {
            ZooKeeper zk = Check.connect(proxy.address(), 4000, ev);
            try {
                zk.create("/java/exp", null, OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
                Check.sync(observer, "/java/exp");
                Check.that(observer.exists("/java/exp", gone) != null, "the ephemeral is not there");
                int from = ev.stateCount();
                proxy.cut();
                from = ev.awaitState(KeeperState.Disconnected, from);
                // The cluster expires the session: its ephemeral goes.
                gone.expect(EventType.NodeDeleted, "/java/exp");
                proxy.heal();
                ev.awaitState(KeeperState.Expired, from);
                Check.fails(Code.SESSIONEXPIRED, () -> zk.getData("/java/exp", false, null));
                Check.that(!zk.getState().isAlive(), "the expired session's client is %s", zk.getState());
                // Resuming the expired session by its id and password: Expired too.
                Check.Events again = new Check.Events();
                ZooKeeper resumed = new ZooKeeper(servers, 4000, again, zk.getSessionId(), zk.getSessionPasswd());
                try {
                    again.awaitState(KeeperState.Expired, 0);
                } finally {
                    resumed.close();
                }
            } finally {
                zk.close();
            }
        } finally {
            observer.close();
        }
    }
}
