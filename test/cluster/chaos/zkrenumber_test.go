package chaos

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/zk/jute"
)

// zkRenumber is the ZooKeeper-protocol workload of a client that numbers
// its xids from 1 on every connection, as kazoo does (issue 35): each
// worker keeps one session, made of the codec (kazooConn), and resumes it
// (session id and password) on a new connection to a random server after
// every connection failure, and after dropping its own socket every 50 to
// 200 operations (seeded; half of the drops with a create or a sync in
// flight), so that it reconnects often without any fault too. After every connect it
// authenticates (with -chaos.acl) with xid -4, as kazoo does.
//
// Its operations are the registers workload's (setData, versioned setData,
// sync+getData), recorded into the registers' history beside those of the
// Go client and go-zookeeper, and creates of unique paths under /zkc,
// plain and sequential. A reply of another request (an xid-keyed cache
// answering a renumbered xid with an old connection's reply) shows as:
//
//   - at once, with the details: a reply body that does not decode
//     exactly as the request's reply, a create or a sync answered with
//     another path, an error code the request cannot get (NodeExists for a
//     new unique path, NoNode for a register, BadVersion for an
//     unconditional setData), a versioned setData answered with a version
//     other than expected+1, a version or a zxid below one the session has
//     seen, or a reply with another xid;
//   - at the end, a history porcupine finds not linearizable: a reply that
//     decodes is recorded as it came (one found wrong at once too), so one
//     that looks right on its own is caught there;
//   - at the end, an acknowledged create missing or present twice.
//
// A write refused as a retry (SystemError: "stale retry") fails the run
// too; like one refused with NoAuth, it did not apply (it is left out of
// the history, and a create refused so must be absent at the end). A
// request in flight when the connection breaks, or answered with an error
// that leaves it open (ConnectionLoss, SessionMoved, ...), has an unknown
// outcome: recorded without a return, never as failed.
type zkRenumber struct {
	r       *registers
	e       *env
	seed    int64
	workers int
	maxOps  int           // per worker
	gap     time.Duration // the mean pause between operations (0: none)
	cnt     counters

	sessions, conns, idleDrops, flightDrops, faultLosses, expiries, maxXid atomic.Int64

	mu     sync.Mutex
	issued map[string]bool   // create ids
	acked  map[string]string // create id -> path returned
	unsure map[string]bool   // create ids with unknown outcome
	failed map[string]bool   // create ids that definitely did not apply
	// problems are what fails the run, by kind, the first few of each
	// kind with their details, as they were found (so that thousands of
	// refusals do not hide a wrong reply).
	problems map[problemKind][]string
	found    map[problemKind]int
}

// problemKind sorts the problems the workload finds as it goes.
type problemKind string

const (
	wrongReply problemKind = "WRONG REPLY" // a reply that belongs to another request
	refusedReq problemKind = "REFUSED"     // a request taken for a retry (SystemError)
	orderBack  problemKind = "ORDER"       // a reply older than one seen before
	otherSess  problemKind = "SESSION"     // a resume answered with another session
)

var problemKinds = []problemKind{wrongReply, refusedReq, orderBack, otherSess}

// problemsKept is how many problems of each kind are kept with their
// details (and logged as they are found).
const problemsKept = 20

// zkCreateDir is where the workload's creates go.
const zkCreateDir = "/zkc"

func newZKRenumber(r *registers, seed int64, workers int) *zkRenumber {
	return &zkRenumber{r: r, e: r.e, seed: seed, workers: workers, maxOps: 200000, gap: 17 * time.Millisecond,
		issued: map[string]bool{}, acked: map[string]string{}, unsure: map[string]bool{}, failed: map[string]bool{},
		problems: map[problemKind][]string{}, found: map[problemKind]int{}}
}

func (z *zkRenumber) name() string        { return "zk-renumber" }
func (z *zkRenumber) counters() *counters { return &z.cnt }

// setup creates the directory of the creates; the registers workload
// creates the keys.
func (z *zkRenumber) setup(ctx context.Context, cl *client.Client) error {
	return createAll(ctx, cl, zkCreateDir, z.e.dataACL())
}

