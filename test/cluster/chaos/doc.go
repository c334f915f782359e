// Package chaos is coordd's fault-injection suite ("Jepsen-style"): it runs
// a 3- or 5-node cluster of real coordd processes on per-node loopback
// addresses (127.0.S.11, .12, ...), drives concurrent workloads through the
// Go client, and injects a seeded, bounded schedule of faults: kill -9 of a
// random node or of the leader (then a restart on the same data dir),
// SIGSTOP/SIGCONT of the leader for longer than the election timeout,
// iptables partitions that cut Raft and forwarding traffic (leader isolated,
// majority/minority split), slow links between peers, and a membership
// change (member-replace: a follower removed, its data dir wiped, restarted
// with --join, and added back, as a dead server is replaced).
//
// The workloads and their checkers are:
//
//   - registers: read / setData / versioned CAS and sync+read (half of
//     them as one SyncGet) on a few znodes, checked for linearizability
//     with porcupine (indeterminate writes are recorded without a return,
//     never as failed); zk-registers does the same through ZooKeeper's
//     protocol (go-zookeeper) on the same keys, into the same history;
//   - zk-renumber: two ZooKeeper-protocol sessions made of the codec
//     (rpc/zk/jute) that reconnect as kazoo does: xids from 1 on every
//     connection, the session resumed (id and password) on a random server
//     after every connection failure and after the worker drops its own
//     socket every 50-200 operations (seeded; half of the drops with a
//     create or a sync in flight), addAuth with xid -4 after every connect (with
//     -chaos.acl). Its setData, CAS and sync+getData go into the
//     registers' history; its creates of unique paths (plain and
//     sequential) under /zkc must be answered with their own path, and at
//     the end every acknowledged one exists once and none of unknown
//     outcome twice. A reply of another request (one a cache keyed by the
//     client's xid would give, issue 35) fails the run at once with the
//     details: a body that is not the request's reply, another path, a
//     code the request cannot get, a version or zxid below one the session
//     saw; so does a write refused as a stale retry (SystemError).
//     TestKazooWorkerCatchesCachedReplies shows the checks catch such
//     replies from a stand-in server;
//   - seqset: sequential creates; every acknowledged create is present
//     exactly once and sequence numbers are unique;
//   - lock: lockrecipe.Mutex holders write a fenced log through
//     GuardedMulti; tokens in the log never go backwards, and no token is
//     acquired before the holder of an earlier one stopped or learned
//     through Lost that it may have lost the lock (no "unfenced overlap");
//     beside them, go-zookeeper's own Lock over ZooKeeper's protocol, whose
//     holders learn of a loss only when told their session expired: their
//     unfenced overlaps are counted, and fail the run only with
//     -chaos.lockdelay longer than the schedule's longest fault (the
//     servers then run with --lock-delay /lock=DURATION);
//   - sessions: ephemerals of live clients never vanish, those of SIGKILLed
//     client processes vanish within session timeout + tick once the
//     cluster is healthy;
//   - watches: events arrive before the data they announce, never twice,
//     never missing, for the change right after the watch was set;
//   - order: every session's zxids (replies and events, as read off the
//     gRPC stream) never go backwards, across moves between servers;
//   - acl (with -chaos.acl): see below.
//
// Everything lives in the test files. Run it with
//
//	make chaos                     # 3 nodes, 5 minutes, random seed
//	make chaos SEED=7 DURATION=2m NODES=5
//	make chaos TLS=1               # TLS on both ports (-chaos.tls)
//	make chaos ACL=1               # ACLs on every workload node (-chaos.acl)
//	make chaos SECURE=1            # both
//	make chaos LOCKDELAY=10s       # --lock-delay /lock=10s (-chaos.lockdelay)
//
// With -chaos.tls every server has TLS on its client port (client
// certificates required) and its peer port, with a peer certificate of its
// own naming its address, and the server and peer certificates are
// reissued every 15 seconds of the fault phase: the servers re-read them
// under load, and the checkers see any request that failed.
//
// With -chaos.acl every workload node carries an ACL that grants
// everything to the workloads' digest user only (persistent nodes:
// digest:chaos; nodes created during the run: the auth scheme, which with
// TLS adds the workloads' certificate subject). Every workload client,
// go-zookeeper's and the killed helper processes included, authenticates
// once per session and never again, so a session that moves to another
// server relies on its replicated identity (zk-renumber sends addAuth
// again after every connect, as kazoo does); a NoAuth answer to any of
// them fails the run. The servers run with --superdigest and the checkers read
// as that super user. The acl workload adds an unauthenticated observer
// (with TLS, a certificate of its own) over gRPC and over ZooKeeper's
// protocol, which reads, writes, creates, deletes, changes ACLs and sets
// watches on protected nodes: every answer must be NoAuth (or unknown),
// and its stream must carry no event about a protected node, though it
// holds a recursive watch on / and exists watches on ephemerals the
// sessions workload creates later; it must see the events of an open node
// an authenticated ticker changes. An authenticated prober checks its
// identity with whoAmI after every move. At the end the super user finds
// every protected node's ACL unchanged.
//
// Without flags (as in make test) the package runs one short pass with a
// fixed seed. Partitions and slow links need root and iptables; without them
// those faults are skipped and the run says so.
//
// # Why slow links use a proxy and not tc netem
//
// tc netem works per interface, and every test on this machine shares lo:
// a netem qdisc on lo (even behind u32 filters) replaces lo's root qdisc for
// everyone, and two concurrent runs would fight over it. Instead every peer
// link i->j is routed, from the start of the run, through an in-test TCP
// proxy: one iptables nat rule per ordered pair (matching only the run's own
// source and destination addresses and the peer port) redirects node i's
// connections to node j's peer port to a proxy listener, which dials node j
// from node i's address (so the partition rules still see the right source)
// with a socket mark that the nat rule skips. The proxy forwards with zero
// delay until a slow-link fault sets a latency on that link. Nothing outside
// the run's addresses is affected, and the rules (tagged with
// coordd-chaos-<pid>) are deleted at the end, on a signal, and by the next
// run if this process died.
package chaos
