// WatchProbe runs a script of ZooKeeper client operations against a server
// and prints, step by step, what each session received: the watch
// notifications on the wire (through a small logging proxy it runs itself)
// and the calls the Java client made to each of the session's watchers.
//
// Build and run (see README.md next to this file):
//
//	javac -cp /usr/share/java/zookeeper.jar -d out WatchProbe.java
//	java -cp /usr/share/java/zookeeper.jar:out WatchProbe --server 127.0.0.1:22181 script.txt
//
// A script has one command per line; '#' starts a comment. S is a session
// label of your choice (s1, s2, ...):
//
//	connect S                      open a session (through the proxy)
//	close S                        close it
//	S create PATH [DATA] [-e]      create a node (-e: ephemeral)
//	S set PATH DATA                setData, any version
//	S delete PATH                  delete, any version
//	S getData PATH                 getData with a watch   (watcher "getData:PATH")
//	S exists PATH                  exists with a watch    (watcher "exists:PATH")
//	S getChildren PATH             getChildren with a watch (watcher "getChildren:PATH")
//	S addWatch PATH MODE           MODE is PERSISTENT or PERSISTENT_RECURSIVE
//	                               (watcher "persistent:PATH" / "recursive:PATH")
//	S removeAll PATH TYPE [local]  ZooKeeper.removeAllWatches (opcode removeWatches)
//	S removeWatcher LABEL TYPE     ZooKeeper.removeWatches of the watcher LABEL
//	                               (opcode checkWatches)
//	S raw OPCODE PATH N            send removeWatches or checkWatches with
//	                               WatcherType number N straight to the server,
//	                               bypassing the client's own bookkeeping
//	S drop                         the proxy cuts S's connection and refuses
//	                               S's reconnections until "S let"
//	S let                          the proxy lets S reconnect; waits until it has
//	wchc | wchp | wchs             print the server's four-letter-word answer
//	                               (needs 4lw.commands.whitelist)
//
// TYPE is a Watcher.WatcherType name (Children, Data, Any, and from 3.9 on
// Persistent, PersistentRecursive).
//
// After every command the probe waits until each connected session has
// received and dispatched everything the server sent it before the command
// returned: it issues an asynchronous sync on every session and waits for its
// callback, which the Java client runs after every event queued before it.
// Then it prints what arrived, session by session:
//
//	S out   setWatches2 rel=... data=[...] ...   a request of interest the client sent
//	S wire  NodeDataChanged /a                   a notification the server sent
//	S event NodeDataChanged /a -> getData:/a     the client called that watcher
//	S state Disconnected -> default              a state change, and to whom
//
// Nothing here waits on a timer except the bounded waits for the server
// (every wait gives up after --timeout ms and the probe exits 1).
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.jute.Record;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.ClientCnxn;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.proto.CheckWatchesRequest;
import org.apache.zookeeper.proto.RemoveWatchesRequest;
import org.apache.zookeeper.proto.ReplyHeader;
import org.apache.zookeeper.proto.RequestHeader;

public final class WatchProbe {

    private static long timeoutMs = 10_000;

    /** Lines received for one session during the current step. */
    private static final class Inbox {
        final List<String> out = new ArrayList<>();
        final List<String> wire = new ArrayList<>();
        final List<String> events = new ArrayList<>();
    }

    private static final Map<String, Inbox> inboxes = new TreeMap<>();
    private static final Map<Long, String> labelOf = new ConcurrentHashMap<>();
    private static final Map<String, Session> sessions = new TreeMap<>();

    private static synchronized Inbox inbox(String label) {
        return inboxes.computeIfAbsent(label, k -> new Inbox());
    }

    private static String label(long sessionId) {
        return labelOf.getOrDefault(sessionId, String.format("0x%x", sessionId));
    }

    /** A watcher that records every call with its own label. */
    private static final class Tagged implements Watcher {
        final String session;
        final String tag;

        Tagged(String session, String tag) {
            this.session = session;
            this.tag = tag;
        }

        @Override
        public void process(WatchedEvent e) {
            String line = e.getType() == Event.EventType.None
                ? String.format("%s state %s -> %s", session, e.getState(), tag)
                : String.format("%s event %s %s -> %s", session, e.getType(), e.getPath(), tag);
            synchronized (WatchProbe.class) {
                inbox(session).events.add(line);
            }
            if (tag.equals("default") && e.getState() == Event.KeeperState.SyncConnected) {
                Session s = sessions.get(session);
                if (s != null) {
                    s.connected.countDown();
                }
            }
        }
    }

