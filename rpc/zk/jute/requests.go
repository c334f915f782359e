package jute

// The request records, in zookeeper.jute's field order. In a request, a nil
// slice is encoded as jute's null (-1) and decoded from it, so a server can
// tell a null list from an empty one.

// CreateRequest is the body of create, create2 and createContainer
// requests, and of those ops in a multi.
type CreateRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
}

// Encode writes the request.
func (x *CreateRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Buffer(x.Data)
	writeVector(w, x.ACL, true)
	w.Int(int32(x.Flags))
}

// Decode reads the request.
func (x *CreateRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Data = r.Buffer()
	x.ACL = readVector[ACL](r, aclMinSize)
	x.Flags = CreateMode(r.Int())
	return r.Err()
}

// CreateTTLRequest is the body of a createTTL request.
type CreateTTLRequest struct {
	Path  string
	Data  []byte
	ACL   []ACL
	Flags CreateMode
	TTL   int64 // milliseconds
}

// Encode writes the request.
func (x *CreateTTLRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Buffer(x.Data)
	writeVector(w, x.ACL, true)
	w.Int(int32(x.Flags))
	w.Long(x.TTL)
}

// Decode reads the request.
func (x *CreateTTLRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Data = r.Buffer()
	x.ACL = readVector[ACL](r, aclMinSize)
	x.Flags = CreateMode(r.Int())
	x.TTL = r.Long()
	return r.Err()
}

// DeleteRequest is the body of a delete request.
type DeleteRequest struct {
	Path    string
	Version int32 // -1 for any
}

// Encode writes the request.
func (x *DeleteRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Int(x.Version)
}

// Decode reads the request.
func (x *DeleteRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Version = r.Int()
	return r.Err()
}

// CheckVersionRequest is the body of a check op in a multi.
type CheckVersionRequest struct {
	Path    string
	Version int32
}

// Encode writes the request.
func (x *CheckVersionRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Int(x.Version)
}

// Decode reads the request.
func (x *CheckVersionRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Version = r.Int()
	return r.Err()
}

// ExistsRequest is the body of an exists request.
type ExistsRequest struct {
	Path  string
	Watch bool
}

// Encode writes the request.
func (x *ExistsRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Bool(x.Watch)
}

// Decode reads the request.
func (x *ExistsRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Watch = r.Bool()
	return r.Err()
}

// GetDataRequest is the body of a getData request (and of getConfig, a
// getData of ConfigPath), and of a getData op in a multiRead.
type GetDataRequest struct {
	Path  string
	Watch bool
}

// Encode writes the request.
func (x *GetDataRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Bool(x.Watch)
}

// Decode reads the request.
func (x *GetDataRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Watch = r.Bool()
	return r.Err()
}

// SetDataRequest is the body of a setData request.
type SetDataRequest struct {
	Path    string
	Data    []byte
	Version int32 // -1 for any
}

// Encode writes the request.
func (x *SetDataRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Buffer(x.Data)
	w.Int(x.Version)
}

// Decode reads the request.
func (x *SetDataRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Data = r.Buffer()
	x.Version = r.Int()
	return r.Err()
}

// GetACLRequest is the body of a getACL request.
type GetACLRequest struct {
	Path string
}

// Encode writes the request.
func (x *GetACLRequest) Encode(w *Writer) { w.Ustring(x.Path) }

// Decode reads the request.
func (x *GetACLRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	return r.Err()
}

// SetACLRequest is the body of a setACL request.
type SetACLRequest struct {
	Path    string
	ACL     []ACL
	Version int32 // the expected aversion, -1 for any
}

// Encode writes the request.
func (x *SetACLRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	writeVector(w, x.ACL, true)
	w.Int(x.Version)
}

// Decode reads the request.
func (x *SetACLRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.ACL = readVector[ACL](r, aclMinSize)
	x.Version = r.Int()
	return r.Err()
}

// GetChildrenRequest is the body of a getChildren request, and of a
// getChildren op in a multiRead.
type GetChildrenRequest struct {
	Path  string
	Watch bool
}

// Encode writes the request.
func (x *GetChildrenRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Bool(x.Watch)
}

// Decode reads the request.
func (x *GetChildrenRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Watch = r.Bool()
	return r.Err()
}

// GetChildren2Request is the body of a getChildren2 request.
type GetChildren2Request struct {
	Path  string
	Watch bool
}

// Encode writes the request.
func (x *GetChildren2Request) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Bool(x.Watch)
}

// Decode reads the request.
func (x *GetChildren2Request) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Watch = r.Bool()
	return r.Err()
}

