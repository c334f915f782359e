package fsm

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

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
	// (0 when none: session expiry, reaping, no-ops).
	Session int64
	Xid     int64
	// Result is the outcome of a Write or CloseSession (the cached first
	// outcome when the write was a retry).
	Result *cmdpb.Result
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

// Options configures an FSM.
type Options struct {
	// MaxDataSize is the largest znode data this server admits
	// (0: tree.DefaultMaxDataSize); see DataSizeCap.
	MaxDataSize int
	// Logger receives warnings about undecodable entries.
	Logger *slog.Logger
}

// FSM is coordd's raft.BatchingFSM.
type FSM struct {
	opts Options // MaxDataSize set: the default when 0
	log  *slog.Logger

	mu       sync.RWMutex
	tree     *tree.Tree
	sessions *session.Registry
	now      int64  // max leader time seen, ms
	term     uint64 // Raft term of the last applied entry (0: unknown, after a restore)
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
		waitCh:   make(chan struct{}),
	}
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
}

// Read runs fn with the read lock held: no entry is applied while it runs,
// so fn sees one consistent state (and a watch registered in fn is in place
// before the next entry's events are delivered).
func (f *FSM) Read(fn func(v View)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(View{Tree: f.tree, Sessions: f.sessions, Applied: f.applied.Load()})
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
		f.term = l.Term
		if l.Type == raft.LogCommand {
			if r := f.applyCommand(int64(l.Index), l.Term, l.Data); r != nil {
				out[i] = r
			}
		} else {
			f.changed.Store(int64(l.Index)) // a configuration: count it, to be safe
			if l.Type == raft.LogConfiguration {
				f.applied.Store(int64(l.Index))
				// ZooKeeper's /zookeeper/config follows the membership.
				tx := &tree.Tx{Zxid: int64(l.Index), Now: f.now}
				f.applyConfiguration(tx, l.Data)
				if f.observer != nil {
					f.observer.Applied(&Applied{Index: int64(l.Index), Term: l.Term, Configuration: true, Events: tx.Events, Tree: f.tree, Sessions: f.sessions})
				}
			}
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
		// Every server skips the same bad entry the same way.
		f.log.Error("skipping log entry", "index", index, "err", err)
		f.changed.Store(index)
		f.applied.Store(index)
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
			a.Opened = &info
		}
	case *cmdpb.Command_ResumeSession:
		id, server := c.ResumeSession.SessionId, c.ResumeSession.Server
		if err := f.sessions.SetOwner(id, server); err == nil {
			a.Resumed = &Resumed{Session: id, Server: server}
		}
	case *cmdpb.Command_CloseSession:
		a.Session, a.Xid = c.CloseSession.SessionId, c.CloseSession.Xid
		if c.CloseSession.Xid != 0 {
			if r := f.moved(tx, c.CloseSession.SessionId, c.CloseSession.Server); r != nil {
				a.Result = r
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
		a.Result = f.closeSession(a, tx, c.CloseSession.SessionId)
	case *cmdpb.Command_Reap:
		for _, p := range c.Reap.Paths {
			f.reap(p, tx)
		}
	case *cmdpb.Command_AddAuth:
		a.Session, a.Xid = c.AddAuth.SessionId, c.AddAuth.Xid
		a.Result = f.addAuth(tx, c.AddAuth)
	case *cmdpb.Command_ClientAddress:
		f.setClientAddress(tx, c.ClientAddress)
	case *cmdpb.Command_Noop:
	}
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

func (f *FSM) closeSession(a *Applied, tx *tree.Tx, id int64) *cmdpb.Result {
	if _, ok := f.sessions.Owner(id); !ok {
		return &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_EXPIRED, Message: "session expired or unknown"}
	}
	for _, p := range f.tree.EphemeralsOf(id) {
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

// addAuth adds identities to a session. It is not cached for retries: adding
// identities the session holds already changes nothing.
func (f *FSM) addAuth(tx *tree.Tx, c *cmdpb.AddAuth) *cmdpb.Result {
	ids := make([]session.Identity, 0, len(c.Ids))
	for _, id := range c.Ids {
		ids = append(ids, session.Identity{Scheme: id.Scheme, ID: id.Id})
	}
	if r := f.moved(tx, c.SessionId, c.Server); r != nil {
		return r
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
	a.Session, a.Xid = w.SessionId, w.Xid
	owner, ok := f.sessions.Owner(w.SessionId)
	if !ok {
		a.Result = &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SESSION_EXPIRED, Message: "session expired or unknown"}
		return
	}
	// A server that no longer owns the session writes nothing for it, and
	// the refusal is not cached: the client's retry of the same xid, from
	// the server it moved to, applies.
	if r := movedResult(tx, w.SessionId, owner, true, w.Server); r != nil {
		a.Result = r
		return
	}
	if cached, ok := f.sessions.Reply(w.SessionId, w.Xid); ok {
		r := &cmdpb.Result{}
		if err := proto.Unmarshal(cached, r); err == nil {
			a.Result = r
			return
		}
	}
	if w.Xid < f.sessions.Acked(w.SessionId) {
		a.Result = &cmdpb.Result{Zxid: tx.Zxid, Code: cmdpb.Code_SYSTEM_ERROR,
			Message: fmt.Sprintf("stale retry of xid %d: its reply was already acknowledged", w.Xid)}
		return
	}
	f.sessions.Ack(w.SessionId, w.LowestPendingXid)
	// The write's ACL checks, as its sender: the identities of the
	// connection it came on (stamped by the server that admitted it) and
	// those its session authenticated as, in the replicated registry.
	tx.Auth = &Requester{Conn: ConnFromPB(w.Conn), IDs: f.sessions.Identities(w.SessionId)}
	a.Result = ExecWrite(f.tree, tx, w)
	if enc, err := proto.Marshal(a.Result); err == nil {
		f.sessions.Record(w.SessionId, w.Xid, enc)
	}
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
	return &snapshot{tree: f.tree.Clone(), sessions: f.sessions.Clone(), applied: f.applied.Load(), now: f.now}, nil
}

// snapshotMagic starts every snapshot; the digit is the format version.
var snapshotMagic = [8]byte{'C', 'O', 'O', 'R', 'D', 'S', 'N', '1'}

type snapshot struct {
	tree     *tree.Tree
	sessions *session.Registry
	applied  int64
	now      int64
}

// WriteTo encodes the snapshot: magic, applied index, time, the session
// registry (length-prefixed), then the tree. Same state, same bytes.
func (s *snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	var reg countingBuffer
	if _, err := s.sessions.WriteTo(&reg); err != nil {
		return 0, err
	}
	var hdr [8 + 8 + 8 + 8]byte
	copy(hdr[:8], snapshotMagic[:])
	binary.BigEndian.PutUint64(hdr[8:], uint64(s.applied))
	binary.BigEndian.PutUint64(hdr[16:], uint64(s.now))
	binary.BigEndian.PutUint64(hdr[24:], uint64(len(reg.b)))
	n := int64(0)
	for _, b := range [][]byte{hdr[:], reg.b} {
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
	t, reg, applied, now, err := ReadSnapshot(rc, DataSizeCap)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.tree, f.sessions, f.now, f.term = t, reg, now, 0
	f.changed.Store(applied)
	f.applied.Store(applied)
	if f.observer != nil {
		f.observer.Restored()
	}
	f.mu.Unlock()
	f.signal()
	return nil
}

// ReadSnapshot decodes a snapshot written by the FSM, rejecting garbage.
func ReadSnapshot(r io.Reader, maxData int) (*tree.Tree, *session.Registry, int64, int64, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var hdr [32]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, nil, 0, 0, fmt.Errorf("fsm: snapshot header: %w", err)
	}
	if [8]byte(hdr[:8]) != snapshotMagic {
		return nil, nil, 0, 0, errors.New("fsm: not a coordd snapshot (bad magic)")
	}
	applied := int64(binary.BigEndian.Uint64(hdr[8:]))
	now := int64(binary.BigEndian.Uint64(hdr[16:]))
	regLen := binary.BigEndian.Uint64(hdr[24:])
	if applied < 0 || regLen > maxRegistrySnapshot {
		return nil, nil, 0, 0, errors.New("fsm: corrupt snapshot header")
	}
	regBytes, err := io.ReadAll(io.LimitReader(br, int64(regLen)))
	if err != nil || uint64(len(regBytes)) != regLen {
		return nil, nil, 0, 0, errors.New("fsm: snapshot truncated in its session section")
	}
	reg, err := session.ReadRegistry(bytes.NewReader(regBytes))
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("fsm: snapshot sessions: %w", err)
	}
	t, err := tree.Read(br, tree.Options{MaxDataSize: maxData})
	if err != nil {
		return nil, nil, 0, 0, fmt.Errorf("fsm: snapshot tree: %w", err)
	}
	// A snapshot from before the tree stored ZooKeeper's system nodes (the
	// server answered for them) gets them here, as every server does.
	t.AddSystemNodes()
	return t, reg, applied, now, nil
}
