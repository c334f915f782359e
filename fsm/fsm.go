package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/fsm/cmdpb"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
)

// Applied describes what one log entry did. The FSM passes it to its
// Observer with the write lock held; it is only valid during that call.
type Applied struct {
	// Index is the entry's log index: the zxid of everything it changed.
	Index int64
	// Term is the Raft term the entry was written in.
	Term uint64
	// Cmd is the decoded command.
	Cmd *cmdpb.Command
	// Session and Xid identify the client request this entry answers
	// (0 when none: session expiry, reaping, no-ops); Epoch, when not 0,
	// is the connection it came on, and Xid then the server's number of
	// the request on it, not the client's (see cmdpb.Write.epoch).
	Session int64
	Xid     int64
	Epoch   int64
	// Result is the outcome of a Write or CloseSession (the cached first
	// outcome when the write was a retry).
	Result *cmdpb.Result
	// Refused is set when the write was refused for who sent it, without
	// being applied: a stale retry, an xid used before for another
	// request, a connection the session replaced, a re-proposal of a
	// request applied already, a server that no longer owns the session.
	Refused bool
	// Events are what the entry changed, in order, for the server's watch
	// table (which is not replicated state, and so not the FSM's).
	Events []tree.Event
	// Configuration is set when the entry is a Raft configuration (a
	// membership change) rather than a command (Cmd is then nil); its
	// Events are /zookeeper/config's change.
	Configuration bool
	// Opened is set when the entry opened a session.
	Opened *session.Info
	// Resumed is set when the entry moved a session to the server whose
	// client resumed it (ResumeSession): that server is its owner now.
	Resumed *Resumed
	// Closed lists the sessions this entry closed.
	Closed []int64
	// LockDelayed lists the ephemerals of an expired session that this
	// entry kept for a lock-delay instead of deleting them (lockdelay.go);
	// LockDelaysReleased counts the kept nodes it released once their
	// delay had passed, LockDelaysDeleted those it deleted otherwise
	// before (which ends their delay).
	LockDelayed                           []string
	LockDelaysReleased, LockDelaysDeleted int
	// ClosedIdentities are the identities (addAuth) the sessions in Closed
	// held until this entry, which the registry has forgotten: the events
	// a closing session's own watches match (its ephemerals' deletion) are
	// delivered under them, as ZooKeeper's connection keeps its auth info
	// to the end. Nil when none held one; shared, not modified.
	ClosedIdentities map[int64][]session.Identity
	// Tree and Sessions are the state right after the entry, for reads run
	// inside the callback (the caller holds the write lock; do not keep them).
	Tree     *tree.Tree
	Sessions *session.Registry
}

// Resumed names a session and the server that owns it now.
type Resumed struct {
	Session int64
	Server  string
	// Epoch is the session's connection epoch from now on, when the
	// cluster records epochs (level 2); 0 otherwise.
	Epoch int64
	// Stale is set when the resume changed nothing: its epoch was not
	// above the session's (a re-proposal of an earlier resume, or one that
	// lost a race with another connection's). Server is then not the
	// owner.
	Stale bool
}

// Observer learns what every applied entry did. Both methods are called
// with the FSM's write lock held and must not block or call back into the
// FSM's locking methods.
type Observer interface {
	Applied(a *Applied)
	// Restored is called after a snapshot replaced the whole state; every
	// session connected to this server must re-register its watches.
	Restored()
}

// DataSizeCap is the most data a znode can hold in any coordd cluster, and
// so the largest MaxDataSize a server may be configured with.
//
// Applying an entry and reading a snapshot check data against DataSizeCap,
// never against the server's own MaxDataSize: servers may be configured
// differently (while the limit is raised or lowered one server at a time),
// and every server must apply every entry alike. MaxDataSize is an admission
// limit, checked by the server a client talks to before a write enters the
// log.
const DataSizeCap = 64 << 20

// Level is the highest command level this build applies (see
// cmdpb.SetLevel): the commands and fields it proposes once the cluster has
// been raised to it.
const Level = 2

// Options configures an FSM.
type Options struct {
	// MaxDataSize is the largest znode data this server admits
	// (0: tree.DefaultMaxDataSize); see DataSizeCap.
	MaxDataSize int
	// Logger receives warnings.
	Logger *slog.Logger
	// Halt is called, once, when the FSM meets an entry it must not apply
	// and must not skip: one it cannot decode (damaged, or from a newer
	// coordd), or one that raises the cluster above Level. The FSM applies
	// nothing from then on; the server must stop (see Halted). It is
	// called with the FSM's lock held, from Raft's apply loop: it must not
	// block or call into the FSM.
	Halt func(err error)
}

