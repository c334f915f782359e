package jute

// Encoder is anything that writes itself in jute: every record.
type Encoder interface {
	Encode(w *Writer)
}

// Record is a jute record (a class of zookeeper.jute, or the body of a
// multi): it writes itself to a Writer and reads itself from a Reader. Every
// record of the package is a pointer to a struct whose fields are the
// record's fields in zookeeper.jute's order, named after them.
//
// Decode reads the record's fields and returns the Reader's first error; it
// reads nothing more, so bytes after the record are left to the caller
// (ZooKeeper ignores them). Decode never panics.
type Record interface {
	Encoder
	Decode(r *Reader) error
}

// Unmarshal decodes rec from b, ignoring any bytes after the record as
// ZooKeeper's server does.
func Unmarshal(b []byte, rec Record) error {
	return rec.Decode(NewReader(b))
}

// Marshal returns rec's encoding.
func Marshal(rec Encoder) []byte {
	w := NewWriter(nil)
	rec.Encode(w)
	return w.Bytes()
}

// Empty is a record with no fields: the body of ping, closeSession and
// whoAmI requests, and of the replies that carry none (delete, setWatches,
// removeWatches, checkWatches, auth, ping, closeSession).
type Empty struct{}

// Encode writes nothing.
func (*Empty) Encode(*Writer) {}

// Decode reads nothing.
func (*Empty) Decode(r *Reader) error { return r.Err() }

// ID is an identity: an authentication scheme and an id within it
// (org.apache.zookeeper.data.Id), such as world:anyone.
type ID struct {
	Scheme string
	ID     string
}

// Encode writes the id.
func (x *ID) Encode(w *Writer) {
	w.Ustring(x.Scheme)
	w.Ustring(x.ID)
}

// Decode reads the id.
func (x *ID) Decode(r *Reader) error {
	x.Scheme = r.Ustring()
	x.ID = r.Ustring()
	return r.Err()
}

// ACL grants permissions to an identity.
type ACL struct {
	Perms Perm
	ID    ID
}

// aclMinSize is the fewest bytes an encoded ACL takes (perms and two empty
// ustrings).
const aclMinSize = 12

// Encode writes the ACL.
func (x *ACL) Encode(w *Writer) {
	w.Int(int32(x.Perms))
	x.ID.Encode(w)
}

// Decode reads the ACL.
func (x *ACL) Decode(r *Reader) error {
	x.Perms = Perm(r.Int())
	r.Record(&x.ID)
	return r.Err()
}

// Stat is a znode's metadata as clients see it.
type Stat struct {
	Czxid          int64 // the zxid of the change that created the node
	Mzxid          int64 // the zxid of the change that last set its data
	Ctime          int64 // creation time, milliseconds since the epoch
	Mtime          int64 // time of the last data change, milliseconds since the epoch
	Version        int32 // number of data changes
	Cversion       int32 // number of child changes (creates and deletes)
	Aversion       int32 // number of ACL changes
	EphemeralOwner int64 // owning session id if ephemeral, 0 otherwise
	DataLength     int32 // length of the data
	NumChildren    int32 // number of children
	Pzxid          int64 // the zxid of the last child create or delete
}

// StatSize is the length of an encoded Stat.
const StatSize = 68

// Encode writes the stat.
func (x *Stat) Encode(w *Writer) {
	w.Long(x.Czxid)
	w.Long(x.Mzxid)
	w.Long(x.Ctime)
	w.Long(x.Mtime)
	w.Int(x.Version)
	w.Int(x.Cversion)
	w.Int(x.Aversion)
	w.Long(x.EphemeralOwner)
	w.Int(x.DataLength)
	w.Int(x.NumChildren)
	w.Long(x.Pzxid)
}

// Decode reads the stat.
func (x *Stat) Decode(r *Reader) error {
	x.Czxid = r.Long()
	x.Mzxid = r.Long()
	x.Ctime = r.Long()
	x.Mtime = r.Long()
	x.Version = r.Int()
	x.Cversion = r.Int()
	x.Aversion = r.Int()
	x.EphemeralOwner = r.Long()
	x.DataLength = r.Int()
	x.NumChildren = r.Int()
	x.Pzxid = r.Long()
	return r.Err()
}

// ClientInfo is one identity of a session, as whoAmI reports it.
type ClientInfo struct {
	AuthScheme string
	User       string
}

// Encode writes the client info.
func (x *ClientInfo) Encode(w *Writer) {
	w.Ustring(x.AuthScheme)
	w.Ustring(x.User)
}

// Decode reads the client info.
func (x *ClientInfo) Decode(r *Reader) error {
	x.AuthScheme = r.Ustring()
	x.User = r.Ustring()
	return r.Err()
}