func (z *zkRenumber) run(ctx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < z.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			k := &kazooWorker{z: z, w: w, rng: rand.New(rand.NewPCG(uint64(z.seed), uint64(7000+w))), lane: z.r.lane()}
			k.run(ctx)
		}(w)
	}
	wg.Wait()
}

// problem records what fails the run, and logs it at once.
func (z *zkRenumber) problem(kind problemKind, format string, args ...any) {
	msg := fmt.Sprintf("%s: %s", kind, fmt.Sprintf(format, args...))
	z.mu.Lock()
	z.found[kind]++
	keep := len(z.problems[kind]) < problemsKept
	if keep {
		z.problems[kind] = append(z.problems[kind], msg)
	}
	z.mu.Unlock()
	if keep {
		z.e.logf("zk-renumber: %s", msg)
	}
}

// count is how many problems of kind were found.
func (z *zkRenumber) count(kind problemKind) int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.found[kind]
}

// kazooWorker is one session of the workload.
type kazooWorker struct {
	z    *zkRenumber
	w    int
	rng  *rand.Rand
	lane int

	conn     *kazooConn
	connNo   int    // connections made, this one included
	session  int64  // 0: none yet, or expired
	passwd   []byte // the session's password
	lastZxid int64  // the highest zxid in a reply: sent with every connect
	// Per session: the highest version seen per key (a reply below it is
	// another request's), and what the next CAS expects.
	seen  map[string]int32
	known map[string]int32
	// nextDrop is the operation before which the worker drops its own
	// socket.
	nextDrop int
}

// run drives the session until ctx ends or maxOps operations are done,
// then closes it.
func (k *kazooWorker) run(ctx context.Context) {
	k.nextDrop = 50 + k.rng.IntN(151)
	defer k.closeSession()
	// inFlight: the next create or sync drops the connection once it is
	// sent. (Not a setData: a write of unknown outcome stays pending to
	// the end of porcupine's history, and every one more multiplies the
	// orders it must try; an unknown create costs nothing there and is
	// checked exactly at the end.)
	inFlight := false
	for n := 0; n < k.z.maxOps && ctx.Err() == nil; n++ {
		if k.conn == nil {
			if err := k.connect(ctx); err != nil {
				if ctx.Err() == nil && k.session != 0 {
					k.z.e.logf("zk-renumber worker %d: connect: %v", k.w, err)
				}
				sleep(ctx, time.Duration(100+k.rng.IntN(400))*time.Millisecond)
				continue
			}
		}
		if n >= k.nextDrop {
			k.nextDrop = n + 50 + k.rng.IntN(151)
			if k.rng.IntN(2) == 0 {
				k.z.idleDrops.Add(1)
				k.drop()
				continue
			}
			inFlight = true
		}
		if k.rng.IntN(4) == 0 {
			k.create(ctx, n, inFlight)
			inFlight = false
		} else if k.register(ctx, n, inFlight) {
			inFlight = false
		}
		if g := k.z.gap; g > 0 {
			sleep(ctx, g/3+time.Duration(k.rng.Int64N(int64(g*4/3))))
		}
	}
}

// where says which request of which connection, for a problem's details.
func (k *kazooWorker) where(xid int32) string {
	addr := ""
	if k.conn != nil {
		addr = k.conn.addr
	}
	return fmt.Sprintf("worker %d, session %#x, connection #%d to %s, xid %d", k.w, k.session, k.connNo, addr, xid)
}

// drop closes the connection.
func (k *kazooWorker) drop() {
	if k.conn != nil {
		k.conn.close()
		k.conn = nil
	}
}