    private static final class Session {
        final String label;
        ZooKeeper zk;
        volatile CountDownLatch connected = new CountDownLatch(1);
        final Map<String, Tagged> watchers = new TreeMap<>();

        Session(String label) {
            this.label = label;
        }

        Tagged watcher(String tag) {
            return watchers.computeIfAbsent(tag, t -> new Tagged(label, t));
        }
    }

    // ---- the logging proxy -------------------------------------------------

    private static Proxy proxy;

    /** Proxy forwards client connections to the server and logs watch traffic. */
    private static final class Proxy implements Runnable {
        final ServerSocket listener;
        final InetSocketAddress server;
        final Set<Long> held = ConcurrentHashMap.newKeySet();
        final Map<Long, List<Socket>> open = new ConcurrentHashMap<>();

        Proxy(InetSocketAddress server) throws IOException {
            this.server = server;
            this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        }

        int port() {
            return listener.getLocalPort();
        }

        @Override
        public void run() {
            while (!listener.isClosed()) {
                try {
                    Socket c = listener.accept();
                    Thread t = new Thread(() -> serve(c), "proxy-conn");
                    t.setDaemon(true);
                    t.start();
                } catch (IOException e) {
                    return;
                }
            }
        }

        void drop(long session) {
            held.add(session);
            List<Socket> socks = open.remove(session);
            if (socks != null) {
                for (Socket s : socks) {
                    closeQuietly(s);
                }
            }
        }

        void let(long session) {
            held.remove(session);
        }

        private void serve(Socket client) {
            Socket upstream = null;
            try {
                DataInputStream cin = new DataInputStream(client.getInputStream());
                byte[] connReq = readFrame(cin);
                // ConnectRequest: protocolVersion int, lastZxidSeen long, timeOut int, sessionId long, ...
                long requested = java.nio.ByteBuffer.wrap(connReq).getLong(4 + 8 + 4);
                if (requested != 0 && held.contains(requested)) {
                    closeQuietly(client);
                    return;
                }
                upstream = new Socket();
                upstream.connect(server, (int) timeoutMs);
                DataOutputStream uout = new DataOutputStream(upstream.getOutputStream());
                writeFrame(uout, connReq);
                DataInputStream uin = new DataInputStream(upstream.getInputStream());
                byte[] connResp = readFrame(uin);
                // ConnectResponse: protocolVersion int, timeOut int, sessionId long, ...
                long session = java.nio.ByteBuffer.wrap(connResp).getLong(4 + 4);
                if (session != 0 && held.contains(session)) {
                    closeQuietly(client);
                    closeQuietly(upstream);
                    return;
                }
                List<Socket> socks = Collections.synchronizedList(new ArrayList<>());
                socks.add(client);
                socks.add(upstream);
                if (session != 0) {
                    open.put(session, socks);
                }
                writeFrame(new DataOutputStream(client.getOutputStream()), connResp);
                final Socket up = upstream;
                Thread t = new Thread(() -> pump(client, up, session, true), "proxy-up");
                t.setDaemon(true);
                t.start();
                pump(up, client, session, false);
            } catch (IOException e) {
                closeQuietly(client);
                closeQuietly(upstream);
            }
        }

        /** pump copies frames from in to out, logging the ones of interest. */
        private void pump(Socket from, Socket to, long session, boolean toServer) {
            try {
                DataInputStream in = new DataInputStream(from.getInputStream());
                DataOutputStream out = new DataOutputStream(to.getOutputStream());
                while (true) {
                    byte[] frame = readFrame(in);
                    if (toServer) {
                        logRequest(session, frame);
                    } else {
                        logReply(session, frame);
                    }
                    writeFrame(out, frame);
                }
            } catch (IOException e) {
                closeQuietly(from);
                closeQuietly(to);
            }
        }
    }

    private static byte[] readFrame(DataInputStream in) throws IOException {
        int n = in.readInt();
        if (n < 0 || n > (64 << 20)) {
            throw new IOException("bad frame length " + n);
        }
        byte[] b = new byte[n];
        in.readFully(b);
        return b;
    }