// HaltError is why an FSM stopped applying: the entry's index and what is
// wrong with it.
type HaltError struct {
	Index int64
	Err   error
}

// Error says where and why.
func (e *HaltError) Error() string {
	return fmt.Sprintf("fsm: log entry %d: %v; this server stops rather than skip it and diverge from the others", e.Index, e.Err)
}

// Unwrap returns the cause.
func (e *HaltError) Unwrap() error { return e.Err }

// FSM is coordd's raft.BatchingFSM.
type FSM struct {
	opts Options // MaxDataSize set: the default when 0
	log  *slog.Logger

	mu       sync.RWMutex
	tree     *tree.Tree
	sessions *session.Registry
	now      int64  // max leader time seen, ms
	term     uint64 // Raft term of the last applied entry (0: unknown, after a restore)
	level    int64  // the cluster's command level (see cmdpb.SetLevel); 1 before any SetLevel
	halted   atomic.Pointer[HaltError]
	applied  atomic.Int64
	changed  atomic.Int64 // see LastChange
	observer Observer

	waitMu sync.Mutex
	waitCh chan struct{} // closed and replaced whenever applied advances
}

// New returns an empty FSM: a tree holding only "/" and ZooKeeper's system
// nodes (tree.AddSystemNodes), no sessions.
func New(opts Options) *FSM {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxDataSize <= 0 {
		opts.MaxDataSize = tree.DefaultMaxDataSize
	}
	t := tree.New(tree.Options{MaxDataSize: DataSizeCap})
	t.AddSystemNodes()
	return &FSM{
		opts:     opts,
		log:      opts.Logger,
		tree:     t,
		sessions: session.NewRegistry(),
		level:    1,
		waitCh:   make(chan struct{}),
	}
}

// halt stops the FSM for good at the entry index (f.mu held).
func (f *FSM) halt(index int64, err error) {
	h := &HaltError{Index: index, Err: err}
	if !f.halted.CompareAndSwap(nil, h) {
		return
	}
	f.log.Error("stopping: a log entry can neither be applied nor skipped", "index", index, "err", err)
	if f.opts.Halt != nil {
		f.opts.Halt(h)
	}
}

// Halted returns why the FSM stopped applying entries, or nil while it
// applies them (see Options.Halt).
func (f *FSM) Halted() *HaltError { return f.halted.Load() }

// ClusterLevel returns the cluster's command level as applied here (see
// cmdpb.SetLevel): 1 until an entry raised it.
func (f *FSM) ClusterLevel() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.level
}

// SetObserver installs the observer (before Raft starts applying).
func (f *FSM) SetObserver(o Observer) {
	f.mu.Lock()
	f.observer = o
	f.mu.Unlock()
}

// MaxDataSize returns the largest znode data this server admits (see
// DataSizeCap).
func (f *FSM) MaxDataSize() int { return f.opts.MaxDataSize }

// AppliedIndex returns the index of the last entry the FSM applied.
func (f *FSM) AppliedIndex() int64 { return f.applied.Load() }

// LastChange returns the index of the last applied entry that may have
// changed the state: every entry but a no-op command. A read sees the same
// state at any index from LastChange to AppliedIndex, so a read index may
// be lowered to it (a server that applied this index has applied every
// change up to AppliedIndex).
func (f *FSM) LastChange() int64 { return f.changed.Load() }

// View is read access to the state, valid only inside Read's callback.
type View struct {
	Tree     *tree.Tree
	Sessions *session.Registry
	// Applied is the zxid of the last applied entry.
	Applied int64
	// Level is the cluster's command level (see cmdpb.SetLevel).
	Level int64
}

// Read runs fn with the read lock held: no entry is applied while it runs,
// so fn sees one consistent state (and a watch registered in fn is in place
// before the next entry's events are delivered).
func (f *FSM) Read(fn func(v View)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(View{Tree: f.tree, Sessions: f.sessions, Applied: f.applied.Load(), Level: f.level})
}

// Changed returns a channel closed the next time the applied index moves.
func (f *FSM) Changed() <-chan struct{} {
	f.waitMu.Lock()
	defer f.waitMu.Unlock()
	return f.waitCh
}

func (f *FSM) signal() {
	f.waitMu.Lock()
	close(f.waitCh)
	f.waitCh = make(chan struct{})
	f.waitMu.Unlock()
}

