package session

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/google/btree"
)

// Sentinel errors of the registry. Match them with errors.Is.
var (
	// ErrUnknown reports a session id that is not open (never opened, or closed).
	ErrUnknown = errors.New("session: unknown session")
	// ErrBadPassword reports a password that does not match the session's.
	ErrBadPassword = errors.New("session: bad password")
	// ErrExists reports an attempt to open a session id that is already open.
	ErrExists = errors.New("session: session already exists")
)

// MaxCachedReplies bounds the number of replies cached per session. When a client
// never acknowledges, the reply with the lowest xid is dropped first, and the session's
// ack floor rises past it (see [Registry.Record]).
const MaxCachedReplies = 1024

// MaxPasswordLen is the longest password [Registry.Open] accepts (the leader chooses 16
// bytes; the bound keeps every registry state decodable by [ReadRegistry]).
const MaxPasswordLen = 64

// MaxReplyLen is the largest encoded reply the cache keeps (see [Registry.Record]); it
// is also the bound [ReadRegistry] enforces on a reply's length.
const MaxReplyLen = 64 << 20

// MaxIdentities bounds the identities a session may hold (see
// [Registry.AddIdentities]); MaxIdentityLen bounds one identity's scheme
// and id together, in bytes.
const (
	MaxIdentities  = 64
	MaxIdentityLen = 4096
)

// Identity is an identity a session authenticated as (ZooKeeper's
// addAuth): an ACL scheme and an id within it, such as digest:user:hash.
// The registry only keeps them; what they mean is the FSM's business.
type Identity struct {
	Scheme string
	ID     string
}

// MaxOwnerLen is the longest owner [Registry.Open] and [Registry.SetOwner] accept.
const MaxOwnerLen = 255

// Info is one open session as replicated.
type Info struct {
	ID        int64  // log index of the entry that opened it
	TimeoutMs int64  // negotiated timeout
	Password  []byte // chosen by the leader, 16 bytes
	// Owner is the server the session's client connected to last, as logged
	// (the session opened or resumed there); "" when unknown (a session of a
	// log or snapshot from before owners were recorded).
	Owner string
}

// reply is one cached reply.
type reply struct {
	xid int64
	// digest identifies the request the reply answers (0: not recorded);
	// see [Registry.Record].
	digest uint64
	data   []byte // never modified after Record
}

// owner is a copy-on-write token. Each Registry holds one; an entry may be mutated in
// place only by the registry whose token it carries. It is not zero-sized, so that two
// tokens never share an address.
type owner struct{ _ byte }

// entry is the registry's per-session value. Entries are shared between a registry and
// its clones; only the registry whose token is e.owner mutates e in place.
type entry struct {
	owner   *owner
	info    Info    // Password is never modified after Open
	floor   int64   // lowest unacknowledged xid; replies below it are gone
	replies []reply // sorted by xid, strictly increasing, all >= floor
	// ids are the identities the session authenticated as, in the order
	// added, without repeats. The slice is replaced, never modified.
	ids []Identity
	// epoch is the session's latest connection of ZooKeeper's protocol
	// (0: none recorded), and seq the highest request number applied on
	// it; see [Registry.SetEpoch].
	epoch, seq int64
}

// item is the registry tree's element: a session id and its value. Keying on a value
// type lets lookups probe with item{id: id} without allocating.
type item struct {
	id int64
	e  *entry
}

func itemLess(a, b item) bool { return a.id < b.id }

