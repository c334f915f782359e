package jute

// A multi travels as a sequence of (type, done, err) headers, each but the
// last followed by its op's record, ending with the header
// {type -1, done true, err -1} (ZooKeeper's MultiOperationRecord and
// MultiResponse).

// multiHeader is jute's MultiHeader.
type multiHeader struct {
	Type OpCode
	Done bool
	Err  int32
}

func (h *multiHeader) encode(w *Writer) {
	w.Int(int32(h.Type))
	w.Bool(h.Done)
	w.Int(h.Err)
}

func (h *multiHeader) decode(r *Reader) {
	h.Type = OpCode(r.Int())
	h.Done = r.Bool()
	h.Err = r.Int()
}

// multiEnd is the header that closes every multi request and response.
var multiEnd = multiHeader{Type: OpError, Done: true, Err: -1}

// Op is one operation of a multi or multiRead request. Request is the op's
// record:
//
//	OpCreate, OpCreate2, OpCreateContainer  *CreateRequest
//	OpCreateTTL                             *CreateTTLRequest
//	OpDelete                                *DeleteRequest
//	OpSetData                               *SetDataRequest
//	OpCheck                                 *CheckVersionRequest
//	OpGetData (multiRead only)              *GetDataRequest
//	OpGetChildren (multiRead only)          *GetChildrenRequest
type Op struct {
	Type    OpCode
	Request Record
}

// MultiRequest is the body of a multi request: write ops (create, create2,
// createContainer, createTTL, delete, setData, check) applied all or none.
type MultiRequest struct {
	Ops []Op
}

// MultiReadRequest is the body of a multiRead request: getData and
// getChildren ops, each answered on its own.
type MultiReadRequest struct {
	Ops []Op
}

// Encode writes the request as the Java client does: each op's header
// carries err -1.
func (x *MultiRequest) Encode(w *Writer) { encodeOps(w, x.Ops) }

// Decode reads the request. It fails with ErrBadMulti on an op type a multi
// may not carry, and on a create, create2 or createContainer whose flags are
// not a valid CreateMode, as ZooKeeper's MultiOperationRecord does (its
// server answers both with MarshallingError).
func (x *MultiRequest) Decode(r *Reader) error {
	x.Ops = decodeOps(r, "multi", func(op OpCode) Record {
		switch op {
		case OpCreate, OpCreate2, OpCreateContainer:
			return &CreateRequest{}
		case OpCreateTTL:
			return &CreateTTLRequest{}
		case OpDelete:
			return &DeleteRequest{}
		case OpSetData:
			return &SetDataRequest{}
		case OpCheck:
			return &CheckVersionRequest{}
		}
		return nil
	})
	return r.Err()
}

// Encode writes the request as the Java client does.
func (x *MultiReadRequest) Encode(w *Writer) { encodeOps(w, x.Ops) }

// Decode reads the request. It fails with ErrBadMulti on an op other than
// getData and getChildren.
func (x *MultiReadRequest) Decode(r *Reader) error {
	x.Ops = decodeOps(r, "multiRead", func(op OpCode) Record {
		switch op {
		case OpGetData:
			return &GetDataRequest{}
		case OpGetChildren:
			return &GetChildrenRequest{}
		}
		return nil
	})
	return r.Err()
}

func encodeOps(w *Writer, ops []Op) {
	for _, op := range ops {
		h := multiHeader{Type: op.Type, Done: false, Err: -1}
		h.encode(w)
		if op.Request != nil {
			op.Request.Encode(w)
		}
	}
	multiEnd.encode(w)
}

// decodeOps reads ops until the closing header; recordFor returns a new
// record for an op type the multi may carry, nil otherwise. Every pass of
// the loop consumes at least a header (9 bytes) or stops on an error.
func decodeOps(r *Reader, kind string, recordFor func(OpCode) Record) []Op {
	var ops []Op
	for r.Err() == nil {
		var h multiHeader
		h.decode(r)
		if r.Err() != nil || h.Done {
			break
		}
		rec := recordFor(h.Type)
		if rec == nil {
			r.fail(errorf(ErrBadMulti, "a %s may not carry op type %d (%v)", kind, int32(h.Type), h.Type))
			break
		}
		r.Record(rec)
		if c, ok := rec.(*CreateRequest); ok && r.Err() == nil && !c.Flags.Valid() {
			r.fail(errorf(ErrBadMulti, "invalid create mode %d in a %s", int32(c.Flags), kind))
		}
		ops = append(ops, Op{Type: h.Type, Request: rec})
	}
	if r.Err() != nil {
		return nil
	}
	return ops
}