// WaitApplied blocks until the FSM has applied index idx or done closes.
func (f *FSM) WaitApplied(done <-chan struct{}, idx int64) bool {
	for {
		ch := f.Changed()
		if f.applied.Load() >= idx {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return f.applied.Load() >= idx
		}
	}
}

// Apply applies one entry (raft.FSM).
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order (raft.BatchingFSM). The
// response for each entry is its *cmdpb.Result (nil when it has none).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	f.mu.Lock()
	for i, l := range logs {
		if f.halted.Load() != nil {
			break // nothing more is applied: the server is stopping
		}
		f.term = l.Term
		if l.Type == raft.LogCommand {
			if r := f.applyCommand(int64(l.Index), l.Term, l.Data); r != nil {
				out[i] = r
			}
		} else {
			f.changed.Store(int64(l.Index)) // a configuration: count it, to be safe
			if l.Type == raft.LogConfiguration {
				// ZooKeeper's /zookeeper/config follows the membership.
				tx := &tree.Tx{Zxid: int64(l.Index), Now: f.now}
				f.applyConfiguration(tx, l.Data)
				if f.halted.Load() != nil {
					break
				}
				f.applied.Store(int64(l.Index))
				if f.observer != nil {
					f.observer.Applied(&Applied{Index: int64(l.Index), Term: l.Term, Configuration: true, Events: tx.Events, Tree: f.tree, Sessions: f.sessions})
				}
			}
		}
		if f.halted.Load() != nil {
			break
		}
		if int64(l.Index) > f.applied.Load() {
			f.applied.Store(int64(l.Index))
		}
	}
	f.mu.Unlock()
	f.signal()
	return out
}

// DecodeCommand parses a log entry's payload.
func DecodeCommand(data []byte) (*cmdpb.Command, error) {
	cmd := &cmdpb.Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return nil, fmt.Errorf("fsm: undecodable command: %w", err)
	}
	if cmd.Cmd == nil {
		return nil, errors.New("fsm: command without a body")
	}
	return cmd, nil
}

func (f *FSM) applyCommand(index int64, term uint64, data []byte) *cmdpb.Result {
	cmd, err := DecodeCommand(data)
	if err != nil {
		// Damaged on this server's disk, or from a newer coordd than this
		// one: skipping it would leave this server with another state than
		// the others for good. A newer command is never proposed before
		// every server applies its level (cmdpb.SetLevel).
		f.halt(index, err)
		return nil
	}
	if c := cmd.GetSetLevel(); c != nil && c.Level > Level {
		f.halt(index, fmt.Errorf("the cluster runs at command level %d, and this coordd applies up to level %d: run a newer coordd on this server", c.Level, Level))
		return nil
	}
	if cmd.TimeMs > f.now {
		f.now = cmd.TimeMs
	}
	// changed before applied: whoever sees applied reach index sees the
	// change too.
	if cmd.GetNoop() == nil {
		f.changed.Store(index)
	}
	f.applied.Store(index)
	a := &Applied{Index: index, Term: term, Cmd: cmd}
	tx := &tree.Tx{Zxid: index, Now: f.now}
	switch c := cmd.Cmd.(type) {
	case *cmdpb.Command_Write:
		f.applyWrite(a, tx, c.Write)
	case *cmdpb.Command_OpenSession:
		info := session.Info{ID: index, TimeoutMs: c.OpenSession.TimeoutMs, Password: c.OpenSession.Password, Owner: c.OpenSession.Server}
		if err := f.sessions.Open(info); err == nil {
			f.newEpoch(index, index)
			a.Opened = &info
		}
	case *cmdpb.Command_ResumeSession:
		a.Resumed = f.resume(index, c.ResumeSession)
	case *cmdpb.Command_CloseSession:
		a.Session, a.Xid, a.Epoch = c.CloseSession.SessionId, c.CloseSession.Xid, c.CloseSession.Epoch
		if c.CloseSession.Xid != 0 {
			if r := f.moved(tx, c.CloseSession.SessionId, c.CloseSession.Server); r != nil {
				a.Result, a.Refused = r, true
				break
			}
		}
		if c.CloseSession.Expired && c.CloseSession.Term != term {
			// An expiry decided in one term but logged in another is a
			// stale leader's decision: the session's deadline was never
			// checked by the leader of this entry's term.
			f.log.Warn("ignoring an expiry from another term", "session", c.CloseSession.SessionId, "decided", c.CloseSession.Term, "logged", term)
			break
		}
		a.Result = f.closeSession(a, tx, c.CloseSession.SessionId, f.lockDelayRules(c.CloseSession))
	case *cmdpb.Command_Reap:
		for _, p := range c.Reap.Paths {
			f.reap(p, tx)
		}
	case *cmdpb.Command_AddAuth:
		a.Session, a.Xid, a.Epoch = c.AddAuth.SessionId, c.AddAuth.Xid, c.AddAuth.Epoch
		if r := f.moved(tx, c.AddAuth.SessionId, c.AddAuth.Server); r != nil {
			a.Result, a.Refused = r, true
			break
		}
		a.Result = f.addAuth(tx, c.AddAuth)
	case *cmdpb.Command_ClientAddress:
		f.setClientAddress(tx, c.ClientAddress)
	case *cmdpb.Command_SetLevel:
		if c.SetLevel.Level > f.level {
			f.log.Info("cluster raised to a new command level", "level", c.SetLevel.Level, "index", index)
			f.level = c.SetLevel.Level
		}
	case *cmdpb.Command_ReleaseLockDelays:
		f.releaseLockDelays(a, tx, c.ReleaseLockDelays)
	case *cmdpb.Command_Noop:
	}
	f.endDeletedLockDelays(a, tx)
	a.Tree, a.Sessions = f.tree, f.sessions
	a.Events = tx.Events
	if f.observer != nil {
		f.observer.Applied(a)
	}
	return a.Result
}

