// CuratorLockDelay: the curator-lockdelay suite of make compat (coordd
// only: ZooKeeper has no lock-delay). Curator 5's InterProcessMutex
// (Debian's jars), unchanged, against a coordd cluster started with
// --lock-delay PREFIX=DURATION (COMPAT_LOCK_DELAY, such as /lockdelay=4s).
//
// A holder is a JVM of its own ("CuratorLockDelay holder PATH MARKER"): it
// takes the mutex at PATH and creates the ephemeral MARKER outside the
// prefix, whose deletion tells the suite when the holder's session expired.
// Stopped with SIGSTOP past its session timeout, the holder loses its
// session: the waiter must acquire only once the lock-delay has passed since
// that expiry, and the holder, resumed, must be told its connection is LOST.
// A holder that releases the mutex, or closes its client, hands it over at
// once. Everything it creates is under the prefix and /lockdelay-markers;
// every holder process is killed at the end of its check. Compiled with the
// javaclient suites (it uses their Check).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.CuratorWatcher;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.data.Stat;

public final class CuratorLockDelay {
    private static final String MARKERS = "/lockdelay-markers";
    private static final int HOLDER_TIMEOUT_MS = 3000;

    private static String servers;
    private static String prefix;
    private static long delayMs;

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the client addresses of the cluster, comma-separated");
            System.exit(2);
        }
        if (args.length == 3 && args[0].equals("holder")) {
            System.exit(holder(args[1], args[2]));
        }
        parseRule(System.getenv("COMPAT_LOCK_DELAY"));
        Check.only = args;
        Check.test("InterProcessMutex: a holder that releases hands over at once", () -> handover("release"));
        Check.test("InterProcessMutex: a holder that closes its client hands over at once", () -> handover("close"));
        Check.test("InterProcessMutex: a holder stopped past its session timeout hands over only after the lock-delay", CuratorLockDelay::expiry);
        CuratorFramework admin = client(15_000);
        try {
            for (String p : new String[] {prefix, MARKERS}) {
                if (admin.checkExists().forPath(p) != null) {
                    admin.delete().deletingChildrenIfNeeded().forPath(p);
                }
            }
        } finally {
            admin.close();
        }
        System.exit(Check.finish("curator-lockdelay"));
    }

    /** PREFIX=DURATION, as coordd's --lock-delay (seconds or ms). */
    private static void parseRule(String rule) {
        Matcher m = Pattern.compile("(/[^=]*)=([0-9.]+)(ms|s)").matcher(rule == null ? "" : rule);
        if (!m.matches()) {
            System.err.println("COMPAT_LOCK_DELAY: want PREFIX=DURATION such as /lockdelay=4s, not " + rule);
            System.exit(2);
        }
        prefix = m.group(1);
        double v = Double.parseDouble(m.group(2));
        delayMs = (long) (m.group(3).equals("ms") ? v : v * 1000);
    }

    private static CuratorFramework client(int sessionTimeoutMs) throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.newClient(servers, sessionTimeoutMs, 15_000, new ExponentialBackoffRetry(100, 10, 2000));
        c.start();
        if (!c.blockUntilConnected((int) Check.WAIT_MS, TimeUnit.MILLISECONDS)) {
            c.close();
            throw new AssertionError("Curator did not connect to " + servers);
        }
        return c;
    }

    /** A holder process and the lines it prints. */
    private static final class Holder implements AutoCloseable {
        final Process p;
        final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        final PrintWriter in;

        Holder(String path, String marker) throws Exception {
            String java = ProcessHandle.current().info().command().orElse("java");
            p = new ProcessBuilder(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", System.getProperty("java.class.path"),
                    "CuratorLockDelay", "holder", path, marker).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            in = new PrintWriter(new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8), true);
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String l; (l = r.readLine()) != null;) {
                        lines.add(l.trim());
                    }
                } catch (Exception e) {
                    // the holder went
                }
            }, "holder-out");
            t.setDaemon(true);
            t.start();
        }

        /** Waits for a line starting with word, and returns it. */
        String expect(String word) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Check.WAIT_MS);
            while (true) {
                long left = deadline - System.nanoTime();
                Check.that(left > 0, "the holder did not say %s within %d ms", word, Check.WAIT_MS);
                String l = lines.poll(left, TimeUnit.NANOSECONDS);
                if (l == null) {
                    continue;
                }
                Check.that(!l.startsWith("error"), "holder: %s", l);
                if (l.startsWith(word)) {
                    return l;
                }
            }
        }

        void signal(String sig) throws Exception {
            Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start();
            Check.that(k.waitFor(Check.WAIT_MS, TimeUnit.MILLISECONDS) && k.exitValue() == 0, "kill -%s %d failed", sig, p.pid());
        }

        @Override
        public void close() throws Exception {
            if (p.isAlive()) {
                signal("CONT");
                p.destroyForcibly();
            }
            p.waitFor(Check.WAIT_MS, TimeUnit.MILLISECONDS);
        }
    }

    /**
     * A contender on another session, acquiring in a thread, which releases
     * when told to (an InterProcessMutex is released by the thread that
     * holds it).
     */
    private static final class Waiter {
        final InterProcessMutex m;
        final BlockingQueue<Object> acquired = new LinkedBlockingQueue<>();
        final CountDownLatch done = new CountDownLatch(1);
        final Thread t;

        Waiter(CuratorFramework c, String path) {
            m = new InterProcessMutex(c, path);
            t = new Thread(() -> {
                try {
                    if (m.acquire(2 * Check.WAIT_MS, TimeUnit.MILLISECONDS)) {
                        acquired.add(System.nanoTime());
                        done.await(Check.WAIT_MS, TimeUnit.MILLISECONDS);
                        m.release();
                    }
                } catch (Exception e) {
                    acquired.add(e);
                }
            }, "waiter");
            t.setDaemon(true);
            t.start();
        }

        void release() throws InterruptedException {
            done.countDown();
            t.join(Check.WAIT_MS);
        }

        long when() throws Exception {
            Object v = acquired.poll(2 * Check.WAIT_MS, TimeUnit.MILLISECONDS);
            Check.that(v != null, "the waiter did not acquire within %d ms", 2 * Check.WAIT_MS);
            Check.that(v instanceof Long, "the waiter's acquire: %s", v);
            return (Long) v;
        }
    }

    private static void waitQueued(CuratorFramework c, String path) throws Exception {
        Check.waitUntil("the waiter queued on " + path, () -> c.getChildren().forPath(path).size() >= 2);
    }

    /** A holder that releases or closes its client hands over at once. */
    private static void handover(String how) throws Exception {
        String path = prefix + "/curator-" + how;
        CuratorFramework c = client(15_000);
        try (Holder h = new Holder(path, MARKERS + "/curator-" + how)) {
            h.expect("held");
            Waiter w = new Waiter(c, path);
            waitQueued(c, path);
            long t0 = System.nanoTime();
            h.in.println(how);
            h.expect("done");
            long waited = (w.when() - t0) / 1_000_000;
            Check.that(waited < delayMs / 2, "acquired %d ms after the %s, not at once (lock-delay %d ms)", waited, how, delayMs);
            w.release();
            System.out.printf("     the waiter acquired %d ms after the holder's %s%n", waited, how);
        } finally {
            c.close();
        }
    }

    private static void expiry() throws Exception {
        String path = prefix + "/curator-expiry";
        String marker = MARKERS + "/curator-expiry";
        CuratorFramework c = client(15_000);
        try (Holder h = new Holder(path, marker)) {
            long sid = Long.parseLong(h.expect("held").split(" ")[1]);
            Waiter w = new Waiter(c, path);
            waitQueued(c, path);
            BlockingQueue<Long> gone = new LinkedBlockingQueue<>();
            Stat st = c.checkExists().usingWatcher((CuratorWatcher) ev -> {
                if (ev.getType() == EventType.NodeDeleted) {
                    gone.add(System.nanoTime());
                }
            }).forPath(marker);
            Check.that(st != null, "no marker %s", marker);
            h.signal("STOP");
            long stopped = System.nanoTime();
            Long expired = gone.poll(Check.WAIT_MS, TimeUnit.MILLISECONDS);
            Check.that(expired != null, "the holder's session did not expire within %d ms of SIGSTOP", Check.WAIT_MS);
            Check.that(w.acquired.isEmpty(), "the waiter acquired when the holder's session expired");
            // During the delay the holder's node is there, still owned by it.
            List<String> kids = new ArrayList<>(c.getChildren().forPath(path));
            kids.sort(Comparator.comparing(k -> k.substring(k.length() - 10)));
            Stat first = c.checkExists().forPath(path + "/" + kids.get(0));
            Check.that(first != null && first.getEphemeralOwner() == sid, "the mutex's first node is owned by %s, not the expired holder %x",
                    first == null ? "nobody" : Long.toHexString(first.getEphemeralOwner()), sid);
            long waited = (w.when() - expired) / 1_000_000;
            Check.that(waited >= delayMs - 500, "acquired %d ms after the holder's session expired: before the lock-delay of %d ms ended", waited, delayMs);
            Check.that(waited <= delayMs + 3000, "acquired %d ms after the holder's session expired: long after the lock-delay of %d ms", waited, delayMs);
            // Resumed, the holder is told its connection is lost.
            h.signal("CONT");
            h.expect("lost");
            w.release();
            System.out.printf("     the session expired %d ms after SIGSTOP; the waiter acquired %d ms after the expiry (lock-delay %d ms)%n",
                    (expired - stopped) / 1_000_000, waited, delayMs);
        } finally {
            c.close();
        }
    }

    /**
     * The holder process: takes the mutex, creates the marker, says "held
     * SESSION"; on "release" releases the mutex, on "close" closes its
     * client (each then says "done"); says "lost" when Curator reports the
     * connection LOST.
     */
    private static int holder(String path, String marker) {
        try {
            CuratorFramework c = CuratorFrameworkFactory.newClient(servers, HOLDER_TIMEOUT_MS, 15_000, new ExponentialBackoffRetry(100, 10, 2000));
            c.getConnectionStateListenable().addListener((cl, s) -> {
                if (s == ConnectionState.LOST) {
                    System.out.println("lost");
                    System.out.flush();
                }
            });
            c.start();
            InterProcessMutex m = new InterProcessMutex(c, path);
            if (!m.acquire(Check.WAIT_MS, TimeUnit.MILLISECONDS)) {
                System.out.println("error: the mutex was not acquired");
                return 1;
            }
            c.create().creatingParentsIfNeeded().withMode(CreateMode.EPHEMERAL).forPath(marker);
            System.out.println("held " + c.getZookeeperClient().getZooKeeper().getSessionId());
            System.out.flush();
            BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String l; (l = r.readLine()) != null;) {
                if (l.trim().equals("release")) {
                    m.release();
                } else if (l.trim().equals("close")) {
                    c.close();
                }
                System.out.println("done");
                System.out.flush();
            }
            return 0;
        } catch (Exception e) {
            System.out.println("error: " + e);
            return 1;
        }
    }
}
