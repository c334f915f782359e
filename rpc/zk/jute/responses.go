package jute

// The response records, in zookeeper.jute's field order. In a response, a
// nil slice is encoded as an empty vector, never as jute's null: ZooKeeper's
// server never sends a null list, the Java client would hand one to its
// caller as a null List, and go-zookeeper cannot decode one. Decoding still
// accepts null (as nil).

// CreateResponse is the body of a reply to create.
type CreateResponse struct {
	Path string // the created path (with its sequence number, if sequential)
}

// Encode writes the response.
func (x *CreateResponse) Encode(w *Writer) { w.Ustring(x.Path) }

// Decode reads the response.
func (x *CreateResponse) Decode(r *Reader) error {
	x.Path = r.Ustring()
	return r.Err()
}

// Create2Response is the body of a reply to create2, createContainer and
// createTTL. (The Java client's create without a Stat sends createContainer
// for a container and reads only the path of this reply.)
type Create2Response struct {
	Path string
	Stat Stat
}

// Encode writes the response.
func (x *Create2Response) Encode(w *Writer) {
	w.Ustring(x.Path)
	x.Stat.Encode(w)
}

// Decode reads the response.
func (x *Create2Response) Decode(r *Reader) error {
	x.Path = r.Ustring()
	r.Record(&x.Stat)
	return r.Err()
}

// ExistsResponse is the body of a reply to exists, when the node exists (a
// missing node is the error NoNode, with no body).
type ExistsResponse struct {
	Stat Stat
}

// Encode writes the response.
func (x *ExistsResponse) Encode(w *Writer) { x.Stat.Encode(w) }

// Decode reads the response.
func (x *ExistsResponse) Decode(r *Reader) error {
	r.Record(&x.Stat)
	return r.Err()
}

// GetDataResponse is the body of a reply to getData (and getConfig), and to
// reconfig (the new configuration and the stat of ConfigPath).
type GetDataResponse struct {
	Data []byte // nil is sent as null, as ZooKeeper sends a node created with null data
	Stat Stat
}

// Encode writes the response.
func (x *GetDataResponse) Encode(w *Writer) {
	w.Buffer(x.Data)
	x.Stat.Encode(w)
}

// Decode reads the response.
func (x *GetDataResponse) Decode(r *Reader) error {
	x.Data = r.Buffer()
	r.Record(&x.Stat)
	return r.Err()
}

// SetDataResponse is the body of a reply to setData (and, in ZooKeeper, to
// a lone check).
type SetDataResponse struct {
	Stat Stat
}

// Encode writes the response.
func (x *SetDataResponse) Encode(w *Writer) { x.Stat.Encode(w) }

// Decode reads the response.
func (x *SetDataResponse) Decode(r *Reader) error {
	r.Record(&x.Stat)
	return r.Err()
}

// GetACLResponse is the body of a reply to getACL.
type GetACLResponse struct {
	ACL  []ACL
	Stat Stat
}

// Encode writes the response.
func (x *GetACLResponse) Encode(w *Writer) {
	writeVector(w, x.ACL, false)
	x.Stat.Encode(w)
}

// Decode reads the response.
func (x *GetACLResponse) Decode(r *Reader) error {
	x.ACL = readVector[ACL](r, aclMinSize)
	r.Record(&x.Stat)
	return r.Err()
}

// SetACLResponse is the body of a reply to setACL.
type SetACLResponse struct {
	Stat Stat
}

// Encode writes the response.
func (x *SetACLResponse) Encode(w *Writer) { x.Stat.Encode(w) }

// Decode reads the response.
func (x *SetACLResponse) Decode(r *Reader) error {
	r.Record(&x.Stat)
	return r.Err()
}

// GetChildrenResponse is the body of a reply to getChildren.
type GetChildrenResponse struct {
	Children []string // names, not paths
}

// Encode writes the response.
func (x *GetChildrenResponse) Encode(w *Writer) { w.nonNullUstrings(x.Children) }

// Decode reads the response.
func (x *GetChildrenResponse) Decode(r *Reader) error {
	x.Children = r.Ustrings()
	return r.Err()
}

// GetChildren2Response is the body of a reply to getChildren2.
type GetChildren2Response struct {
	Children []string
	Stat     Stat
}

// Encode writes the response.
func (x *GetChildren2Response) Encode(w *Writer) {
	w.nonNullUstrings(x.Children)
	x.Stat.Encode(w)
}

// Decode reads the response.
func (x *GetChildren2Response) Decode(r *Reader) error {
	x.Children = r.Ustrings()
	r.Record(&x.Stat)
	return r.Err()
}

