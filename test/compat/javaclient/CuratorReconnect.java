// CuratorReconnect: Curator 5 (Debian's jars) on ZooKeeper's Java client,
// unchanged, through dropped connections (issue 35); the
// "curator-reconnect" suite of make compat, against the cluster given by
// COMPAT_SERVERS. Each client under test reaches one server through the
// proxy of Check, whose cut drops its connection; Curator reports
// SUSPENDED, then RECONNECTED, and its recipes must go on as if nothing
// had happened: an InterProcessMutex held through the drop is still held,
// its release after the drop really releases it, and a CuratorCache sees
// the changes made after it. Everything it creates is under /curator.
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.data.Stat;

public final class CuratorReconnect {
    private static final int DROPS = 5;
    private static String servers;
    private static String[] addrs;

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the client addresses of the cluster, comma-separated");
            System.exit(2);
        }
        addrs = servers.split(",");
        Check.only = args;
        CuratorFramework admin = client(servers);
        try {
            admin.create().forPath("/curator");
            Check.test("InterProcessMutex: held through " + DROPS + " dropped connections, released after each, taken by another client",
                    CuratorReconnect::mutex);
            Check.test("CuratorCache: creates, changes and deletes after a dropped connection", CuratorReconnect::cache);
            Check.sync(admin.getZookeeperClient().getZooKeeper(), "/curator"); // so that its server lists every node below
            admin.delete().deletingChildrenIfNeeded().forPath("/curator");
        } finally {
            admin.close();
        }
        System.exit(Check.finish("curator-reconnect"));
    }

    /**
     * A started client, connected (bounded wait). Without the ensemble
     * tracker, which would replace a proxy's address with the servers'.
     */
    private static CuratorFramework client(String connect) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(connect).sessionTimeoutMs(15_000)
                .connectionTimeoutMs(15_000).retryPolicy(new ExponentialBackoffRetry(100, 10, 2000)).ensembleTracker(false).build();
        c.start();
        if (!c.blockUntilConnected((int) Check.WAIT_MS, TimeUnit.MILLISECONDS)) {
            c.close();
            throw new AssertionError("Curator did not connect to " + connect);
        }
        return c;
    }

    /** The connection states a client reports, in order. */
    private static BlockingQueue<ConnectionState> states(CuratorFramework c) {
        BlockingQueue<ConnectionState> q = new LinkedBlockingQueue<>();
        c.getConnectionStateListenable().addListener((client, state) -> q.add(state));
        return q;
    }

    private static ConnectionState next(BlockingQueue<ConnectionState> q, String what) throws InterruptedException {
        ConnectionState s = q.poll(Check.WAIT_MS, TimeUnit.MILLISECONDS);
        Check.that(s != null, "no connection state within %d ms: %s", Check.WAIT_MS, what);
        return s;
    }

    /** Drops the client's connection and waits until Curator reports it back, in the same session. */
    private static void drop(CuratorFramework c, BlockingQueue<ConnectionState> q, Check.Proxy proxy) throws Exception {
        long id = c.getZookeeperClient().getZooKeeper().getSessionId();
        proxy.cut();
        proxy.heal();
        ConnectionState s;
        do { // the first connection's CONNECTED may come to the listener late
            s = next(q, "SUSPENDED after the drop");
        } while (s == ConnectionState.CONNECTED);
        Check.eq(ConnectionState.SUSPENDED, s, "state after the drop");
        Check.eq(ConnectionState.RECONNECTED, next(q, "RECONNECTED after the drop"), "state after the drop");
        Check.eq(id, c.getZookeeperClient().getZooKeeper().getSessionId(), "session after the drop");
    }

    private static byte[] intBytes(int n) {
        return ByteBuffer.allocate(4).putInt(n).array();
    }

    /**
     * Client a (through the proxy) takes the lock, its connection drops,
     * and it must still hold it (its lock node there, b unable to take
     * it); then, holding it, it increments a counter with a version check
     * and releases: b must take the lock at once, its release leaves no
     * lock node. Each round after a drop, DROPS times.
     */
    private static void mutex() throws Exception {
        try (Check.Proxy proxy = new Check.Proxy(addrs[0])) {
            CuratorFramework a = client(proxy.addressTwice());
            CuratorFramework b = client(servers);
            try {
                BlockingQueue<ConnectionState> q = states(a);
                InterProcessMutex ma = new InterProcessMutex(a, "/curator/rmutex");
                InterProcessMutex mb = new InterProcessMutex(b, "/curator/rmutex");
                a.create().forPath("/curator/rcounter", intBytes(0));
                // The application's other writes on a's connection.
                for (int i = 0; i < 30; i++) {
                    a.setData().withVersion(i).forPath("/curator/rcounter", intBytes(0));
                }
                int version = 30;
                for (int round = 0; round < DROPS; round++) {
                    Check.that(ma.acquire(Check.WAIT_MS, TimeUnit.MILLISECONDS), "round %d: a did not take the lock", round);
                    List<String> held = b.getChildren().forPath("/curator/rmutex");
                    Check.eq(1, held.size(), "round " + round + ": lock nodes while a holds the lock");
                    drop(a, q, proxy);
                    Check.that(ma.isOwnedByCurrentThread(), "round %d: a lost the lock in the drop", round);
                    Check.sync(b.getZookeeperClient().getZooKeeper(), "/curator/rmutex");
                    Check.eq(held, b.getChildren().forPath("/curator/rmutex"), "round " + round + ": lock nodes after the drop");
                    Check.that(!mb.acquire(100, TimeUnit.MILLISECONDS), "round %d: b took the lock a holds", round);
                    Stat st = a.setData().withVersion(version).forPath("/curator/rcounter", intBytes(round + 1));
                    version++;
                    Check.eq(version, st.getVersion(), "round " + round + ": the counter's version after a's set");
                    ma.release();
                    Check.that(mb.acquire(Check.WAIT_MS, TimeUnit.MILLISECONDS), "round %d: b did not take the lock a released", round);
                    mb.release();
                    Check.eq(List.of(), b.getChildren().forPath("/curator/rmutex"), "round " + round + ": lock nodes after both released");
                }
                Check.eq(ByteBuffer.wrap(intBytes(DROPS)), ByteBuffer.wrap(b.getData().forPath("/curator/rcounter")), "the counter");
            } finally {
                a.close();
                b.close();
            }
        }
    }

    /**
     * A CuratorCache of a client whose connection drops, then changes by
     * another client and by its own: each brings its event.
     */
    private static void cache() throws Exception {
        try (Check.Proxy proxy = new Check.Proxy(addrs[0])) {
            CuratorFramework c = client(proxy.addressTwice());
            CuratorFramework writer = client(servers);
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            CountDownLatch initialized = new CountDownLatch(1);
            writer.create().forPath("/curator/rcache", "root".getBytes());
            CuratorCache cache = CuratorCache.build(c, "/curator/rcache");
            cache.listenable().addListener(CuratorCacheListener.builder()
                    .forCreates(n -> events.add("create " + n.getPath() + " " + new String(n.getData())))
                    .forChanges((o, n) -> events.add("change " + n.getPath() + " " + new String(n.getData())))
                    .forDeletes(o -> events.add("delete " + o.getPath()))
                    .forInitialized(initialized::countDown)
                    .build());
            BlockingQueue<ConnectionState> q = states(c);
            try {
                cache.start();
                Check.await(initialized, "the cache's initial load");
                Check.eq("create /curator/rcache root", events.poll(), "initial load");
                drop(c, q, proxy);
                // Each change, by whom, then the event it must bring.
                String[][] steps = {
                    {"writer", "create /curator/rcache/a 1", "create /curator/rcache/a 1"},
                    {"writer", "set /curator/rcache/a 2", "change /curator/rcache/a 2"},
                    {"own", "create /curator/rcache/b x", "create /curator/rcache/b x"},
                    {"own", "set /curator/rcache/b y", "change /curator/rcache/b y"},
                    {"writer", "delete /curator/rcache/a", "delete /curator/rcache/a"},
                    {"own", "delete /curator/rcache/b", "delete /curator/rcache/b"},
                };
                for (String[] step : steps) {
                    CuratorFramework by = step[0].equals("own") ? c : writer;
                    String[] op = step[1].split(" ");
                    switch (op[0]) {
                    case "create" -> by.create().forPath(op[1], op[2].getBytes());
                    case "set" -> by.setData().forPath(op[1], op[2].getBytes());
                    case "delete" -> by.delete().forPath(op[1]);
                    default -> throw new IllegalStateException(op[0]);
                    }
                    String got = events.poll(Check.WAIT_MS, TimeUnit.MILLISECONDS);
                    Check.eq(step[2], got, "the cache's event for " + step[0] + "'s " + step[1]);
                }
                Check.eq(1, cache.size(), "nodes in the cache");
                List<String> more = new ArrayList<>();
                events.drainTo(more);
                Check.eq(List.of(), more, "more events");
            } finally {
                cache.close();
                c.close();
                writer.close();
            }
        }
    }
}