func (f *FSM) reap(p string, tx *tree.Tx) {
	st, err := f.tree.Exists(p)
	if err != nil {
		return
	}
	switch st.Kind {
	case tree.Container:
		_ = f.tree.ReapContainer(p, tx)
	case tree.TTL:
		_ = f.tree.ReapTTL(p, tx)
	}
}

// closeSession closes session id and deletes its ephemerals, but those
// that lockDelays keep for a lock-delay (an expiry's).
func (f *FSM) closeSession(a *Applied, tx *tree.Tx, id int64, lockDelays []*cmdpb.LockDelay) *cmdpb.Result {
	if _, ok := f.sessions.Owner(id); !ok {
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_EXPIRED, Message: "session expired or unknown"}
	}
	for _, p := range f.tree.EphemeralsOf(id) {
		if f.keepForLockDelay(a, tx, id, p, lockDelays) {
			continue
		}
		if err := f.tree.Delete(p, -1, tx); err != nil {
			f.log.Error("deleting ephemeral of closed session", "session", id, "path", p, "err", err)
		}
	}
	if ids := f.sessions.Identities(id); len(ids) > 0 {
		if a.ClosedIdentities == nil {
			a.ClosedIdentities = map[int64][]session.Identity{}
		}
		a.ClosedIdentities[id] = ids
	}
	f.sessions.Close(id)
	a.Closed = append(a.Closed, id)
	return &cmdpb.Result{Zxid: tx.Zxid}
}

// addAuth adds identities to a session (whose owner sent it). It is not
// cached for retries: adding identities the session holds already changes
// nothing.
func (f *FSM) addAuth(tx *tree.Tx, c *cmdpb.AddAuth) *cmdpb.Result {
	ids := make([]session.Identity, 0, len(c.Ids))
	for _, id := range c.Ids {
		ids = append(ids, session.Identity{Scheme: id.Scheme, ID: id.Id})
	}
	ok, err := f.sessions.AddIdentities(c.SessionId, ids)
	switch {
	case !ok:
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_EXPIRED, Message: "session expired or unknown"}
	case err != nil:
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_BAD_ARGUMENTS, Message: err.Error()}
	}
	return &cmdpb.Result{Zxid: tx.Zxid}
}

// moved returns the SESSION_MOVED result for a request of session id that
// server sent when another server owns the session, nil otherwise (also
// when either is unknown: entries and sessions logged before coordd recorded
// owners are not checked).
func (f *FSM) moved(tx *tree.Tx, id int64, server string) *cmdpb.Result {
	owner, ok := f.sessions.Owner(id)
	return movedResult(tx, id, owner, ok, server)
}

// movedResult is moved's answer for a session whose owner (and whether it
// is open) the caller looked up.
func movedResult(tx *tree.Tx, id int64, owner string, open bool, server string) *cmdpb.Result {
	if !open || server == "" || owner == "" || owner == server {
		return nil
	}
	return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_MOVED,
		Message: fmt.Sprintf("session 0x%x moved to server %s; server %s may no longer write for it", id, owner, server)}
}