// Registry is the replicated session table: open sessions and, per session, the cached
// replies of the writes the client has not yet acknowledged and the identities it
// authenticated as.
//
// It also keeps the nodes of expired sessions held for a lock-delay ([LockDelay]).
//
// A Registry is not safe for concurrent use with its mutating methods (Open, Close,
// Record, Ack, AddIdentities, AddLockDelay, RemoveLockDelay, Clone); the FSM serialises
// access. The read-only methods (Get, List, Len, CheckPassword, Reply, Acked,
// Identities, LockDelayOf, LockDelays, LockDelaysDue, ListLockDelays, WriteTo) may run
// concurrently with one another. A clone
// returned by [Registry.Clone] is independent and may be used (typically encoded) in
// another goroutine while the original keeps changing. Every method is deterministic.
type Registry struct {
	tree *btree.BTreeG[item]
	tok  *owner
	// delays are the nodes of expired sessions kept for a lock-delay
	// (lockdelay.go).
	delays lockDelays
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{tree: btree.NewG(32, itemLess), tok: new(owner), delays: newLockDelays()}
}

func (r *Registry) get(id int64) (*entry, bool) {
	it, ok := r.tree.Get(item{id: id})
	return it.e, ok
}

func (r *Registry) put(e *entry) { r.tree.ReplaceOrInsert(item{id: e.info.ID, e: e}) }

// mutable returns e, or a copy of e put in its place if e is shared with a clone.
func (r *Registry) mutable(e *entry) *entry {
	if e.owner == r.tok {
		return e
	}
	c := *e
	c.owner = r.tok
	c.replies = append(make([]reply, 0, len(e.replies)+1), e.replies...)
	r.put(&c)
	return &c
}

// Open adds a session. It returns an error wrapping [ErrExists] if info.ID is already
// open, and an error if the password is longer than [MaxPasswordLen]. The password is
// copied.
func (r *Registry) Open(info Info) error {
	if len(info.Password) > MaxPasswordLen {
		return fmt.Errorf("session: password of %d bytes exceeds %d", len(info.Password), MaxPasswordLen)
	}
	if len(info.Owner) > MaxOwnerLen {
		return fmt.Errorf("session: owner of %d bytes exceeds %d", len(info.Owner), MaxOwnerLen)
	}
	if r.tree.Has(item{id: info.ID}) {
		return fmt.Errorf("%w: %d", ErrExists, info.ID)
	}
	info.Password = cloneBytes(info.Password)
	r.put(&entry{owner: r.tok, info: info})
	return nil
}