// ConnectRequest is the first frame a client sends on a connection, to open
// a session (SessionID 0) or to resume one.
//
// The trailing ReadOnly flag is optional on the wire: the Java client and
// kazoo send it, go-zookeeper (and clients before 3.4) do not. Decode sets
// HasReadOnly when it was there; Encode writes it only when HasReadOnly is
// set. A server answers in kind (ConnectResponse.HasReadOnly), as
// ZooKeeper's does.
type ConnectRequest struct {
	ProtocolVersion int32
	LastZxidSeen    int64 // the last zxid the client saw, 0 for a new client
	TimeOut         int32 // the session timeout the client asks for, in milliseconds
	SessionID       int64 // 0 to open a new session
	Passwd          []byte
	ReadOnly        bool // the client accepts a read-only server
	HasReadOnly     bool // the ReadOnly byte was (or is to be) on the wire
}

// Encode writes the request, with the ReadOnly byte if HasReadOnly.
func (x *ConnectRequest) Encode(w *Writer) {
	w.Int(x.ProtocolVersion)
	w.Long(x.LastZxidSeen)
	w.Int(x.TimeOut)
	w.Long(x.SessionID)
	w.Buffer(x.Passwd)
	if x.HasReadOnly {
		w.Bool(x.ReadOnly)
	}
}

// Decode reads the request; the ReadOnly byte is read if any byte is left
// after the password, as ZooKeeper's ProtocolManager does.
func (x *ConnectRequest) Decode(r *Reader) error {
	x.ProtocolVersion = r.Int()
	x.LastZxidSeen = r.Long()
	x.TimeOut = r.Int()
	x.SessionID = r.Long()
	x.Passwd = r.Buffer()
	x.ReadOnly, x.HasReadOnly = false, false
	if r.Err() == nil && r.Len() > 0 {
		x.ReadOnly = r.Bool()
		x.HasReadOnly = true
	}
	return r.Err()
}

// ConnectResponse is the server's answer to a ConnectRequest. A session the
// server does not know (expired) is answered with SessionID 0, TimeOut 0
// and a password of 16 zero bytes, and the connection is then closed.
type ConnectResponse struct {
	ProtocolVersion int32
	TimeOut         int32 // the negotiated session timeout, in milliseconds
	SessionID       int64
	Passwd          []byte
	ReadOnly        bool // the server is read-only
	HasReadOnly     bool // the ReadOnly byte was (or is to be) on the wire: set it to the request's HasReadOnly
}

// Encode writes the response, with the ReadOnly byte if HasReadOnly.
func (x *ConnectResponse) Encode(w *Writer) {
	w.Int(x.ProtocolVersion)
	w.Int(x.TimeOut)
	w.Long(x.SessionID)
	w.Buffer(x.Passwd)
	if x.HasReadOnly {
		w.Bool(x.ReadOnly)
	}
}

// Decode reads the response; the ReadOnly byte is read if any byte is left
// after the password.
func (x *ConnectResponse) Decode(r *Reader) error {
	x.ProtocolVersion = r.Int()
	x.TimeOut = r.Int()
	x.SessionID = r.Long()
	x.Passwd = r.Buffer()
	x.ReadOnly, x.HasReadOnly = false, false
	if r.Err() == nil && r.Len() > 0 {
		x.ReadOnly = r.Bool()
		x.HasReadOnly = true
	}
	return r.Err()
}

// RequestHeader starts every request frame after the ConnectRequest.
type RequestHeader struct {
	Xid  int32 // chosen by the client; see the Xid constants for the special ones
	Type OpCode
}

// RequestHeaderSize is the length of an encoded RequestHeader.
const RequestHeaderSize = 8

// Encode writes the header.
func (x *RequestHeader) Encode(w *Writer) {
	w.Int(x.Xid)
	w.Int(int32(x.Type))
}

// Decode reads the header.
func (x *RequestHeader) Decode(r *Reader) error {
	x.Xid = r.Int()
	x.Type = OpCode(r.Int())
	return r.Err()
}

// ReplyHeader starts every frame from the server after the ConnectResponse:
// replies (the request's xid), pings (XidPing) and notifications
// (XidNotification). A reply's body follows only when Err is CodeOK;
// clients do not read one otherwise.
type ReplyHeader struct {
	Xid  int32
	Zxid int64 // the server's last applied zxid
	Err  Code
}

// ReplyHeaderSize is the length of an encoded ReplyHeader.
const ReplyHeaderSize = 16

// Encode writes the header.
func (x *ReplyHeader) Encode(w *Writer) {
	w.Int(x.Xid)
	w.Long(x.Zxid)
	w.Int(int32(x.Err))
}

// Decode reads the header.
func (x *ReplyHeader) Decode(r *Reader) error {
	x.Xid = r.Int()
	x.Zxid = r.Long()
	x.Err = Code(r.Int())
	return r.Err()
}

// WatcherEvent is the body of a notification (a frame whose ReplyHeader has
// XidNotification and the zxid of the change).
type WatcherEvent struct {
	Type  EventType
	State State // StateSyncConnected in every notification a server sends
	Path  string
}

// Encode writes the event.
func (x *WatcherEvent) Encode(w *Writer) {
	w.Int(int32(x.Type))
	w.Int(int32(x.State))
	w.Ustring(x.Path)
}

// Decode reads the event.
func (x *WatcherEvent) Decode(r *Reader) error {
	x.Type = EventType(r.Int())
	x.State = State(r.Int())
	x.Path = r.Ustring()
	return r.Err()
}