func (f *FSM) applyWrite(a *Applied, tx *tree.Tx, w *cmdpb.Write) {
	a.Session, a.Xid, a.Epoch = w.SessionId, w.Xid, w.Epoch
	owner, ok := f.sessions.Owner(w.SessionId)
	if !ok {
		a.Result = &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_EXPIRED, Message: "session expired or unknown"}
		return
	}
	// A server that no longer owns the session writes nothing for it, and
	// the refusal is not cached: the client's retry of the same xid, from
	// the server it moved to, applies.
	if r := movedResult(tx, w.SessionId, owner, true, w.Server); r != nil {
		a.Result, a.Refused = r, true
		return
	}
	if w.Epoch != 0 {
		a.Result = f.notOfConnection(tx, w.SessionId, w.Epoch, w.Xid)
		a.Refused = a.Result != nil
	} else {
		a.Result, a.Refused = f.retried(tx, w)
	}
	if a.Result != nil {
		return
	}
	// The write's ACL checks, as its sender: the identities of the
	// connection it came on (stamped by the server that admitted it) and
	// those its session authenticated as, in the replicated registry.
	tx.Auth = &auth.Requester{Conn: ConnFromPB(w.Conn), IDs: f.sessions.Identities(w.SessionId)}
	a.Result = ExecWrite(f.tree, tx, w)
	if w.Epoch != 0 {
		f.sessions.Advance(w.SessionId, w.Xid)
	} else if enc, err := proto.Marshal(a.Result); err == nil {
		f.sessions.Record(w.SessionId, w.Xid, f.digest(w), enc)
	}
}

// retried answers a write of coordd's own client, keyed by the client's
// (session, xid), that is a retry: with the first outcome when it was
// applied before, refused (refused set) when the client acknowledged that
// outcome already or the xid was used by another request. It returns nil
// for a write to apply, after dropping the cached replies the client
// acknowledged.
func (f *FSM) retried(tx *tree.Tx, w *cmdpb.Write) (r *cmdpb.Result, refused bool) {
	if cached, digest, ok := f.sessions.Reply(w.SessionId, w.Xid); ok {
		if f.level >= 2 && digest != f.digest(w) {
			// Never another request's outcome: a client that reused
			// an xid for another request gets an error, and nothing
			// is applied.
			return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_BAD_ARGUMENTS,
				Message: fmt.Sprintf("xid %d of session 0x%x was used before by another request: a new request needs a new xid", w.Xid, w.SessionId)}, true
		}
		r := &cmdpb.Result{}
		if err := proto.Unmarshal(cached, r); err == nil {
			return r, false
		}
	}
	if w.Xid < f.sessions.Acked(w.SessionId) {
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SYSTEM_ERROR,
			Message: fmt.Sprintf("stale retry of xid %d: its reply was already acknowledged", w.Xid)}, true
	}
	f.sessions.Ack(w.SessionId, w.LowestPendingXid)
	return nil, false
}

// notOfConnection refuses a request of ZooKeeper's protocol, keyed by its
// connection's epoch and the server's number of it, that is not for the
// session's current connection (the client connected again since: its
// old connection is gone, and so is whoever waited for the answer) or that
// was applied already (a server proposed it again after a leader change).
// It returns nil for a request to apply. The client's own xid plays no
// part: a ZooKeeper client may number its requests afresh on every
// connection.
func (f *FSM) notOfConnection(tx *tree.Tx, id, epoch, seq int64) *cmdpb.Result {
	cur, last := f.sessions.Epoch(id)
	switch {
	case epoch != cur:
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_MOVED,
			Message: fmt.Sprintf("session 0x%x connected again (connection %d replaced connection %d)", id, cur, epoch)}
	case seq <= last:
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SYSTEM_ERROR,
			Message: fmt.Sprintf("request %d of connection %d of session 0x%x was applied already", seq, epoch, id)}
	}
	return nil
}

// resume applies a ResumeSession: the session's owner and, from level 2
// on, its connection epoch. A resume that names its epoch applies only if
// the epoch is above the session's current one, so that a re-proposal of an
// earlier resume, or one that lost a race with another connection's,
// changes nothing (Stale). It returns nil for a session that is not open.
func (f *FSM) resume(index int64, c *cmdpb.ResumeSession) *Resumed {
	r := &Resumed{Session: c.SessionId, Server: c.Server}
	if _, ok := f.sessions.Owner(c.SessionId); !ok {
		return nil
	}
	if c.Epoch != 0 && f.level >= 2 {
		if cur, _ := f.sessions.Epoch(c.SessionId); c.Epoch <= cur {
			r.Epoch, r.Stale = c.Epoch, true
			return r
		}
		if f.sessions.SetOwner(c.SessionId, c.Server) != nil || f.sessions.SetEpoch(c.SessionId, c.Epoch) != nil {
			return nil
		}
		r.Epoch = c.Epoch
		return r
	}
	if f.sessions.SetOwner(c.SessionId, c.Server) != nil {
		return nil
	}
	r.Epoch = f.newEpoch(c.SessionId, index)
	return r
}

