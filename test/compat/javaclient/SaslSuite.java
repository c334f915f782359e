// SaslSuite: ZooKeeper's Java client (Debian's zookeeper.jar, 3.8)
// authenticating with SASL DIGEST-MD5, unchanged, against a cluster given by
// COMPAT_SERVERS whose servers serve the users super (password adminsecret,
// also the SASL super user) and bob (bobsecret). It is the "sasl" suite of
// make compat (scripts/compat.sh), which runs it against a real ZooKeeper
// ensemble too (TARGET=zookeeper). It runs as users run the client: the JVM
// is started with -Djava.security.auth.login.config naming a JAAS file whose
// Client section (the one a client reads by default) is bob's, and whose
// sections WrongPassword and Super are chosen per client with
// zookeeper.sasl.clientconfig. Everything it creates is under /sasl.
import java.util.Arrays;
import java.util.List;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException.Code;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZKUtil;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooDefs.Perms;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ZKClientConfig;
import org.apache.zookeeper.data.ACL;
import org.apache.zookeeper.data.ClientInfo;
import org.apache.zookeeper.data.Id;
import org.apache.zookeeper.server.auth.DigestAuthenticationProvider;

public final class SaslSuite {
    private static final int TIMEOUT = 15_000;
    private static String servers;
    // Not List.of: ZooKeeper.create asks the list whether it contains null.
    private static final List<ACL> BOB = Arrays.asList(new ACL(Perms.ALL, new Id("sasl", "bob")));

    public static void main(String[] args) throws Exception {
        servers = System.getenv("COMPAT_SERVERS");
        if (servers == null || servers.isEmpty()) {
            System.err.println("COMPAT_SERVERS: the servers' client addresses, comma-separated");
            System.exit(2);
        }
        if (System.getProperty("java.security.auth.login.config") == null) {
            System.err.println("-Djava.security.auth.login.config: a JAAS file with sections Client (bob), WrongPassword and Super");
            System.exit(2);
        }
        Check.only = args;
        ZooKeeper admin = anonymous(new Check.Events());
        admin.create("/sasl", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);

        Check.test("the Client section: SaslAuthenticated, whoAmI sasl:bob", SaslSuite::authenticated);
        Check.test("a sasl:bob node is bob's, not an anonymous session's; auth:: stands for sasl:bob", SaslSuite::acl);
        Check.test("the SASL user super: every sasl entry, and every node as zookeeper.superUser", SaslSuite::superUser);
        Check.test("a wrong password: AuthFailed, and the client refuses requests", SaslSuite::wrongPassword);
        Check.test("addAuth(\"sasl\", ...) is refused: AuthFailed", SaslSuite::addAuthSasl);

        try {
            Check.waitUntil("the admin session connected", () -> admin.getState().isConnected());
            ZooKeeper sup = sasl("Super", new Check.Events());
            try {
                ZKUtil.deleteRecursive(sup, "/sasl");
            } finally {
                sup.close();
            }
        } finally {
            admin.close();
        }
        System.exit(Check.finish("sasl"));
    }

    /** A session that does no SASL (zookeeper.sasl.client=false). */
    private static ZooKeeper anonymous(Check.Events ev) throws Exception {
        ZKClientConfig conf = new ZKClientConfig();
        conf.setProperty(ZKClientConfig.ENABLE_CLIENT_SASL_KEY, "false");
        ZooKeeper zk = new ZooKeeper(servers, TIMEOUT, ev, conf);
        ev.awaitState(KeeperState.SyncConnected, 0);
        return zk;
    }

    /** A session authenticated with the JAAS file's section (null: Client). */
    private static ZooKeeper sasl(String section, Check.Events ev) throws Exception {
        ZKClientConfig conf = new ZKClientConfig();
        if (section != null) {
            conf.setProperty(ZKClientConfig.LOGIN_CONTEXT_NAME_KEY, section);
        }
        ZooKeeper zk = new ZooKeeper(servers, TIMEOUT, ev, conf);
        try {
            ev.awaitState(KeeperState.SaslAuthenticated, 0);
        } catch (AssertionError e) {
            zk.close();
            throw e;
        }
        return zk;
    }

    private static void authenticated() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper bob = new ZooKeeper(servers, TIMEOUT, ev); // the default: the Client section
        try {
            int i = ev.awaitState(KeeperState.SyncConnected, 0);
            ev.awaitState(KeeperState.SaslAuthenticated, i);
            boolean found = false;
            for (ClientInfo c : bob.whoAmI()) {
                found |= c.getAuthScheme().equals("sasl") && c.getUser().equals("bob");
            }
            Check.that(found, "whoAmI %s has no sasl:bob", bob.whoAmI());
        } finally {
            bob.close();
        }
    }

    private static void acl() throws Exception {
        ZooKeeper bob = sasl(null, new Check.Events());
        ZooKeeper anon = anonymous(new Check.Events());
        try {
            bob.create("/sasl/bob", Check.bytes("b"), BOB, CreateMode.PERSISTENT);
            bob.create("/sasl/auth", null, ZooDefs.Ids.CREATOR_ALL_ACL, CreateMode.PERSISTENT);
            Check.eq(BOB, bob.getACL("/sasl/auth", null), "the ACL auth:: gave");
            Check.fails(Code.NOAUTH, () -> anon.setData("/sasl/bob", Check.bytes("x"), -1));
            Check.fails(Code.NOAUTH, () -> anon.getData("/sasl/bob", false, null));
            bob.setData("/sasl/bob", Check.bytes("y"), -1);
            Check.eq("y", Check.str(bob.getData("/sasl/bob", false, null)), "bob's data");
            Check.eq(BOB, bob.getACL("/sasl/bob", null), "getACL");
        } finally {
            bob.close();
            anon.close();
        }
    }

    private static void superUser() throws Exception {
        ZooKeeper anon = anonymous(new Check.Events());
        ZooKeeper sup = sasl("Super", new Check.Events());
        try {
            anon.create("/sasl/bob-only", null, BOB, CreateMode.PERSISTENT);
            List<ACL> digest = Arrays.asList(new ACL(Perms.ALL, new Id("digest", DigestAuthenticationProvider.generateDigest("alice:pw"))));
            anon.create("/sasl/alice-only", null, digest, CreateMode.PERSISTENT);
            sup.setData("/sasl/bob-only", Check.bytes("s"), -1);
            sup.setData("/sasl/alice-only", Check.bytes("s"), -1);
        } finally {
            anon.close();
            sup.close();
        }
    }

    private static void wrongPassword() throws Exception {
        ZKClientConfig conf = new ZKClientConfig();
        conf.setProperty(ZKClientConfig.LOGIN_CONTEXT_NAME_KEY, "WrongPassword");
        Check.Events ev = new Check.Events();
        ZooKeeper zk = new ZooKeeper(servers, TIMEOUT, ev, conf);
        try {
            ev.awaitState(KeeperState.AuthFailed, 0);
            Check.fails(Code.AUTHFAILED, () -> zk.exists("/sasl", false));
        } finally {
            zk.close();
        }
    }

    private static void addAuthSasl() throws Exception {
        Check.Events ev = new Check.Events();
        ZooKeeper zk = anonymous(ev);
        try {
            int i = ev.stateCount();
            zk.addAuthInfo("sasl", Check.bytes("bob"));
            ev.awaitState(KeeperState.AuthFailed, i);
        } finally {
            zk.close();
        }
    }
}