// GetAllChildrenNumberRequest is the body of a getAllChildrenNumber request.
type GetAllChildrenNumberRequest struct {
	Path string
}

// Encode writes the request.
func (x *GetAllChildrenNumberRequest) Encode(w *Writer) { w.Ustring(x.Path) }

// Decode reads the request.
func (x *GetAllChildrenNumberRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	return r.Err()
}

// GetEphemeralsRequest is the body of a getEphemerals request.
type GetEphemeralsRequest struct {
	PrefixPath string // "" or "/" for all of the session's ephemerals
}

// Encode writes the request.
func (x *GetEphemeralsRequest) Encode(w *Writer) { w.Ustring(x.PrefixPath) }

// Decode reads the request.
func (x *GetEphemeralsRequest) Decode(r *Reader) error {
	x.PrefixPath = r.Ustring()
	return r.Err()
}

// SyncRequest is the body of a sync request.
type SyncRequest struct {
	Path string
}

// Encode writes the request.
func (x *SyncRequest) Encode(w *Writer) { w.Ustring(x.Path) }

// Decode reads the request.
func (x *SyncRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	return r.Err()
}

// SetWatches is the body of a setWatches request: on reconnect, the client
// re-registers its watches, to be fired at once for changes after
// RelativeZxid. A client may split its watches over several requests.
type SetWatches struct {
	RelativeZxid int64
	DataWatches  []string
	ExistWatches []string
	ChildWatches []string
}

// Encode writes the request.
func (x *SetWatches) Encode(w *Writer) {
	w.Long(x.RelativeZxid)
	w.Ustrings(x.DataWatches)
	w.Ustrings(x.ExistWatches)
	w.Ustrings(x.ChildWatches)
}

// Decode reads the request.
func (x *SetWatches) Decode(r *Reader) error {
	x.RelativeZxid = r.Long()
	x.DataWatches = r.Ustrings()
	x.ExistWatches = r.Ustrings()
	x.ChildWatches = r.Ustrings()
	return r.Err()
}

// SetWatches2 is the body of a setWatches2 request: SetWatches plus the
// persistent and persistent recursive watches (the Java client sends it
// instead of SetWatches when it has any of those).
type SetWatches2 struct {
	RelativeZxid               int64
	DataWatches                []string
	ExistWatches               []string
	ChildWatches               []string
	PersistentWatches          []string
	PersistentRecursiveWatches []string
}

// Encode writes the request.
func (x *SetWatches2) Encode(w *Writer) {
	w.Long(x.RelativeZxid)
	w.Ustrings(x.DataWatches)
	w.Ustrings(x.ExistWatches)
	w.Ustrings(x.ChildWatches)
	w.Ustrings(x.PersistentWatches)
	w.Ustrings(x.PersistentRecursiveWatches)
}

// Decode reads the request.
func (x *SetWatches2) Decode(r *Reader) error {
	x.RelativeZxid = r.Long()
	x.DataWatches = r.Ustrings()
	x.ExistWatches = r.Ustrings()
	x.ChildWatches = r.Ustrings()
	x.PersistentWatches = r.Ustrings()
	x.PersistentRecursiveWatches = r.Ustrings()
	return r.Err()
}

// CheckWatchesRequest is the body of a checkWatches request.
type CheckWatchesRequest struct {
	Path string
	Type WatcherType
}

// Encode writes the request.
func (x *CheckWatchesRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Int(int32(x.Type))
}

// Decode reads the request.
func (x *CheckWatchesRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Type = WatcherType(r.Int())
	return r.Err()
}

// RemoveWatchesRequest is the body of a removeWatches request.
type RemoveWatchesRequest struct {
	Path string
	Type WatcherType
}

// Encode writes the request.
func (x *RemoveWatchesRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Int(int32(x.Type))
}

// Decode reads the request.
func (x *RemoveWatchesRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Type = WatcherType(r.Int())
	return r.Err()
}

// AddWatchRequest is the body of an addWatch request.
type AddWatchRequest struct {
	Path string
	Mode AddWatchMode
}

// Encode writes the request.
func (x *AddWatchRequest) Encode(w *Writer) {
	w.Ustring(x.Path)
	w.Int(int32(x.Mode))
}

// Decode reads the request.
func (x *AddWatchRequest) Decode(r *Reader) error {
	x.Path = r.Ustring()
	x.Mode = AddWatchMode(r.Int())
	return r.Err()
}

// AuthPacket is the body of an auth (addAuth) request.
type AuthPacket struct {
	Type   int32 // always 0
	Scheme string
	Auth   []byte
}