// connect opens a connection to a random server and opens or resumes the
// session on it, its xids from 1 again; with -chaos.acl it authenticates.
func (k *kazooWorker) connect(ctx context.Context) error {
	servers := k.z.e.c.servers()
	addr := servers[k.rng.IntN(len(servers))]
	// kazoo's connect timeout: the session timeout over the number of
	// servers.
	c, err := dialKazoo(ctx, addr, k.tlsConfig(), workloadSessionTimeout/time.Duration(len(servers)))
	if err != nil {
		return err
	}
	req := &jute.ConnectRequest{LastZxidSeen: k.lastZxid, TimeOut: int32(workloadSessionTimeout.Milliseconds()),
		SessionID: k.session, Passwd: k.passwd, HasReadOnly: true}
	if k.session == 0 {
		req.Passwd = make([]byte, 16)
	}
	resp, err := c.handshake(ctx, req)
	if err != nil {
		c.close()
		return err
	}
	if resp.TimeOut <= 0 || resp.SessionID == 0 {
		// The session expired: kazoo reports it lost and opens a new one.
		c.close()
		if k.session == 0 {
			return lost("%s refused a new session", addr)
		}
		k.z.expiries.Add(1)
		k.z.e.logf("zk-renumber worker %d: session %#x expired (told by %s); opening a new one", k.w, k.session, addr)
		k.session, k.passwd = 0, nil
		return lost("session expired")
	}
	k.connNo++
	k.z.conns.Add(1)
	c.readTimeout = time.Duration(resp.TimeOut) * time.Millisecond * 2 / 3
	k.conn = c
	switch {
	case k.session == 0:
		k.z.sessions.Add(1)
		k.session, k.passwd = resp.SessionID, resp.Passwd
		k.seen, k.known = map[string]int32{}, map[string]int32{}
	case resp.SessionID != k.session:
		k.z.problem(otherSess, "%s: the resume of session %#x was answered with session %#x", k.where(0), k.session, resp.SessionID)
		k.session, k.passwd = resp.SessionID, resp.Passwd
		k.seen, k.known = map[string]int32{}, map[string]int32{}
	}
	if err := k.authenticate(ctx); err != nil {
		k.drop()
		return err
	}
	return nil
}

// tlsConfig is the run's client TLS configuration (nil without
// -chaos.tls).
func (k *kazooWorker) tlsConfig() *tls.Config {
	if k.z.e.c.tls == nil {
		return nil
	}
	return k.z.e.c.tls.client
}

// authenticate adds the workloads' identity to the session with -chaos.acl,
// with xid -4, and waits for its answer, as kazoo does after every
// connect.
func (k *kazooWorker) authenticate(ctx context.Context) error {
	if k.z.e.c.acl == nil {
		return nil
	}
	if err := k.conn.request(jute.XidAuth, jute.OpAuth, &jute.AuthPacket{Scheme: "digest", Auth: []byte(aclUser + ":" + aclPassword)}); err != nil {
		return err
	}
	h, _, err := k.conn.await(ctx, jute.XidAuth)
	var stray *strayReply
	switch {
	case errors.As(err, &stray):
		k.wrong("%s: %v", k.where(jute.XidAuth), err)
		return err
	case err != nil:
		return err
	case h.Err != jute.CodeOK:
		k.z.e.authProblem("zk-renumber worker %d (session %#x): addAuth digest %s answered %v", k.w, k.session, aclUser, h.Err)
		return fmt.Errorf("zk-renumber: addAuth: %v", h.Err)
	}
	return nil
}

// call sends one request with the connection's next xid and waits for its
// reply; with dropInFlight, it drops the connection once the request is
// sent. An error means no definite answer: the connection is gone (and
// dropped). A reply of another xid is reported as a wrong reply.
func (k *kazooWorker) call(ctx context.Context, op jute.OpCode, body jute.Encoder, dropInFlight bool) (int32, jute.ReplyHeader, []byte, error) {
	xid := k.conn.next()
	for m := k.z.maxXid.Load(); int64(xid) > m && !k.z.maxXid.CompareAndSwap(m, int64(xid)); m = k.z.maxXid.Load() {
	}
	if err := k.conn.request(xid, op, body); err != nil {
		k.lostConn(err)
		return xid, jute.ReplyHeader{}, nil, err
	}
	if dropInFlight {
		k.z.flightDrops.Add(1)
		k.drop()
		return xid, jute.ReplyHeader{}, nil, lost("dropped by the worker with xid %d in flight", xid)
	}
	h, b, err := k.conn.await(ctx, xid)
	var stray *strayReply
	if errors.As(err, &stray) {
		k.wrong("%s: %v %v", k.where(xid), op, err)
	}
	if err != nil {
		k.lostConn(err)
		return xid, h, b, err
	}
	switch {
	case h.Zxid > k.lastZxid:
		k.lastZxid = h.Zxid
	case h.Zxid > 0 && h.Zxid < k.lastZxid:
		// Every server answers at or beyond the zxid the client reported
		// when it connected (single system image), and a session's
		// replies come in order: an older zxid is an older reply.
		k.z.problem(orderBack, "%s: %v answered %v with zxid %d, below the %d the session had seen", k.where(xid), op, h.Err, h.Zxid, k.lastZxid)
	}
	if h.Err == jute.CodeSessionExpired {
		k.z.expiries.Add(1)
		k.drop()
		k.session, k.passwd = 0, nil
	}
	return xid, h, b, nil
}

