// CuratorSuite: Apache Curator 5 (Debian's curator-framework, -recipes and
// -client jars) on ZooKeeper's Java client, unchanged, against the cluster
// given by COMPAT_SERVERS: InterProcessMutex under contention, LeaderLatch,
// and CuratorCache (which Curator builds on a persistent recursive watch).
// The "curator" suite of make compat. Everything it creates is under
// /curator.
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorSuite {
    private static String servers;

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the client addresses of the cluster, comma-separated");
            System.exit(2);
        }
        Check.only = args;
        CuratorFramework admin = client();
        try {
            admin.create().forPath("/curator");
            Check.test("EnsembleTracker: given one server, Curator learns the others from /zookeeper/config", CuratorSuite::ensemble);
            Check.test("InterProcessMutex: mutual exclusion under contention (a shared counter)", CuratorSuite::mutex);
            Check.test("LeaderLatch: one leader at a time, the next when the leader leaves", CuratorSuite::leaderLatch);
            Check.test("CuratorCache: creates, changes and deletes below its path", CuratorSuite::cache);
            admin.delete().deletingChildrenIfNeeded().forPath("/curator");
        } finally {
            admin.close();
        }
        System.exit(Check.finish("curator"));
    }

    /** A started client, connected (bounded wait). */
    private static CuratorFramework client() throws Exception {
        return client(servers);
    }

    private static CuratorFramework client(String servers) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(servers, 15_000, 15_000, new ExponentialBackoffRetry(100, 10, 2000));
        c.start();
        if (!c.blockUntilConnected((int) Check.WAIT_MS, TimeUnit.MILLISECONDS)) {
            c.close();
            throw new AssertionError("Curator did not connect to " + servers);
        }
        return c;
    }

    /**
     * Curator 5 reads /zookeeper/config (with a watch) as it connects and
     * replaces its connection string with the client addresses listed
     * there: a server whose configuration lacks some would leave its
     * clients with no other server to fail over to.
     */
    private static void ensemble() throws Exception {
        Set<String> all = new TreeSet<>(Arrays.asList(servers.split(",")));
        for (String addr : all) {
            CuratorFramework c = client(addr);
            try {
                // It reads the configuration once, as it connects: a few seconds are plenty.
                Check.waitUntil("a connection string of every server from " + addr + "'s configuration, not "
                        + c.getZookeeperClient().getCurrentConnectionString(), 10_000,
                        () -> new TreeSet<>(Arrays.asList(c.getZookeeperClient().getCurrentConnectionString().split(","))).equals(all));
            } finally {
                c.close();
            }
        }
    }

    private static byte[] intBytes(int n) {
        return ByteBuffer.allocate(4).putInt(n).array();
    }

    private static int bytesInt(byte[] b) {
        return ByteBuffer.wrap(b).getInt();
    }

    /**
     * Clients, each in its own thread and session, take the same lock in
     * turn and, holding it, read a counter znode and write it back plus one
     * (no version check: only the lock keeps increments from being lost).
     * A count in this process checks that no two hold it at once.
     */
    private static void mutex() throws Exception {
        final int clients = 4;
        final int rounds = 10;
        CuratorFramework setup = client();
        setup.create().forPath("/curator/counter", intBytes(0));
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        List<CuratorFramework> cs = new ArrayList<>();
        try {
            for (int i = 0; i < clients; i++) {
                CuratorFramework c = client();
                cs.add(c);
                Thread t = new Thread(() -> {
                    InterProcessMutex m = new InterProcessMutex(c, "/curator/mutex");
                    try {
                        for (int r = 0; r < rounds; r++) {
                            Check.that(m.acquire(Check.WAIT_MS, TimeUnit.MILLISECONDS), "lock not acquired within %d ms", Check.WAIT_MS);
                            try {
                                int now = inside.incrementAndGet();
                                most.accumulateAndGet(now, Math::max);
                                int v = bytesInt(c.getData().forPath("/curator/counter"));
                                Thread.yield();
                                c.setData().forPath("/curator/counter", intBytes(v + 1));
                                inside.decrementAndGet();
                            } finally {
                                m.release();
                            }
                        }
                    } catch (Throwable e) {
                        errors.add(e);
                    }
                }, "mutex-" + i);
                threads.add(t);
            }
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join(4 * Check.WAIT_MS);
                Check.that(!t.isAlive(), "%s still running", t.getName());
            }
            Check.that(errors.isEmpty(), "errors in the clients: %s", errors);
            Check.eq(1, most.get(), "most clients holding the lock at once");
            Check.eq(clients * rounds, bytesInt(setup.getData().forPath("/curator/counter")), "counter");
            Check.eq(List.of(), setup.getChildren().forPath("/curator/mutex"), "lock nodes left");
        } finally {
            cs.forEach(CuratorFramework::close);
            setup.close();
        }
    }

    private static void leaderLatch() throws Exception {
        final int n = 3;
        List<CuratorFramework> cs = new ArrayList<>();
        List<LeaderLatch> latches = new ArrayList<>();
        AtomicInteger became = new AtomicInteger();
        try {
            for (int i = 0; i < n; i++) {
                CuratorFramework c = client();
                cs.add(c);
                LeaderLatch l = new LeaderLatch(c, "/curator/leader", "p" + i);
                l.addListener(new LeaderLatchListener() {
                    @Override
                    public void isLeader() {
                        became.incrementAndGet();
                    }

                    @Override
                    public void notLeader() {}
                });
                latches.add(l);
            }
            for (LeaderLatch l : latches) {
                l.start();
            }
            List<LeaderLatch> open = new ArrayList<>(latches);
            String previous = null;
            for (int round = 0; round < n; round++) {
                Check.waitUntil("a leader among " + open.size(), () -> open.stream().filter(LeaderLatch::hasLeadership).count() == 1);
                LeaderLatch leader = open.stream().filter(LeaderLatch::hasLeadership).findFirst().get();
                Check.eq(1L, open.stream().filter(LeaderLatch::hasLeadership).count(), "leaders at once");
                Check.that(!leader.getId().equals(previous), "the leader that left leads again");
                for (LeaderLatch l : open) {
                    Check.eq(leader.getId(), l.getLeader().getId(), "the leader as " + l.getId() + " sees it");
                }
                Check.eq(open.size(), leader.getParticipants().size(), "participants");
                previous = leader.getId();
                leader.close();
                open.remove(leader);
            }
            Check.eq(n, became.get(), "isLeader calls");
        } finally {
            for (LeaderLatch l : latches) {
                if (l.getState() == LeaderLatch.State.STARTED) {
                    l.close();
                }
            }
            cs.forEach(CuratorFramework::close);
        }
    }

    private static void cache() throws Exception {
        CuratorFramework c = client();
        CuratorFramework writer = client();
        BlockingQueue<String> events = new LinkedBlockingQueue<>();
        CountDownLatch initialized = new CountDownLatch(1);
        writer.create().forPath("/curator/cache", "root".getBytes());
        writer.create().forPath("/curator/cache/pre", "p".getBytes());
        CuratorCache cache = CuratorCache.build(c, "/curator/cache");
        cache.listenable().addListener(CuratorCacheListener.builder()
                .forCreates(n -> events.add("create " + n.getPath() + " " + new String(n.getData())))
                .forChanges((o, n) -> events.add("change " + n.getPath() + " " + new String(n.getData())))
                .forDeletes(o -> events.add("delete " + o.getPath()))
                .forInitialized(initialized::countDown)
                .build());
        try {
            cache.start();
            Check.await(initialized, "the cache's initial load");
            List<String> initial = new ArrayList<>();
            events.drainTo(initial);
            initial.sort(null);
            Check.eq(List.of("create /curator/cache root", "create /curator/cache/pre p"), initial, "initial load");

            // Each change, then the event it must bring (the cache reads the
            // node after the event, so a second change before the read would
            // fold into the first).
            String[][] steps = {
                {"create /curator/cache/a 1", "create /curator/cache/a 1"},
                {"set /curator/cache/a 2", "change /curator/cache/a 2"},
                {"create /curator/cache/a/b x", "create /curator/cache/a/b x"},
                {"set /curator/cache/a/b y", "change /curator/cache/a/b y"},
                {"delete /curator/cache/a/b", "delete /curator/cache/a/b"},
                {"delete /curator/cache/a", "delete /curator/cache/a"},
                {"set /curator/cache r2", "change /curator/cache r2"},
            };
            for (String[] step : steps) {
                String[] op = step[0].split(" ");
                switch (op[0]) {
                case "create" -> writer.create().forPath(op[1], op[2].getBytes());
                case "set" -> writer.setData().forPath(op[1], op[2].getBytes());
                case "delete" -> writer.delete().forPath(op[1]);
                default -> throw new IllegalStateException(op[0]);
                }
                String got = events.poll(Check.WAIT_MS, TimeUnit.MILLISECONDS);
                Check.eq(step[1], got, "the cache's event for " + step[0]);
            }
            Check.that(cache.get("/curator/cache/a").isEmpty(), "the cache still has /curator/cache/a");
            Check.eq("r2", new String(cache.get("/curator/cache").get().getData()), "the cache's data of /curator/cache");
            Check.eq(2, cache.size(), "nodes in the cache");
            Check.that(events.isEmpty(), "more events: %s", events);
        } finally {
            cache.close();
            c.close();
            writer.close();
        }
    }
}