// newEpoch records, from level 2 on, that the client of session id
// connected anew at entry index (it opened or resumed the session), and
// returns the epoch recorded (0 below level 2).
func (f *FSM) newEpoch(id, index int64) int64 {
	if f.level < 2 || f.sessions.SetEpoch(id, index) != nil {
		return 0
	}
	return index
}

// digest identifies a write's request, whatever connection and server it
// came by, for the reply cache (from level 2 on; 0 below it, as recorded
// before): FNV-1a over the deterministic encoding of its operation.
func (f *FSM) digest(w *cmdpb.Write) uint64 {
	if f.level < 2 {
		return 0
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&cmdpb.Write{Op: w.Op})
	h := fnv.New64a()
	h.Write(b)
	if d := h.Sum64(); d != 0 {
		return d
	}
	return 1 // 0 means none recorded
}

// ExecWrite runs one client write on t and reports its result; tx.Auth
// checks its permissions (nil: none).
func ExecWrite(t *tree.Tree, tx *tree.Tx, w *cmdpb.Write) *cmdpb.Result {
	r := &cmdpb.Result{Zxid: tx.Zxid}
	var err error
	switch op := w.Op.(type) {
	case *cmdpb.Write_Create:
		var st tree.Stat
		r.Path, st, err = t.Create(createOf(op.Create, w.SessionId), tx)
		if err == nil {
			r.Stat = StatToPB(st)
		}
	case *cmdpb.Write_Delete:
		err = t.Delete(op.Delete.Path, op.Delete.Version, tx)
	case *cmdpb.Write_SetData:
		var st tree.Stat
		st, err = t.SetData(op.SetData.Path, dataOf(op.SetData.Data, op.SetData.NullData), op.SetData.Version, tx)
		if err == nil {
			r.Stat = StatToPB(st)
		}
	case *cmdpb.Write_SetAcl:
		var st tree.Stat
		st, err = t.SetACL(op.SetAcl.Path, ACLFromPB(op.SetAcl.Acl), op.SetAcl.Version, tx)
		if err == nil {
			r.Stat = StatToPB(st)
		}
	case *cmdpb.Write_Multi:
		ops := make([]tree.Op, 0, len(op.Multi.Ops))
		for _, o := range op.Multi.Ops {
			ops = append(ops, opOf(o, w.SessionId))
		}
		var res []tree.OpResult
		res, err = t.Multi(ops, tx)
		for _, or := range res {
			pr := &cmdpb.OpResult{Code: CodeOf(or.Err), Path: or.Path}
			if or.Err != nil {
				pr.Message = Detail(or.Err)
				pr.Path = ""
			} else if or.Type != tree.OpDelete && or.Type != tree.OpCheck {
				pr.Stat = StatToPB(or.Stat)
			}
			r.Ops = append(r.Ops, pr)
		}
	default:
		err = fmt.Errorf("%w: write without an operation", tree.ErrBadArguments)
	}
	if err != nil {
		r.Code, r.Message, r.Path, r.Stat = CodeOf(err), Detail(err), "", nil
	}
	return r
}

// Detail is an error's message without the text of the sentinel it wraps
// (the code already says that): "/a has version 0, not 5", not
// "tree: version does not match: /a has version 0, not 5".
func Detail(err error) string {
	msg := err.Error()
	for _, s := range []error{tree.ErrNoNode, tree.ErrNodeExists, tree.ErrBadVersion, tree.ErrNotEmpty,
		tree.ErrNoChildrenForEphemerals, tree.ErrBadArguments, tree.ErrRuntimeInconsistency, tree.ErrRolledBack,
		tree.ErrNoAuth, tree.ErrInvalidACL} {
		if errors.Is(err, s) {
			if rest, ok := strings.CutPrefix(msg, s.Error()+": "); ok {
				return rest
			}
			if msg == s.Error() {
				return ""
			}
		}
	}
	return msg
}

// dataOf is a command's data for the tree: nil when the client sent null,
// a non-nil slice (empty or not) otherwise. Protobuf does not tell an
// empty bytes field from an absent one, hence the command's flag.
func dataOf(data []byte, null bool) []byte {
	switch {
	case null:
		return nil
	case data == nil:
		return []byte{}
	}
	return data
}