// lostConn drops a connection that failed (not at the worker's wish).
func (k *kazooWorker) lostConn(err error) {
	if !errors.Is(err, errRunOver) {
		k.z.faultLosses.Add(1)
	}
	k.drop()
}

// wrong records a reply that belongs to another request.
func (k *kazooWorker) wrong(format string, args ...any) {
	k.z.problem(wrongReply, format, args...)
}

// transient are the codes that leave a request's outcome open (and the
// connection or session to be replaced).
func transient(c jute.Code) bool {
	switch c {
	case jute.CodeConnectionLoss, jute.CodeOperationTimeout, jute.CodeSessionExpired, jute.CodeSessionMoved,
		jute.CodeRequestTimeout, jute.CodeThrottledOp:
		return true
	}
	return false
}

// refused sorts an error code that is not a success the request can get,
// and says whether the request definitely did not apply: a transient code
// leaves the outcome open; NoAuth (an authenticated request refused) and
// SystemError (a request taken for a stale retry) are refusals, which
// coordd answers only to a request it did not apply; any other code is a
// wrong reply (a code the request cannot get), whose request may have
// applied. Each but the first fails the run.
func (k *kazooWorker) refused(xid int32, what string, h jute.ReplyHeader) (notApplied bool) {
	switch {
	case transient(h.Err):
		return false
	case h.Err == jute.CodeNoAuth:
		k.z.e.authProblem("zk-renumber %s (authenticated): %s refused: %v", k.where(xid), what, h.Err)
		return true
	case h.Err == jute.CodeSystemError:
		k.z.problem(refusedReq, "%s: %s answered SystemError (zxid %d): a request taken for a stale retry?", k.where(xid), what, h.Zxid)
		return true
	}
	k.wrong("%s: %s answered %v (zxid %d), which it cannot get", k.where(xid), what, h.Err, h.Zxid)
	return false
}

// sawVersion checks a version the session read or wrote against the ones
// it saw before (write: must be above them; read: not below) and records
// it (unless it is wrong).
func (k *kazooWorker) sawVersion(xid int32, what, key string, v int32, write bool) {
	prev, ok := k.seen[key]
	if ok && (v < prev || write && v == prev) {
		k.wrong("%s: %s answered version %d, but the session saw version %d of %s before", k.where(xid), what, v, prev, key)
		return
	}
	k.seen[key] = v
	k.known[key] = v
}

// register runs one of the registers workload's operations and records it.
// A sync+getData drops the connection once its sync is sent if
// dropInFlight; it says whether it did.
func (k *kazooWorker) register(ctx context.Context, n int, dropInFlight bool) (dropped bool) {
	z, r := k.z, k.z.r
	key := r.keys[k.rng.IntN(len(r.keys))]
	in := regInput{Op: k.rng.IntN(3), Key: key, Value: fmt.Sprintf("kz%d-%d", k.w, n)}
	if in.Op == opCAS {
		in.Expect = k.known[key] + int32(k.rng.IntN(2))
	}
	what := r.describe(in)
	call := z.e.since().Nanoseconds()
	unknown := func() {
		z.cnt.indet.Add(1)
		r.record(porcupine.Operation{ClientId: k.lane, Input: in, Call: call, Output: regOutput{Unknown: true}})
		// It may still apply: what this worker does next goes in a new
		// lane of the visualization.
		k.lane = r.lane()
	}
	done := func(out regOutput) {
		z.cnt.ok.Add(1)
		r.record(porcupine.Operation{ClientId: k.lane, Input: in, Call: call, Output: out, Return: z.e.since().Nanoseconds()})
	}
	if in.Op == opSyncRead {
		k.syncRead(ctx, in, what, dropInFlight, done)
		return dropInFlight
	}
	version := int32(-1)
	if in.Op == opCAS {
		version = in.Expect
	}
	xid, h, body, err := k.call(ctx, jute.OpSetData, &jute.SetDataRequest{Path: key, Data: []byte(in.Value), Version: version}, false)
	var resp jute.SetDataResponse
	switch {
	case err != nil:
		unknown()
	case h.Err == jute.CodeOK:
		if err := decodeExact(body, &resp); err != nil {
			k.wrong("%s: %s answered OK with a body that is no setData reply: %v (% x)", k.where(xid), what, err, body)
			unknown()
			return false
		}
		// A reply that decodes goes into the history as it came, even when
		// it is found wrong here: porcupine must find it impossible too.
		v := resp.Stat.Version
		if in.Op == opCAS && v != in.Expect+1 {
			k.wrong("%s: %s answered OK with version %d", k.where(xid), what, v)
		}
		k.sawVersion(xid, what, key, v, true)
		done(regOutput{Version: v})
	case h.Err == jute.CodeBadVersion && in.Op == opCAS:
		done(regOutput{BadVersion: true})
	case k.refused(xid, what, h):
		z.cnt.fail.Add(1) // no effect: left out of the history
	default:
		unknown()
	}
	return false
}

