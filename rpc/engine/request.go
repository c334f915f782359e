package engine

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/asn1"

	"github.com/coordd/coordd/fsm/auth"
	"github.com/coordd/coordd/session"
	"github.com/coordd/coordd/tree"
	"github.com/coordd/coordd/watch"
)

// Op is what a request asks for. The front-ends map their wire's operations
// onto these; an operation one wire lacks is simply never sent by it.
type Op uint8

// The operations.
const (
	OpPing Op = iota
	OpCreate
	OpDelete
	OpSetData
	OpCheck // a version check on its own: a write, so that it is ordered with writes
	OpMulti // check, create, setData and delete ops, all or none, one zxid
	OpGetData
	OpExists
	OpGetChildren
	OpSync
	OpMultiRead // getData and getChildren ops, each answered on its own (not atomic)
	OpClose
	OpRemoveWatches
	OpCheckWatches
	OpSetWatches // re-register watches after a reconnect (ZooKeeper's setWatches)
	OpGetEphemerals
	OpGetAllChildrenNumber
	OpGetACL
	OpSetACL
	OpAddAuth
	OpWhoAmI
	OpReconfig
	OpAddWatch // a persistent watch, recursive or not, that stays until removed
)

var opNames = [...]string{
	OpPing: "ping", OpCreate: "create", OpDelete: "delete", OpSetData: "setData", OpCheck: "check",
	OpMulti: "multi", OpGetData: "getData", OpExists: "exists", OpGetChildren: "getChildren",
	OpSync: "sync", OpMultiRead: "multiRead", OpClose: "close", OpRemoveWatches: "removeWatches",
	OpCheckWatches: "checkWatches", OpSetWatches: "setWatches", OpGetEphemerals: "getEphemerals",
	OpGetAllChildrenNumber: "getAllChildrenNumber", OpGetACL: "getACL", OpSetACL: "setACL",
	OpAddAuth: "addAuth", OpWhoAmI: "whoAmI", OpReconfig: "reconfig", OpAddWatch: "addWatch",
}

// String returns the operation's ZooKeeper name.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "unknown"
}

// IsWrite says whether the operation changes the tree: it goes through
// Raft as a cmdpb.Write, and is answered once per connection's xid. Both
// front-ends and the engine ask this one method.
func (o Op) IsWrite() bool {
	switch o {
	case OpCreate, OpDelete, OpSetData, OpCheck, OpMulti, OpSetACL:
		return true
	}
	return false
}

// WatcherType selects watches to remove or check, with ZooKeeper's numbers
// (Watcher.WatcherType): the watch table's.
type WatcherType = watch.WatcherType

// The watcher types.
const (
	WatchChildren            = watch.WatcherChildren
	WatchData                = watch.WatcherData
	WatchAny                 = watch.WatcherAny
	WatchPersistent          = watch.WatcherPersistent
	WatchPersistentRecursive = watch.WatcherPersistentRecursive
)

// Conn is what a front-end knows of a client's connection: its address
// (ZooKeeper's ip scheme) and, when the server verified a client
// certificate, the certificate's subject (the x509 scheme).
type Conn = auth.Conn

// WatchKind is a set of watch kinds, as Event.Kinds carries them: the watch
// table's.
type WatchKind = watch.Kind

// The watch kinds.
const (
	KindData                = watch.Data
	KindChild               = watch.Child
	KindPersistent          = watch.Persistent
	KindPersistentRecursive = watch.PersistentRecursive
)

// Create is what a create asks for.
type Create struct {
	Kind       tree.Kind
	Sequential bool
	TTL        int64 // milliseconds, TTL nodes only
}

// Watches are the paths a client re-registers on reconnect, by the call
// that set them.
type Watches struct {
	// RelZxid is the last zxid the client saw: a one-shot watch whose node
	// changed after it fires at once (persistent ones fire nothing now).
	RelZxid             int64
	Data                []string
	Exist               []string
	Child               []string
	Persistent          []string
	PersistentRecursive []string
	// ListOrder queues the notifications that fire at once in the order of
	// the lists, data paths first, then exist, then child paths, as
	// ZooKeeper sends them; otherwise they come in zxid order, as every
	// other event does. ZooKeeper's clients take no zxid from a
	// notification, and some compare what they receive with ZooKeeper's
	// order; coordd's own API promises zxid order.
	ListOrder bool
}

// Len returns the number of paths.
func (w *Watches) Len() int {
	return len(w.Data) + len(w.Exist) + len(w.Child) + len(w.Persistent) + len(w.PersistentRecursive)
}