func createOf(c *cmdpb.Create, sess int64) tree.Create {
	tc := tree.Create{Path: c.Path, Data: dataOf(c.Data, c.NullData), Kind: tree.Kind(c.Kind), Sequential: c.Sequential, TTL: c.TtlMs, ACL: ACLFromPB(c.Acl)}
	if tc.Kind == tree.Ephemeral {
		tc.Owner = sess
	}
	return tc
}

func opOf(o *cmdpb.Op, sess int64) tree.Op {
	switch op := o.Op.(type) {
	case *cmdpb.Op_Create:
		c := createOf(op.Create, sess)
		return tree.Op{Type: tree.OpCreate, Path: c.Path, Data: c.Data, Kind: c.Kind, Sequential: c.Sequential, Owner: c.Owner, TTL: c.TTL, ACL: c.ACL}
	case *cmdpb.Op_Delete:
		return tree.Op{Type: tree.OpDelete, Path: op.Delete.Path, Version: op.Delete.Version}
	case *cmdpb.Op_SetData:
		return tree.Op{Type: tree.OpSetData, Path: op.SetData.Path, Data: dataOf(op.SetData.Data, op.SetData.NullData), Version: op.SetData.Version}
	case *cmdpb.Op_Check:
		return tree.Op{Type: tree.OpCheck, Path: op.Check.Path, Version: op.Check.Version}
	}
	// An op with no body: a check of an invalid path fails cleanly.
	return tree.Op{Type: tree.OpCheck, Path: ""}
}

// CodeOf maps a tree error to its result code.
func CodeOf(err error) cmdpb.Code {
	switch {
	case err == nil, errors.Is(err, tree.ErrRolledBack):
		return cmdpb.Code_OK
	case errors.Is(err, tree.ErrNoNode):
		return cmdpb.Code_NO_NODE
	case errors.Is(err, tree.ErrNodeExists):
		return cmdpb.Code_NODE_EXISTS
	case errors.Is(err, tree.ErrBadVersion):
		return cmdpb.Code_BAD_VERSION
	case errors.Is(err, tree.ErrNotEmpty):
		return cmdpb.Code_NOT_EMPTY
	case errors.Is(err, tree.ErrNoChildrenForEphemerals):
		return cmdpb.Code_NO_CHILDREN_FOR_EPHEMERALS
	case errors.Is(err, tree.ErrBadArguments):
		return cmdpb.Code_BAD_ARGUMENTS
	case errors.Is(err, tree.ErrRuntimeInconsistency):
		return cmdpb.Code_RUNTIME_INCONSISTENCY
	case errors.Is(err, tree.ErrNoAuth):
		return cmdpb.Code_NO_AUTH
	case errors.Is(err, tree.ErrInvalidACL):
		return cmdpb.Code_INVALID_ACL
	}
	return cmdpb.Code_SYSTEM_ERROR
}

// StatFromPB converts a result's stat back to a tree stat.
func StatFromPB(s *cmdpb.Stat) tree.Stat {
	return tree.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: tree.Kind(s.Kind), TTL: s.TtlMs,
	}
}

// StatToPB converts a tree stat to its wire form.
func StatToPB(s tree.Stat) *cmdpb.Stat {
	return &cmdpb.Stat{
		Czxid: s.Czxid, Mzxid: s.Mzxid, Pzxid: s.Pzxid, Ctime: s.Ctime, Mtime: s.Mtime,
		Version: s.Version, Cversion: s.Cversion, Aversion: s.Aversion,
		EphemeralOwner: s.EphemeralOwner, DataLength: s.DataLength, NumChildren: s.NumChildren,
		Kind: cmdpb.Kind(s.Kind), TtlMs: s.TTL,
	}
}

// Snapshot captures the state in O(1) (raft.FSM); Persist encodes it while
// Apply goes on.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &snapshot{tree: f.tree.Clone(), sessions: f.sessions.Clone(), applied: f.applied.Load(), now: f.now, level: f.level}, nil
}

// snapshotMagic starts every snapshot; the digit is the format version:
// 1, or 2 when the cluster's command level is 2 or more (the level follows
// the header), so that an older server reads every snapshot of a cluster
// it may still be a member of.
var (
	snapshotMagic   = [8]byte{'C', 'O', 'O', 'R', 'D', 'S', 'N', '1'}
	snapshotMagicV2 = [8]byte{'C', 'O', 'O', 'R', 'D', 'S', 'N', '2'}
)