    private static void writeFrame(DataOutputStream out, byte[] b) throws IOException {
        synchronized (out) {
            out.writeInt(b.length);
            out.write(b);
            out.flush();
        }
    }

    private static void closeQuietly(Socket s) {
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // closing is best effort
            }
        }
    }

    private static String readString(java.nio.ByteBuffer b) {
        int n = b.getInt();
        if (n < 0) {
            return null;
        }
        byte[] s = new byte[n];
        b.get(s);
        return new String(s, StandardCharsets.UTF_8);
    }

    private static List<String> readStrings(java.nio.ByteBuffer b) {
        int n = b.getInt();
        List<String> l = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            l.add(readString(b));
        }
        return l;
    }

    private static void logRequest(long session, byte[] frame) {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(frame);
        b.getInt(); // xid
        int type = b.getInt();
        String line = null;
        if (type == ZooDefs.OpCode.setWatches2 || type == ZooDefs.OpCode.setWatches) {
            long rel = b.getLong();
            StringBuilder sb = new StringBuilder(type == ZooDefs.OpCode.setWatches2 ? "setWatches2" : "setWatches");
            sb.append(String.format(" rel=0x%x data=%s exist=%s child=%s", rel, readStrings(b), readStrings(b), readStrings(b)));
            if (type == ZooDefs.OpCode.setWatches2) {
                sb.append(String.format(" persistent=%s recursive=%s", readStrings(b), readStrings(b)));
            }
            line = sb.toString();
        } else if (type == ZooDefs.OpCode.removeWatches || type == ZooDefs.OpCode.checkWatches) {
            String path = readString(b);
            int wt = b.getInt();
            line = String.format("%s %s type=%d", type == ZooDefs.OpCode.removeWatches ? "removeWatches" : "checkWatches", path, wt);
        }
        if (line != null && !rawInFlight) {
            synchronized (WatchProbe.class) {
                inbox(label(session)).out.add(label(session) + " out   " + line);
            }
        }
    }

    private static void logReply(long session, byte[] frame) {
        java.nio.ByteBuffer b = java.nio.ByteBuffer.wrap(frame);
        int xid = b.getInt();
        b.getLong(); // zxid
        int err = b.getInt();
        if (xid != -1) {
            return;
        }
        int type = b.getInt();
        int state = b.getInt();
        String path = readString(b);
        String line = String.format("%s wire  %s %s", label(session),
            Watcher.Event.EventType.fromInt(type), path);
        if (state != Watcher.Event.KeeperState.SyncConnected.getIntValue() || err != 0) {
            line += String.format(" (state %d, err %d)", state, err);
        }
        synchronized (WatchProbe.class) {
            inbox(label(session)).wire.add(line);
        }
    }

    // ---- commands ----------------------------------------------------------

    private static String serverAddr = "127.0.0.1:2181";

    /** rawInFlight keeps the probe's own raw requests out of the "out" lines. */
    private static volatile boolean rawInFlight;

    private static void connect(String label) throws Exception {
        if (sessions.containsKey(label)) {
            throw new IllegalArgumentException("session " + label + " already exists");
        }
        Session s = new Session(label);
        sessions.put(label, s);
        s.zk = new ZooKeeper("127.0.0.1:" + proxy.port(), 30_000, s.watcher("default"));
        await(s.connected, "connect " + label);
        labelOf.put(s.zk.getSessionId(), label);
    }

    private static void await(CountDownLatch l, String what) throws InterruptedException {
        if (!l.await(timeoutMs, TimeUnit.MILLISECONDS)) {
            throw new IllegalStateException("timed out waiting for " + what);
        }
    }

    /** barrier waits until every connected session has dispatched what came before. */
    private static void barrier() throws Exception {
        for (Session s : sessions.values()) {
            if (s.zk == null || proxy.held.contains(s.zk.getSessionId())) {
                continue;
            }
            CountDownLatch done = new CountDownLatch(1);
            s.zk.sync("/", (rc, path, ctx) -> done.countDown(), null);
            await(done, "sync of " + s.label);
        }
    }

    /** UnknownType is a WatcherType name this client library does not have. */
    private static final class UnknownType extends Exception {
        UnknownType(String name) {
            super("this client has no WatcherType " + name);
        }
    }

    private static Watcher.WatcherType watcherType(String name) throws UnknownType {
        for (Watcher.WatcherType t : Watcher.WatcherType.values()) {
            if (t.name().equalsIgnoreCase(name)) {
                return t;
            }
        }
        throw new UnknownType(name);
    }

    /** raw sends a removeWatches or checkWatches request with any type number. */
    private static int raw(ZooKeeper zk, String opcode, String path, int type) throws Exception {
        Field f = ZooKeeper.class.getDeclaredField("cnxn");
        f.setAccessible(true);
        ClientCnxn cnxn = (ClientCnxn) f.get(zk);
        RequestHeader h = new RequestHeader();
        Record req;
        switch (opcode) {
        case "removeWatches":
            h.setType(ZooDefs.OpCode.removeWatches);
            req = new RemoveWatchesRequest(path, type);
            break;
        case "checkWatches":
            h.setType(ZooDefs.OpCode.checkWatches);
            req = new CheckWatchesRequest(path, type);
            break;
        default:
            throw new IllegalArgumentException("raw: unknown opcode " + opcode);
        }
        for (Method m : ClientCnxn.class.getMethods()) {
            Class<?>[] p = m.getParameterTypes();
            if (m.getName().equals("submitRequest") && p.length == 4 && p[3].getSimpleName().equals("WatchRegistration")) {
                ReplyHeader r = (ReplyHeader) m.invoke(cnxn, h, req, null, null);
                return r.getErr();
            }
        }
        throw new IllegalStateException("raw: ClientCnxn.submitRequest not found");
    }

    private static String run(String[] w) throws Exception {
        if (w[0].equals("connect")) {
            connect(w[1]);
            return "ok";
        }
        if (w[0].equals("close")) {
            Session s = need(w[1]);
            Field f = ZooKeeper.class.getDeclaredField("cnxn");
            f.setAccessible(true);
            Field et = ClientCnxn.class.getDeclaredField("eventThread");
            et.setAccessible(true);
            Thread events = (Thread) et.get(f.get(s.zk));
            s.zk.close();
            s.zk = null;
            // What the client tells its watchers on close is dispatched by
            // its event thread, which ends after that.
            events.join(timeoutMs);
            return "ok";
        }
        if (w[0].startsWith("wch") || w[0].equals("stat") || w[0].equals("mntr")) {
            String answer = fourLetters(w[0]).stripTrailing();
            for (Map.Entry<Long, String> e : labelOf.entrySet()) {
                answer = answer.replace(String.format("0x%x", e.getKey()), e.getValue());
            }
            return "\n" + answer;
        }
        Session s = need(w[0]);
        ZooKeeper zk = s.zk;
        String op = w[1];
        try {
            switch (op) {
            case "create": {
                String data = w.length > 3 && !w[3].equals("-e") ? w[3] : "";
                boolean eph = w[w.length - 1].equals("-e");
                zk.create(w[2], data.getBytes(StandardCharsets.UTF_8), ZooDefs.Ids.OPEN_ACL_UNSAFE,
                    eph ? CreateMode.EPHEMERAL : CreateMode.PERSISTENT);
                return "ok";
            }
            case "set":
                zk.setData(w[2], w[3].getBytes(StandardCharsets.UTF_8), -1);
                return "ok";
            case "delete":
                zk.delete(w[2], -1);
                return "ok";
            case "getData":
                zk.getData(w[2], s.watcher("getData:" + w[2]), null);
                return "ok";
            case "exists":
                return zk.exists(w[2], s.watcher("exists:" + w[2])) == null ? "ok (absent)" : "ok (present)";
            case "getChildren":
                return "ok " + zk.getChildren(w[2], s.watcher("getChildren:" + w[2]));
            case "addWatch": {
                AddWatchMode mode = AddWatchMode.valueOf(w[3]);
                String tag = (mode == AddWatchMode.PERSISTENT ? "persistent:" : "recursive:") + w[2];
                zk.addWatch(w[2], s.watcher(tag), mode);
                return "ok";
            }
            case "removeAll":
                zk.removeAllWatches(w[2], watcherType(w[3]), w.length > 4 && w[4].equals("local"));
                return "ok";
            case "removeWatcher": {
                Tagged t = s.watchers.get(w[2]);
                if (t == null) {
                    throw new IllegalArgumentException("no watcher labelled " + w[2]);
                }
                String path = w[2].substring(w[2].indexOf(':') + 1);
                zk.removeWatches(path, t, watcherType(w[3]), false);
                return "ok";
            }
            case "raw": {
                rawInFlight = true;
                int err;
                try {
                    err = raw(zk, w[2], w[3], Integer.parseInt(w[4]));
                } finally {
                    rawInFlight = false;
                }
                return err == 0 ? "ok" : KeeperException.Code.get(err) + " (" + err + ")";
            }
            case "drop":
                proxy.drop(zk.getSessionId());
                return "ok";
            case "let":
                s.connected = new CountDownLatch(1);
                proxy.let(zk.getSessionId());
                await(s.connected, "reconnect " + s.label);
                return "ok";
            default:
                throw new IllegalArgumentException("unknown command " + op);
            }
        } catch (KeeperException e) {
            return e.code() + " (" + e.code().intValue() + ")";
        } catch (UnknownType e) {
            return e.getMessage();
        }
    }

    private static Session need(String label) {
        Session s = sessions.get(label);
        if (s == null || s.zk == null) {
            throw new IllegalArgumentException("no open session " + label);
        }
        return s;
    }

    private static String fourLetters(String cmd) throws IOException {
        String[] hp = serverAddr.split(":");
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])), (int) timeoutMs);
            s.setSoTimeout((int) timeoutMs);
            OutputStream o = s.getOutputStream();
            o.write(cmd.getBytes(StandardCharsets.US_ASCII));
            o.flush();
            InputStream in = s.getInputStream();
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    private static synchronized void flush() {
        for (Map.Entry<String, Inbox> e : inboxes.entrySet()) {
            for (String l : e.getValue().out) {
                System.out.println("  " + l);
            }
            for (String l : e.getValue().wire) {
                System.out.println("  " + l);
            }
            // The client calls the watchers of one notification in no
            // particular order (a hash set): sort each such run of lines.
            List<String> ev = e.getValue().events;
            for (int i = 0; i < ev.size();) {
                String head = ev.get(i).substring(0, ev.get(i).lastIndexOf(" -> "));
                int j = i;
                while (j < ev.size() && ev.get(j).substring(0, ev.get(j).lastIndexOf(" -> ")).equals(head)
                    && (j == i || !ev.get(j).equals(ev.get(j - 1)))) {
                    j++;
                }
                List<String> run = new ArrayList<>(ev.subList(i, j));
                Collections.sort(run);
                for (String l : run) {
                    System.out.println("  " + l);
                }
                i = j;
            }
        }
        inboxes.clear();
    }

    public static void main(String[] args) throws Exception {
        List<String> scripts = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
            case "--server":
                serverAddr = args[++i];
                break;
            case "--timeout":
                timeoutMs = Long.parseLong(args[++i]);
                break;
            default:
                scripts.add(args[i]);
            }
        }
        if (scripts.isEmpty()) {
            System.err.println("usage: WatchProbe [--server host:port] [--timeout ms] script...");
            System.exit(2);
        }
        String[] hp = serverAddr.split(":");
        proxy = new Proxy(new InetSocketAddress(hp[0], Integer.parseInt(hp[1])));
        Thread pt = new Thread(proxy, "proxy");
        pt.setDaemon(true);
        pt.start();
        int status = 0;
        try {
            for (String file : scripts) {
                System.out.println("## " + Paths.get(file).getFileName());
                try (BufferedReader r = new BufferedReader(new InputStreamReader(Files.newInputStream(Paths.get(file)), StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null) {
                        int hash = line.indexOf('#');
                        String cmd = (hash >= 0 ? line.substring(0, hash) : line).trim();
                        if (cmd.isEmpty()) {
                            if (hash >= 0 && line.trim().startsWith("#")) {
                                System.out.println(line.trim());
                            }
                            continue;
                        }
                        String result = run(cmd.split("\\s+"));
                        barrier();
                        System.out.println("> " + cmd + "  = " + result);
                        flush();
                    }
                }
                for (Session s : sessions.values()) {
                    if (s.zk != null) {
                        s.zk.close();
                    }
                }
                sessions.clear();
                labelOf.clear();
                synchronized (WatchProbe.class) {
                    inboxes.clear();
                }
                System.out.println();
            }
        } catch (Exception e) {
            System.out.flush();
            System.err.println("probe: " + e);
            status = 1;
        } finally {
            proxy.listener.close();
        }
        System.exit(status);
    }
}