// GetAllChildrenNumberResponse is the body of a reply to
// getAllChildrenNumber.
type GetAllChildrenNumberResponse struct {
	TotalNumber int32 // the number of descendants
}

// Encode writes the response.
func (x *GetAllChildrenNumberResponse) Encode(w *Writer) { w.Int(x.TotalNumber) }

// Decode reads the response.
func (x *GetAllChildrenNumberResponse) Decode(r *Reader) error {
	x.TotalNumber = r.Int()
	return r.Err()
}

// GetEphemeralsResponse is the body of a reply to getEphemerals.
type GetEphemeralsResponse struct {
	Ephemerals []string // paths
}

// Encode writes the response.
func (x *GetEphemeralsResponse) Encode(w *Writer) { w.nonNullUstrings(x.Ephemerals) }

// Decode reads the response.
func (x *GetEphemeralsResponse) Decode(r *Reader) error {
	x.Ephemerals = r.Ustrings()
	return r.Err()
}

// SyncResponse is the body of a reply to sync.
type SyncResponse struct {
	Path string // the request's path
}

// Encode writes the response.
func (x *SyncResponse) Encode(w *Writer) { w.Ustring(x.Path) }

// Decode reads the response.
func (x *SyncResponse) Decode(r *Reader) error {
	x.Path = r.Ustring()
	return r.Err()
}

// ErrorResponse is the body of a successful reply to addWatch (Err 0: the
// Java server sends it, and the Java client reads it), and of a failed op's
// result in a multi response.
type ErrorResponse struct {
	Err Code
}

// Encode writes the response.
func (x *ErrorResponse) Encode(w *Writer) { w.Int(int32(x.Err)) }

// Decode reads the response.
func (x *ErrorResponse) Decode(r *Reader) error {
	x.Err = Code(r.Int())
	return r.Err()
}

// WhoAmIResponse is the body of a reply to whoAmI.
type WhoAmIResponse struct {
	ClientInfo []ClientInfo
}

// Encode writes the response.
func (x *WhoAmIResponse) Encode(w *Writer) { writeVector(w, x.ClientInfo, false) }

// Decode reads the response.
func (x *WhoAmIResponse) Decode(r *Reader) error {
	x.ClientInfo = readVector[ClientInfo](r, 8)
	return r.Err()
}

// SetSASLResponse is the body of a reply to sasl: the server's SASL token.
type SetSASLResponse struct {
	Token []byte
}

// Encode writes the response.
func (x *SetSASLResponse) Encode(w *Writer) { w.Buffer(x.Token) }

// Decode reads the response.
func (x *SetSASLResponse) Decode(r *Reader) error {
	x.Token = r.Buffer()
	return r.Err()
}

// NewResponse returns a new, zero record for the body of a successful reply
// to a request of type op, the one ZooKeeper's server sends
// (FinalRequestProcessor): *Create2Response for create2, createContainer and
// createTTL, *GetDataResponse for reconfig, *ErrorResponse for addWatch,
// *Empty where the reply has no body, and so on. It reports false where
// NewRequest does.
func NewResponse(op OpCode) (Record, bool) {
	var rec Record
	switch op {
	case OpCreate:
		rec = &CreateResponse{}
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		rec = &Create2Response{}
	case OpExists:
		rec = &ExistsResponse{}
	case OpGetData, OpReconfig:
		rec = &GetDataResponse{}
	case OpSetData, OpCheck:
		rec = &SetDataResponse{}
	case OpGetACL:
		rec = &GetACLResponse{}
	case OpSetACL:
		rec = &SetACLResponse{}
	case OpGetChildren:
		rec = &GetChildrenResponse{}
	case OpGetChildren2:
		rec = &GetChildren2Response{}
	case OpSync:
		rec = &SyncResponse{}
	case OpMulti, OpMultiRead:
		rec = &MultiResponse{}
	case OpGetEphemerals:
		rec = &GetEphemeralsResponse{}
	case OpGetAllChildrenNumber:
		rec = &GetAllChildrenNumberResponse{}
	case OpAddWatch:
		rec = &ErrorResponse{}
	case OpWhoAmI:
		rec = &WhoAmIResponse{}
	case OpSASL:
		rec = &SetSASLResponse{}
	case OpDelete, OpPing, OpCloseSession, OpCheckWatches, OpRemoveWatches,
		OpAuth, OpSetWatches, OpSetWatches2:
		rec = &Empty{}
	default:
		return nil, false
	}
	return rec, true
}