type snapshot struct {
	tree     *tree.Tree
	sessions *session.Registry
	applied  int64
	now      int64
	level    int64
}

// WriteTo encodes the snapshot: magic, applied index, time, the session
// registry's length, from version 2 the command level, then the session
// registry and the tree. Same state, same bytes.
func (s *snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	var reg countingBuffer
	if _, err := s.sessions.WriteTo(&reg); err != nil {
		return 0, err
	}
	hdr := make([]byte, 32, 40)
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:], uint64(s.applied))
	binary.BigEndian.PutUint64(hdr[16:], uint64(s.now))
	binary.BigEndian.PutUint64(hdr[24:], uint64(len(reg.b)))
	if s.level >= 2 {
		copy(hdr[:8], snapshotMagicV2[:])
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(s.level))
	}
	n := int64(0)
	for _, b := range [][]byte{hdr, reg.b} {
		m, err := bw.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	m, err := s.tree.WriteTo(bw)
	n += m
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

type countingBuffer struct{ b []byte }

func (c *countingBuffer) Write(p []byte) (int, error) { c.b = append(c.b, p...); return len(p), nil }

// Persist writes the snapshot to the sink (raft.FSMSnapshot).
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release is a no-op: the captured state is garbage collected.
func (s *snapshot) Release() {}

// maxRegistrySnapshot bounds the registry section of a snapshot before it is
// read into memory.
const maxRegistrySnapshot = 1 << 31

// Restore replaces the whole state with a snapshot's (raft.FSM). The
// observer is told, so that the server drops its watches and its connected
// sessions re-register them.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := ReadSnapshot(rc, DataSizeCap)
	if err != nil {
		return err
	}
	if st.Level > Level {
		return fmt.Errorf("fsm: the snapshot is of a cluster at command level %d, and this coordd applies up to level %d: run a newer coordd on this server", st.Level, Level)
	}
	f.mu.Lock()
	f.tree, f.sessions, f.now, f.term, f.level = st.Tree, st.Sessions, st.Now, 0, st.Level
	f.changed.Store(st.Applied)
	f.applied.Store(st.Applied)
	if f.observer != nil {
		f.observer.Restored()
	}
	f.mu.Unlock()
	f.signal()
	return nil
}

// State is a whole state machine's state, as a snapshot holds it.
type State struct {
	Tree     *tree.Tree
	Sessions *session.Registry
	// Applied is the index of the last entry applied; Now the leader's
	// time it had reached (ms); Level the cluster's command level.
	Applied, Now, Level int64
}

// ReadSnapshot decodes a snapshot written by the FSM, rejecting garbage.
func ReadSnapshot(r io.Reader, maxData int) (*State, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var hdr [32]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, fmt.Errorf("fsm: snapshot header: %w", err)
	}
	st := &State{Level: 1}
	switch [8]byte(hdr[:8]) {
	case snapshotMagic:
	case snapshotMagicV2:
		var lv [8]byte
		if _, err := io.ReadFull(br, lv[:]); err != nil {
			return nil, fmt.Errorf("fsm: snapshot header: %w", err)
		}
		st.Level = int64(binary.BigEndian.Uint64(lv[:]))
		if st.Level < 2 {
			return nil, errors.New("fsm: corrupt snapshot header (level)")
		}
	default:
		return nil, errors.New("fsm: not a coordd snapshot (bad magic)")
	}
	st.Applied = int64(binary.BigEndian.Uint64(hdr[8:]))
	st.Now = int64(binary.BigEndian.Uint64(hdr[16:]))
	regLen := binary.BigEndian.Uint64(hdr[24:])
	if st.Applied < 0 || regLen > maxRegistrySnapshot {
		return nil, errors.New("fsm: corrupt snapshot header")
	}
	regBytes, err := io.ReadAll(io.LimitReader(br, int64(regLen)))
	if err != nil || uint64(len(regBytes)) != regLen {
		return nil, errors.New("fsm: snapshot truncated in its session section")
	}
	if st.Sessions, err = session.ReadRegistry(bytes.NewReader(regBytes)); err != nil {
		return nil, fmt.Errorf("fsm: snapshot sessions: %w", err)
	}
	if st.Tree, err = tree.Read(br, tree.Options{MaxDataSize: maxData}); err != nil {
		return nil, fmt.Errorf("fsm: snapshot tree: %w", err)
	}
	// A snapshot from before the tree stored ZooKeeper's system nodes (the
	// server answered for them) gets them here, as every server does.
	st.Tree.AddSystemNodes()
	return st, nil
}
