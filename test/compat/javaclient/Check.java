// Check is the small test runner that the Java suites of make compat share
// (ClientSuite: ZooKeeper's Java client; CuratorSuite: Curator's recipes):
// named checks that print "ok NAME" or "FAIL NAME: why", waits that give up
// at a deadline, a watcher that queues what it is called with, a session
// opener, a way to kill the server a session is connected to, and a TCP
// proxy that can cut a client off. Nothing waits on a timer alone: every
// wait is for a condition, bounded by WAIT_MS.
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.Watcher.Event.EventType;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooKeeper;

final class Check {
    private Check() {}

    /** The bound of every wait, in milliseconds (-Dcompat.wait=...). */
    static final long WAIT_MS = Long.getLong("compat.wait", 30_000);

    private static int passed;
    private static int failed;

    interface Body {
        void run() throws Exception;
    }

    interface Cond {
        boolean ok() throws Exception;
    }

    /** When not empty, only the checks whose names contain one of these run. */
    static String[] only = new String[0];

    /** Runs one named check and prints its outcome. */
    static void test(String name, Body body) {
        if (only.length > 0 && java.util.Arrays.stream(only).noneMatch(name::contains)) {
            return;
        }
        long t0 = System.nanoTime();
        try {
            body.run();
            passed++;
            System.out.printf("ok   %s (%d ms)%n", name, (System.nanoTime() - t0) / 1_000_000);
        } catch (Throwable t) {
            failed++;
            System.out.printf("FAIL %s: %s%n", name, t instanceof AssertionError ? t.getMessage() : t.toString());
            System.err.println("FAIL " + name + ":");
            t.printStackTrace(System.err);
        }
        System.out.flush();
    }

    /** Prints the summary; the process's exit status. */
    static int finish(String suite) {
        System.out.printf("%s: %d passed, %d failed%n", suite, passed, failed);
        return failed == 0 ? 0 : 1;
    }

    static void that(boolean cond, String format, Object... args) {
        if (!cond) {
            throw new AssertionError(String.format(format, args));
        }
    }

    static void eq(Object want, Object got, String what) {
        if (!Objects.equals(want, got)) {
            throw new AssertionError(what + ": want " + want + ", got " + got);
        }
    }

    /** Waits until cond holds, polling, for at most WAIT_MS. */
    static void waitUntil(String what, Cond cond) throws Exception {
        waitUntil(what, WAIT_MS, cond);
    }