// syncRead is ZooKeeper's linearizable read: sync, then getData on the
// same connection. A read that fails has no effect and is not recorded.
func (k *kazooWorker) syncRead(ctx context.Context, in regInput, what string, dropInFlight bool, done func(regOutput)) {
	z := k.z
	xid, h, body, err := k.call(ctx, jute.OpSync, &jute.SyncRequest{Path: in.Key}, dropInFlight)
	if err == nil && h.Err == jute.CodeOK {
		var sr jute.SyncResponse
		if derr := decodeExact(body, &sr); derr != nil || sr.Path != in.Key {
			k.wrong("%s: sync %s answered OK with path %q (%v; % x)", k.where(xid), in.Key, sr.Path, derr, body)
			z.cnt.fail.Add(1)
			return
		}
		xid, h, body, err = k.call(ctx, jute.OpGetData, &jute.GetDataRequest{Path: in.Key}, false)
	}
	switch {
	case err != nil:
		z.cnt.fail.Add(1)
	case h.Err == jute.CodeOK:
		var resp jute.GetDataResponse
		if err := decodeExact(body, &resp); err != nil {
			k.wrong("%s: getData %s answered OK with a body that is no getData reply: %v (% x)", k.where(xid), in.Key, err, body)
			z.cnt.fail.Add(1)
			return
		}
		k.sawVersion(xid, what, in.Key, resp.Stat.Version, false)
		done(regOutput{Value: string(resp.Data), Version: resp.Stat.Version})
	default:
		k.refused(xid, what, h)
		z.cnt.fail.Add(1)
	}
}