// Request is one operation of a session.
type Request struct {
	// Xid is the client's id of the request, which its reply carries. For
	// coordd's own client (ConnectRequest.ClientRetries) it is unique and
	// increasing within the session, and writes are applied at most once
	// per (session, xid); for ZooKeeper's clients it only tags the reply
	// (see Session.dispatchLocked).
	Xid int64
	// LowestPendingXid: the client has the replies of every write below it,
	// so the server may forget them (the exactly-once cache of
	// ClientRetries; before command level 2, of every client).
	LowestPendingXid int64
	Op               Op
	Path             string
	Data             []byte
	// NullData: a create or setData sends null data, which ZooKeeper's
	// protocol tells from empty data (Data is then empty); a getData reads
	// it back as nil and empty data as a non-nil empty slice. The public
	// API has no null: its writes store empty data.
	NullData bool
	// Version is the expected version of setData, delete and check (-1:
	// any).
	Version int32
	// Watch leaves a watch (getData, exists, getChildren).
	Watch  bool
	Create Create
	// Ops are the operations of a multi or multiRead.
	Ops []Request
	// WatcherType selects the watches of removeWatches and checkWatches.
	WatcherType WatcherType
	// Recursive makes addWatch's watch cover the path's whole subtree.
	Recursive bool
	// Watches are setWatches' paths.
	Watches Watches
	// Reconfig is a reconfig's change of the membership.
	Reconfig Reconfig
	// ACL is a create's or setACL's ACL (for a create over the public
	// API, empty is world:anyone with every permission; the ZooKeeper
	// front-end refuses an empty one as ZooKeeper does). setACL's Version
	// is the expected aversion.
	ACL []tree.ACL
	// AuthScheme and Auth are addAuth's scheme and credentials
	// ("digest", "user:password"). Auth is a secret: it never enters the
	// log, a log line or an error message.
	AuthScheme string
	Auth       []byte
}

// Reconfig is ZooKeeper's incremental reconfig: servers joining (their
// lines of the dynamic configuration, comma-separated) and leaving (ids,
// comma-separated), applied only if the configuration is still version
// FromConfig (-1: any). NewMembers (a whole new membership) is refused.
type Reconfig struct {
	Joining, Leaving, NewMembers string
	FromConfig                   int64
}

// Response answers the Request with the same Xid.
type Response struct {
	Xid int64
	// Zxid is the write's zxid; for anything else, the last zxid the server
	// had applied when it answered.
	Zxid int64
	Op   Op
	Code Code
	// Message explains an error for people (not on ZooKeeper's wire).
	Message string
	// Path is a create's name of the new node, or sync's path.
	Path string
	// Data is getData's: nil when the node's data is null (see
	// Request.NullData), non-nil otherwise.
	Data []byte
	// Stat is the node's stat where the operation returns one (nil: none,
	// as for exists on an absent node).
	Stat *tree.Stat
	// LockDelayUntil, for getData and exists of an ephemeral whose session
	// expired and that is kept for a lock-delay, is when (leader ms) it
	// will be released; 0 otherwise.
	LockDelayUntil int64
	Children       []string
	// Count is getAllChildrenNumber's answer.
	Count int64
	// ACL is getACL's answer (digest ids redacted to user:x for a caller
	// without ADMIN, as ZooKeeper does). Shared: must not be modified.
	ACL []tree.ACL
	// Identities are whoAmI's answer: scheme and user (a digest's user
	// name, never its hash).
	Identities []session.Identity
	// Results answer a multi's or multiRead's ops, in order.
	Results []Response
}

// Event is a watch notification for this session: one per change the
// session watches, however many of its watches it matched.
type Event struct {
	Type tree.EventType
	Path string
	Zxid int64
	// Kinds are the kinds of the session's watches it matched, so that a
	// client library can dispatch it to its one-shot and persistent
	// watchers (ZooKeeper's clients work that out themselves).
	Kinds WatchKind
}

// Connected answers a connect.
type Connected struct {
	SessionID int64
	Password  []byte
	TimeoutMs int64
	// Zxid is the last zxid the server had applied.
	Zxid int64
	// Vouches: the client asked for vouches (and will get them).
	Vouches bool
}

// Message is one thing queued for the client: exactly one field is set.
type Message struct {
	Connected *Connected
	Response  *Response
	Event     *Event
	// Final is the server's last word before it ends the connection (why:
	// the session expired, or the client broke the protocol); it answers
	// no request.
	Final *Response
	// Vouch, when non-zero, is the xid the leader confirmed (apipb.Vouch).
	Vouch int64
}

// VerifiedSubject returns the subject of the client certificate of a TLS
// connection whose certificate the server verified, as ZooKeeper's x509
// scheme names it (the RFC 2253 form of the subject,
// X500Principal.getName()), or "" when the client sent none or it was not
// verified.
func VerifiedSubject(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return ""
	}
	var rdns pkix.RDNSequence
	if _, err := asn1.Unmarshal(cs.PeerCertificates[0].RawSubject, &rdns); err != nil {
		return cs.PeerCertificates[0].Subject.String()
	}
	return rdns.String()
}