    /** Waits until cond holds, polling, for at most ms milliseconds. */
    static void waitUntil(String what, long ms, Cond cond) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!cond.ok()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + ms + " ms: " + what);
            }
            Thread.sleep(50);
        }
    }

    /** Runs body, which must fail with a KeeperException of the given code. */
    static KeeperException fails(KeeperException.Code code, Body body) throws Exception {
        try {
            body.run();
        } catch (KeeperException e) {
            eq(code, e.code(), "error code");
            return e;
        }
        throw new AssertionError("no error; want " + code);
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /**
     * A watcher that keeps what it is called with: node events in a queue,
     * connection states in a list (a session's default watcher gets both).
     */
    static final class Events implements Watcher {
        private final BlockingQueue<WatchedEvent> nodes = new LinkedBlockingQueue<>();
        private final List<KeeperState> states = new ArrayList<>();

        @Override
        public void process(WatchedEvent e) {
            if (e.getType() == EventType.None) {
                synchronized (states) {
                    states.add(e.getState());
                    states.notifyAll();
                }
            } else {
                nodes.add(e);
            }
        }

        /** The next node event, waiting at most WAIT_MS. */
        WatchedEvent next() throws InterruptedException {
            WatchedEvent e = nodes.poll(WAIT_MS, TimeUnit.MILLISECONDS);
            if (e == null) {
                throw new AssertionError("no watch event within " + WAIT_MS + " ms");
            }
            return e;
        }

        /** The next node event must be this one. */
        void expect(EventType type, String path) throws InterruptedException {
            WatchedEvent e = next();
            eq(type + " " + path, e.getType() + " " + e.getPath(), "watch event");
        }

        /** Node events that have arrived and not been taken, as "Type path". */
        List<String> pending() {
            List<WatchedEvent> l = new ArrayList<>();
            nodes.drainTo(l);
            List<String> out = new ArrayList<>();
            for (WatchedEvent e : l) {
                out.add(e.getType() + " " + e.getPath());
            }
            return out;
        }

        /** Waits until the state has been reported (at or after index from). */
        int awaitState(KeeperState want, int from) throws InterruptedException {
            long deadline = System.currentTimeMillis() + WAIT_MS;
            synchronized (states) {
                while (true) {
                    for (int i = from; i < states.size(); i++) {
                        if (states.get(i) == want) {
                            return i + 1;
                        }
                    }
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) {
                        throw new AssertionError("no " + want + " within " + WAIT_MS + " ms; states seen: " + states);
                    }
                    states.wait(left);
                }
            }
        }

        int stateCount() {
            synchronized (states) {
                return states.size();
            }
        }
    }

    /** Opens a session and waits until it is connected. */
    static ZooKeeper connect(String servers, int timeoutMs, Events events) throws Exception {
        ZooKeeper zk = new ZooKeeper(servers, timeoutMs, events);
        try {
            events.awaitState(KeeperState.SyncConnected, 0);
        } catch (AssertionError e) {
            zk.close();
            throw e;
        }
        return zk;
    }

    static ZooKeeper connect(String servers, int timeoutMs) throws Exception {
        return connect(servers, timeoutMs, new Events());
    }

    private static final Pattern REMOTE = Pattern.compile("remoteserver:\\S*?/?([0-9.]+:[0-9]+)");

    /** The address (host:port) of the server a session is connected to. */
    static String remote(ZooKeeper zk) {
        Matcher m = REMOTE.matcher(zk.toString());
        that(m.find(), "no remote server in %s", zk);
        return m.group(1);
    }

    /** Asks the harness (COMPAT_CTL) to kill the server at this client address. */
    static void kill(String addr) throws Exception {
        String ctl = System.getenv("COMPAT_CTL");
        that(ctl != null && !ctl.isEmpty(), "COMPAT_CTL is not set: the harness kills servers");
        Process p = new ProcessBuilder(ctl, "kill", addr).inheritIO().start();
        that(p.waitFor(WAIT_MS, TimeUnit.MILLISECONDS) && p.exitValue() == 0, "%s kill %s failed", ctl, addr);
    }

    /** Sends a four-letter word to a server and returns its answer. */
    static String fourLetters(String addr, String word) throws IOException {
        int colon = addr.lastIndexOf(':');
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(addr.substring(0, colon), Integer.parseInt(addr.substring(colon + 1))), 5000);
            s.setSoTimeout(5000);
            s.getOutputStream().write(bytes(word));
            return str(s.getInputStream().readAllBytes());
        }
    }

    /**
     * A TCP proxy on 127.0.0.1 in front of the servers: each connection goes
     * to the first server (in turn) that accepts it. cut() closes every
     * connection and refuses new ones until heal(), like a partition
     * between the client and every server.
     */
    static final class Proxy implements AutoCloseable {
        private final ServerSocket listener;
        private final String[] upstreams;
        private final List<Socket> open = new ArrayList<>();
        private volatile boolean cut;
        private int next;

        Proxy(String servers) throws IOException {
            upstreams = servers.split(",");
            listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread t = new Thread(this::accept, "proxy");
            t.setDaemon(true);
            t.start();
        }

        String address() {
            return "127.0.0.1:" + listener.getLocalPort();
        }

        /**
         * The address twice, as the connection string of a client that
         * must reconnect through the proxy soon: with one address, the Java
         * client waits a second before it tries the address it just lost
         * again; with two, it goes on to the other at once (both the same
         * proxy). Its random wait of up to a second stays.
         */
        String addressTwice() {
            return address() + "," + address();
        }

        private void accept() {
            while (!listener.isClosed()) {
                Socket client;
                try {
                    client = listener.accept();
                } catch (IOException e) {
                    return;
                }
                if (cut) {
                    closeQuietly(client);
                    continue;
                }
                Socket up = dial();
                if (up == null) {
                    closeQuietly(client);
                    continue;
                }
                synchronized (open) {
                    open.add(client);
                    open.add(up);
                }
                pump(client, up);
                pump(up, client);
            }
        }

        private Socket dial() {
            for (int i = 0; i < upstreams.length; i++) {
                String a = upstreams[(next + i) % upstreams.length];
                int colon = a.lastIndexOf(':');
                Socket s = new Socket();
                try {
                    s.connect(new InetSocketAddress(a.substring(0, colon), Integer.parseInt(a.substring(colon + 1))), 2000);
                    next = (next + i + 1) % upstreams.length;
                    return s;
                } catch (IOException e) {
                    closeQuietly(s);
                }
            }
            return null;
        }

        private void pump(Socket from, Socket to) {
            Thread t = new Thread(() -> {
                byte[] buf = new byte[65536];
                try {
                    InputStream in = from.getInputStream();
                    OutputStream out = to.getOutputStream();
                    for (int n; (n = in.read(buf)) >= 0;) {
                        out.write(buf, 0, n);
                    }
                } catch (IOException e) {
                    // the other side went, or cut() closed it
                } finally {
                    closeQuietly(from);
                    closeQuietly(to);
                }
            }, "proxy-pump");
            t.setDaemon(true);
            t.start();
        }

        void cut() {
            cut = true;
            synchronized (open) {
                for (Socket s : open) {
                    closeQuietly(s);
                }
                open.clear();
            }
        }

        void heal() {
            cut = false;
        }

        @Override
        public void close() {
            cut();
            closeQuietly(listener);
        }

        private static void closeQuietly(AutoCloseable c) {
            try {
                c.close();
            } catch (Exception e) {
                // closing
            }
        }
    }

    /**
     * sync, waiting for it: the session's server has then applied every
     * write the cluster acknowledged before (a read from a session on
     * another server than the writer's may otherwise see an older state,
     * which is ZooKeeper's consistency too).
     */
    static void sync(ZooKeeper zk, String path) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        int[] rc = {-1};
        zk.sync(path, (r, p, c) -> {
            rc[0] = r;
            done.countDown();
        }, null);
        await(done, "sync");
        eq(0, rc[0], "sync's rc");
    }

    /** A latch wait that fails the check instead of returning false. */
    static void await(CountDownLatch latch, String what) throws InterruptedException {
        that(latch.await(WAIT_MS, TimeUnit.MILLISECONDS), "not within %d ms: %s", WAIT_MS, what);
    }
}