// SetOwner records that the client of session id is now connected to server
// owner. It returns an error wrapping [ErrUnknown] if id is not open, and an
// error if owner is longer than [MaxOwnerLen].
func (r *Registry) SetOwner(id int64, owner string) error {
	if len(owner) > MaxOwnerLen {
		return fmt.Errorf("session: owner of %d bytes exceeds %d", len(owner), MaxOwnerLen)
	}
	e, ok := r.get(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	if e.info.Owner != owner {
		r.mutable(e).info.Owner = owner
	}
	return nil
}

// Close removes a session with its cached replies. It reports false if id was not open.
func (r *Registry) Close(id int64) bool {
	_, ok := r.tree.Delete(item{id: id})
	return ok
}

// Get returns the session id. The returned Password is a copy.
func (r *Registry) Get(id int64) (Info, bool) {
	e, ok := r.get(id)
	if !ok {
		return Info{}, false
	}
	info := e.info
	info.Password = cloneBytes(info.Password)
	return info, true
}

// Owner returns the server session id is connected to (Info.Owner), and
// whether the session is open: Get without copying the password, for the
// FSM's checks on every write.
func (r *Registry) Owner(id int64) (string, bool) {
	e, ok := r.get(id)
	if !ok {
		return "", false
	}
	return e.info.Owner, true
}

// List returns every open session, sorted by ID. Passwords are copies.
func (r *Registry) List() []Info {
	out := make([]Info, 0, r.tree.Len())
	r.tree.Ascend(func(it item) bool {
		info := it.e.info
		info.Password = cloneBytes(info.Password)
		out = append(out, info)
		return true
	})
	return out
}

// Len returns the number of open sessions.
func (r *Registry) Len() int { return r.tree.Len() }

// CheckPassword returns nil if id is open and pw is its password, an error wrapping
// [ErrUnknown] if id is not open, and one wrapping [ErrBadPassword] otherwise. The
// comparison takes time independent of the contents (though not of the lengths).
func (r *Registry) CheckPassword(id int64, pw []byte) error {
	e, ok := r.get(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	if subtle.ConstantTimeCompare(e.info.Password, pw) != 1 {
		return fmt.Errorf("%w: session %d", ErrBadPassword, id)
	}
	return nil
}

// AddIdentities adds identities to session id, in order, skipping those it
// holds already. It reports false for an unknown session, and returns an
// error (adding nothing) if an identity is longer than [MaxIdentityLen] or
// the session would hold more than [MaxIdentities].
func (r *Registry) AddIdentities(id int64, ids []Identity) (bool, error) {
	e, ok := r.get(id)
	if !ok {
		return false, nil
	}
	next := e.ids
	for _, x := range ids {
		if len(x.Scheme)+len(x.ID) > MaxIdentityLen {
			return true, fmt.Errorf("session: identity of %d bytes exceeds %d", len(x.Scheme)+len(x.ID), MaxIdentityLen)
		}
		if slices.Contains(next, x) {
			continue
		}
		if len(next) >= MaxIdentities {
			return true, fmt.Errorf("session: %d identities already, the most a session holds", MaxIdentities)
		}
		next = append(slices.Clip(next), x)
	}
	if len(next) != len(e.ids) {
		r.mutable(e).ids = next
	}
	return true, nil
}

// Identities returns the identities session id authenticated as, in the
// order they were added (nil for none, or an unknown session). The slice is
// shared with the registry and must not be modified.
func (r *Registry) Identities(id int64) []Identity {
	e, ok := r.get(id)
	if !ok {
		return nil
	}
	return e.ids
}

// SetEpoch records that the session's client connected anew, as epoch
// (the log index of the entry that opened or resumed the session then): from
// now on only requests of that connection count, numbered by the server
// from 1 (see [Registry.Advance]). An epoch at or below the session's current
// one changes nothing. It returns an error wrapping [ErrUnknown] if id is not
// open.
//
// This is how requests of a ZooKeeper client, which may number its requests
// afresh on every connection, are told apart: a server's re-proposal of one
// of them is recognised by its (epoch, number), never by the client's xid.
func (r *Registry) SetEpoch(id, epoch int64) error {
	e, ok := r.get(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	if epoch > e.epoch {
		m := r.mutable(e)
		m.epoch, m.seq = epoch, 0
	}
	return nil
}

// Epoch returns the session's current connection epoch and the highest
// request number applied on it (0, 0 when none is recorded or the session
// is unknown).
func (r *Registry) Epoch(id int64) (epoch, seq int64) {
	e, ok := r.get(id)
	if !ok {
		return 0, 0
	}
	return e.epoch, e.seq
}

// Advance records that request seq of the session's current connection was
// applied: a request of that connection numbered seq or below is a
// re-proposal from now on. A lower seq changes nothing; no-op for an unknown
// session.
func (r *Registry) Advance(id, seq int64) {
	e, ok := r.get(id)
	if !ok || seq <= e.seq {
		return
	}
	r.mutable(e).seq = seq
}

// search returns the index of the first cached reply with xid >= x.
func search(rs []reply, x int64) int {
	return sort.Search(len(rs), func(i int) bool { return rs[i].xid >= x })
}

// Reply returns the cached reply of the write with xid in session id, if any, with the
// digest of the request it answers (as recorded). The returned slice is shared with the
// registry (and its clones) and must not be modified.
func (r *Registry) Reply(id, xid int64) (reply []byte, digest uint64, ok bool) {
	e, found := r.get(id)
	if !found {
		return nil, 0, false
	}
	i := search(e.replies, xid)
	if i < len(e.replies) && e.replies[i].xid == xid {
		return e.replies[i].data, e.replies[i].digest, true
	}
	return nil, 0, false
}

// Record caches reply (copied) as the outcome of the write with xid in session id, with
// digest, which identifies the request (0: none). The registry only keeps the digest: the
// FSM returns a cached reply only to a retry whose digest is the same, so that a request
// that reuses an xid is never answered with another request's outcome.
//
// It is a no-op for an unknown session, for an xid below the session's ack floor
// ([Registry.Acked]: that reply could never be asked for again), and for an xid that
// already has a cached reply (the first outcome stands).
//
// A reply that cannot be kept — because the session already caches [MaxCachedReplies]
// replies (the one with the lowest xid is then evicted) or because it is longer than
// [MaxReplyLen] (it is then not cached) — raises the ack floor past its xid. A retry of
// that write is thereby refused as stale rather than applied a second time:
// exactly-once may degrade to at-most-once, never to at-least-once.
func (r *Registry) Record(id, xid int64, digest uint64, reply []byte) {
	e, ok := r.get(id)
	if !ok || xid < e.floor {
		return
	}
	i := search(e.replies, xid)
	if i < len(e.replies) && e.replies[i].xid == xid {
		return
	}
	e = r.mutable(e)
	if len(reply) > MaxReplyLen {
		e.raiseFloor(xid + 1)
		return
	}
	e.replies = insertReply(e.replies, i, replyOf(xid, digest, reply))
	if len(e.replies) > MaxCachedReplies {
		e.raiseFloor(e.replies[0].xid + 1)
	}
}

func replyOf(xid int64, digest uint64, data []byte) reply {
	return reply{xid: xid, digest: digest, data: cloneBytes(data)}
}

func insertReply(rs []reply, i int, x reply) []reply {
	rs = append(rs, reply{})
	copy(rs[i+1:], rs[i:])
	rs[i] = x
	return rs
}

// raiseFloor sets the floor to max(floor, f) and drops the replies below it. e must be
// owned by the caller.
func (e *entry) raiseFloor(f int64) {
	if f <= e.floor {
		return
	}
	e.floor = f
	n := search(e.replies, f)
	if n == 0 {
		return
	}
	// Shift down rather than reslice, so the backing array does not creep forward
	// and the dropped replies become garbage at once.
	k := copy(e.replies, e.replies[n:])
	clear(e.replies[k:])
	e.replies = e.replies[:k]
}

// Ack records that the client of session id has received every reply below
// lowestUnacked: the cached replies with xid < lowestUnacked are dropped and the ack
// floor becomes lowestUnacked. The floor never goes down, so a stale ack (one carried by
// a delayed retry) is harmless. No-op for an unknown session.
func (r *Registry) Ack(id, lowestUnacked int64) {
	e, ok := r.get(id)
	if !ok || lowestUnacked <= e.floor {
		return
	}
	r.mutable(e).raiseFloor(lowestUnacked)
}

// Acked returns the ack floor of session id: 0 initially, then the highest lowestUnacked
// passed to [Registry.Ack], or higher after a reply was evicted (see [Registry.Record]).
// A write with xid below the floor and no cached reply is a stale retry that the FSM
// must reject rather than apply. It returns 0 for an unknown session.
func (r *Registry) Acked(id int64) int64 {
	e, ok := r.get(id)
	if !ok {
		return 0
	}
	return e.floor
}

// Clone returns an independent copy of r in O(1): the session tree is copied lazily
// (google/btree copy-on-write) and a session's value is copied the first time either
// side changes it. Neither side's later changes are visible to the other, and the clone
// may be read (for instance encoded with [Registry.WriteTo]) in another goroutine while
// r keeps being mutated. Clone itself must not run concurrently with other use of r.
func (r *Registry) Clone() *Registry {
	c := &Registry{tree: r.tree.Clone(), tok: new(owner), delays: r.delays.clone()}
	r.tok = new(owner) // entries created so far are now shared: neither side owns them
	return c
}

func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}