// create makes a node of a unique path (plain or sequential); the reply
// must name that path.
func (k *kazooWorker) create(ctx context.Context, n int, dropInFlight bool) {
	z := k.z
	seq := k.rng.IntN(2) == 0
	id := fmt.Sprintf("p%d-%d", k.w, n)
	mode := jute.ModePersistent
	if seq {
		id, mode = fmt.Sprintf("s%d-%d", k.w, n), jute.ModePersistentSequential
	}
	path := zkCreateDir + "/" + id
	if seq {
		path += "-"
	}
	acl := jute.OpenACL()
	if z.e.c.acl != nil {
		acl = []jute.ACL{{Perms: jute.PermAll, ID: jute.AuthIDs}}
	}
	what := fmt.Sprintf("create %s (%v)", path, mode)
	z.mu.Lock()
	z.issued[id] = true
	z.mu.Unlock()
	xid, h, body, err := k.call(ctx, jute.OpCreate, &jute.CreateRequest{Path: path, Data: []byte(id), ACL: acl, Flags: mode}, dropInFlight)
	definite := false // the create did not apply
	switch {
	case err != nil:
	case h.Err == jute.CodeOK:
		var resp jute.CreateResponse
		if derr := decodeExact(body, &resp); derr != nil || !namesCreate(resp.Path, path, seq) {
			k.wrong("%s: %s answered OK with path %q (%v; % x)", k.where(xid), what, resp.Path, derr, body)
			break
		}
		z.mu.Lock()
		z.acked[id] = resp.Path
		z.mu.Unlock()
		z.cnt.ok.Add(1)
		return
	default:
		definite = k.refused(xid, what, h)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if definite {
		z.failed[id] = true
		z.cnt.fail.Add(1)
		return
	}
	z.unsure[id] = true
	z.cnt.indet.Add(1)
}

// namesCreate says whether got is the path a create of path returns: path
// itself, or for a sequential create path and ten digits.
func namesCreate(got, path string, seq bool) bool {
	if !seq {
		return got == path
	}
	digits, ok := strings.CutPrefix(got, path)
	if !ok || len(digits) != 10 {
		return false
	}
	_, err := strconv.ParseUint(digits, 10, 64)
	return err == nil
}

// closeSession ends the session at the end of the run, as kazoo's stop
// does.
func (k *kazooWorker) closeSession() {
	if k.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := k.conn.request(k.conn.next(), jute.OpCloseSession, nil); err == nil {
		_, _, _ = k.conn.await(ctx, k.conn.xid)
	}
	k.drop()
}

// check lists the creates' directory as the checker and verifies it.
func (z *zkRenumber) check(ctx context.Context, cl *client.Client, v *verdict) {
	if err := cl.Sync(ctx, zkCreateDir); err != nil {
		v.failf("final sync: %v", err)
		return
	}
	kids, _, err := cl.Children(ctx, zkCreateDir)
	if err != nil {
		v.failf("final listing: %v", err)
		return
	}
	z.verify(kids, v)
}

// verify fails v for every problem found as the run went, and checks the
// final listing of the creates' directory: every acknowledged create is
// there exactly once under the name it was answered with, none that
// definitely failed is there, none of unknown outcome is there twice, and
// nothing else is.
func (z *zkRenumber) verify(kids []string, v *verdict) {
	z.mu.Lock()
	defer z.mu.Unlock()
	for _, kind := range problemKinds {
		for _, p := range z.problems[kind] {
			v.failf("%s", p)
		}
		if more := z.found[kind] - len(z.problems[kind]); more > 0 {
			v.failf("%s: %d more", kind, more)
		}
	}
	byID := map[string][]string{}
	for _, k := range kids {
		id := k
		if strings.HasPrefix(k, "s") {
			i := strings.LastIndexByte(k, '-')
			if i < 0 || !namesCreate(k, k[:i+1], true) {
				v.failf("unexpected child %q", k)
				continue
			}
			id = k[:i]
		}
		byID[id] = append(byID[id], k)
	}
	for id, names := range byID {
		switch {
		case !z.issued[id]:
			v.failf("child %v was never created by the workload", names)
		case len(names) > 1:
			v.failf("create %s applied %d times: %v", id, len(names), names)
		case z.failed[id]:
			v.failf("create %s failed definitely but is present as %v", id, names)
		}
	}
	missing := 0
	for id, path := range z.acked {
		got := byID[id]
		switch {
		case len(got) == 0:
			missing++
			v.failf("acknowledged create %s (%s) is missing", id, path)
		case zkCreateDir+"/"+got[0] != path:
			v.failf("acknowledged create %s returned %s but the node is %s", id, path, got[0])
		}
	}
	present := 0
	for id := range z.unsure {
		if len(byID[id]) > 0 {
			present++
		}
	}
	v.notef("%d sessions, %d connections (xids from 1 on each, up to %d), %d dropped by the worker (%d with a request in flight), %d lost to faults, %d expiries",
		z.sessions.Load(), z.conns.Load(), z.maxXid.Load(), z.idleDrops.Load()+z.flightDrops.Load(), z.flightDrops.Load(), z.faultLosses.Load(), z.expiries.Load())
	v.notef("creates: %d children; %d acknowledged (%d missing); %d indeterminate of which %d present; %d failed; %d wrong replies, %d refusals",
		len(kids), len(z.acked), missing, len(z.unsure), present, len(z.failed), z.found[wrongReply], z.found[refusedReq])
	if resumes := z.conns.Load() - z.sessions.Load(); resumes == 0 && z.cnt.ok.Load() > 300 {
		v.failf("the session was never resumed on a new connection: the check proves nothing")
	}
}