// Encode writes the request.
func (x *AuthPacket) Encode(w *Writer) {
	w.Int(x.Type)
	w.Ustring(x.Scheme)
	w.Buffer(x.Auth)
}

// Decode reads the request.
func (x *AuthPacket) Decode(r *Reader) error {
	x.Type = r.Int()
	x.Scheme = r.Ustring()
	x.Auth = r.Buffer()
	return r.Err()
}

// ReconfigRequest is the body of a reconfig request. Its strings are
// nullable: nil means "not given" (an incremental reconfig gives joining
// and leaving servers and no new members; a full one the new members only).
type ReconfigRequest struct {
	JoiningServers *string
	LeavingServers *string
	NewMembers     *string
	CurConfigID    int64 // the expected config version, -1 for any
}

// Encode writes the request.
func (x *ReconfigRequest) Encode(w *Writer) {
	w.NullableUstring(x.JoiningServers)
	w.NullableUstring(x.LeavingServers)
	w.NullableUstring(x.NewMembers)
	w.Long(x.CurConfigID)
}

// Decode reads the request.
func (x *ReconfigRequest) Decode(r *Reader) error {
	x.JoiningServers = r.NullableUstring()
	x.LeavingServers = r.NullableUstring()
	x.NewMembers = r.NullableUstring()
	x.CurConfigID = r.Long()
	return r.Err()
}

// GetSASLRequest is the body of a sasl request: a client's SASL token.
type GetSASLRequest struct {
	Token []byte
}

// Encode writes the request.
func (x *GetSASLRequest) Encode(w *Writer) { w.Buffer(x.Token) }

// Decode reads the request.
func (x *GetSASLRequest) Decode(r *Reader) error {
	x.Token = r.Buffer()
	return r.Err()
}

// NewRequest returns a new, zero record for the body of a request of type
// op: *CreateRequest for create, create2 and createContainer, *Empty for
// ping, closeSession and whoAmI, *MultiRequest for multi, and so on. It
// reports false for an opcode no ZooKeeper client sends (notification,
// deleteContainer, createSession, error and numbers ZooKeeper does not
// define). A lone check is decoded too, though ZooKeeper accepts check only
// inside a multi.
func NewRequest(op OpCode) (Record, bool) {
	var rec Record
	switch op {
	case OpCreate, OpCreate2, OpCreateContainer:
		rec = &CreateRequest{}
	case OpCreateTTL:
		rec = &CreateTTLRequest{}
	case OpDelete:
		rec = &DeleteRequest{}
	case OpExists:
		rec = &ExistsRequest{}
	case OpGetData:
		rec = &GetDataRequest{}
	case OpSetData:
		rec = &SetDataRequest{}
	case OpGetACL:
		rec = &GetACLRequest{}
	case OpSetACL:
		rec = &SetACLRequest{}
	case OpGetChildren:
		rec = &GetChildrenRequest{}
	case OpGetChildren2:
		rec = &GetChildren2Request{}
	case OpSync:
		rec = &SyncRequest{}
	case OpCheck:
		rec = &CheckVersionRequest{}
	case OpMulti:
		rec = &MultiRequest{}
	case OpMultiRead:
		rec = &MultiReadRequest{}
	case OpReconfig:
		rec = &ReconfigRequest{}
	case OpCheckWatches:
		rec = &CheckWatchesRequest{}
	case OpRemoveWatches:
		rec = &RemoveWatchesRequest{}
	case OpAuth:
		rec = &AuthPacket{}
	case OpSetWatches:
		rec = &SetWatches{}
	case OpSetWatches2:
		rec = &SetWatches2{}
	case OpSASL:
		rec = &GetSASLRequest{}
	case OpGetEphemerals:
		rec = &GetEphemeralsRequest{}
	case OpGetAllChildrenNumber:
		rec = &GetAllChildrenNumberRequest{}
	case OpAddWatch:
		rec = &AddWatchRequest{}
	case OpPing, OpCloseSession, OpWhoAmI:
		rec = &Empty{}
	default:
		return nil, false
	}
	return rec, true
}

// DecodeRequest decodes the body of a request of type op (the bytes after
// its RequestHeader) into a new record, as NewRequest chooses it. An error
// matches ErrUnknownOp for an opcode NewRequest refuses, or the sentinel of
// the decoding failure; its text names the opcode.
func DecodeRequest(op OpCode, body []byte) (Record, error) {
	rec, ok := NewRequest(op)
	if !ok {
		return nil, errorf(ErrUnknownOp, "unknown request opcode %d", int32(op))
	}
	if err := rec.Decode(NewReader(body)); err != nil {
		return nil, within(op.String()+" request", err)
	}
	return rec, nil
}