// OpResult is the result of one op of a multi or multiRead, by Type:
//
//	OpCreate       Path (the reply to a create op)
//	OpCreate2      Path and Stat (to create2, createContainer and createTTL ops)
//	OpDelete       nothing
//	OpCheck        nothing
//	OpSetData      Stat
//	OpGetData      Data and Stat (multiRead)
//	OpGetChildren  Children (multiRead)
//	OpError        Err: the op failed, or was rolled back (CodeOK)
//
// ResultType gives the Type of an op's successful result.
type OpResult struct {
	Type     OpCode
	Err      Code
	Path     string
	Stat     Stat
	Data     []byte
	Children []string
}

// ResultType returns the Type of the successful result of an op of type op,
// as ZooKeeper's server reports it: OpCreate2 for create2, createContainer
// and createTTL, op itself for the others.
func ResultType(op OpCode) OpCode {
	switch op {
	case OpCreate2, OpCreateContainer, OpCreateTTL:
		return OpCreate2
	}
	return op
}

// ErrorResult returns the result of an op that failed with err.
func ErrorResult(err Code) OpResult { return OpResult{Type: OpError, Err: err} }

// FailedMultiResults returns the results ZooKeeper reports for a multi of n
// ops whose op number failed (counting from 0) failed with err: the ops
// before it succeeded but were rolled back (an error result with CodeOK),
// the failed op carries err, and the ops after it were not attempted
// (CodeRuntimeInconsistency). Kafka and the Java client read these per-op
// results; the reply header's error stays CodeOK.
func FailedMultiResults(n, failed int, err Code) []OpResult {
	out := make([]OpResult, n)
	for i := range out {
		switch {
		case i < failed:
			out[i] = ErrorResult(CodeOK)
		case i == failed:
			out[i] = ErrorResult(err)
		default:
			out[i] = ErrorResult(CodeRuntimeInconsistency)
		}
	}
	return out
}

// MultiResponse is the body of a reply to multi or multiRead.
type MultiResponse struct {
	Results []OpResult
}

// Encode writes the response exactly as ZooKeeper's MultiResponse.serialize
// does: per result a header {type, false, err} (err is the error's code for
// OpError, 0 otherwise) and the result's record, then the closing header.
// A result of a Type not listed in OpResult's documentation is a bug of the
// caller; it is written as an error result with CodeMarshallingError, so the
// client still reads a well-formed response.
func (x *MultiResponse) Encode(w *Writer) {
	for i := range x.Results {
		res := &x.Results[i]
		typ, code := res.Type, CodeOK
		switch typ {
		case OpCreate, OpCreate2, OpDelete, OpCheck, OpSetData, OpGetData, OpGetChildren:
		case OpError:
			code = res.Err
		default:
			typ, code = OpError, CodeMarshallingError
		}
		h := multiHeader{Type: typ, Done: false, Err: int32(code)}
		h.encode(w)
		switch typ {
		case OpCreate:
			w.Ustring(res.Path)
		case OpCreate2:
			w.Ustring(res.Path)
			res.Stat.Encode(w)
		case OpSetData:
			res.Stat.Encode(w)
		case OpGetData:
			w.Buffer(res.Data)
			res.Stat.Encode(w)
		case OpGetChildren:
			w.nonNullUstrings(res.Children)
		case OpError:
			w.Int(int32(code))
		}
	}
	multiEnd.encode(w)
}

// Decode reads the response as ZooKeeper's client does: an error result's
// code is the one in its body. A result of an unknown type fails with
// ErrBadMulti.
func (x *MultiResponse) Decode(r *Reader) error {
	x.Results = nil
	var results []OpResult
	for r.Err() == nil {
		var h multiHeader
		h.decode(r)
		if r.Err() != nil || h.Done {
			break
		}
		res := OpResult{Type: h.Type}
		switch h.Type {
		case OpCreate:
			res.Path = r.Ustring()
		case OpCreate2:
			res.Path = r.Ustring()
			r.Record(&res.Stat)
		case OpDelete, OpCheck:
		case OpSetData:
			r.Record(&res.Stat)
		case OpGetData:
			res.Data = r.Buffer()
			r.Record(&res.Stat)
		case OpGetChildren:
			res.Children = r.Ustrings()
		case OpError:
			res.Err = Code(r.Int())
		default:
			r.fail(errorf(ErrBadMulti, "multi response result of unknown type %d", int32(h.Type)))
		}
		results = append(results, res)
	}
	if r.Err() == nil {
		x.Results = results
	}
	return r.Err()
}
