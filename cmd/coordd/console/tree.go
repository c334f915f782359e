package console

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
)

// The tree: a node with its data and Stat, a page of a node's children
// with their sizes, and the writes.

// Limits of what one answer carries.
const (
	// maxShownData is the most of a node's data sent to the page; a larger
	// node is shown truncated and cannot be edited from the page.
	maxShownData = 256 << 10
	// defaultPage and maxPage bound a page of children.
	defaultPage = 100
	maxPage     = 1000
	// statWorkers read the children of a page concurrently.
	statWorkers = 8
)

// statField is one line of a Stat as zkCli prints it.
type statField struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Title is what a pointer over the value shows (the decimal of a hex
	// zxid, the milliseconds of a time).
	Title string `json:"title,omitempty"`
}

// statFields lays s out as zkCli's stat does: zxids and the owner in hex,
// times as dates (UTC); the kind and TTL of container and TTL nodes follow,
// and the end of a lock-delay.
func statFields(s client.Stat) []statField {
	zx := func(name string, v int64) statField {
		return statField{Name: name, Value: hexID(v), Title: strconv.FormatInt(v, 10)}
	}
	tm := func(name string, ms int64) statField {
		return statField{Name: name, Value: time.UnixMilli(ms).UTC().Format("Mon Jan 02 15:04:05 MST 2006"), Title: strconv.FormatInt(ms, 10) + " ms"}
	}
	n := func(name string, v int32) statField { return statField{Name: name, Value: strconv.Itoa(int(v))} }
	out := []statField{
		zx("cZxid", s.Czxid), tm("ctime", s.Ctime), zx("mZxid", s.Mzxid), tm("mtime", s.Mtime), zx("pZxid", s.Pzxid),
		n("cversion", s.Cversion), n("dataVersion", s.Version), n("aclVersion", s.Aversion),
		zx("ephemeralOwner", s.EphemeralOwner), n("dataLength", s.DataLength), n("numChildren", s.NumChildren),
	}
	if s.Kind == client.Container || s.Kind == client.TTL {
		out = append(out, statField{Name: "kind", Value: s.Kind.String()})
	}
	if s.TTL > 0 {
		out = append(out, statField{Name: "ttl", Value: fmt.Sprintf("%d ms", s.TTL.Milliseconds())})
	}
	if s.LockDelayUntil > 0 {
		f := tm("lockDelayUntil", s.LockDelayUntil)
		f.Title += ": the owner's session expired, and the node is kept for a lock-delay until then"
		out = append(out, f)
	}
	return out
}

// nodeJSON is a node as the page shows it.
type nodeJSON struct {
	Path        string      `json:"path"`
	Stat        []statField `json:"stat"`
	Version     int32       `json:"version"`
	NumChildren int32       `json:"numChildren"`
	DataLength  int32       `json:"dataLength"`
	Ephemeral   bool        `json:"ephemeral"`
	Kind        string      `json:"kind"`
	// Data is the node's data (the first maxShownData bytes), base64.
	Data      string `json:"data"`
	Truncated bool   `json:"truncated"`
	// Zxid is the last zxid the server had applied when it read the node.
	Zxid string `json:"zxid"`
	// ACL is the node's ACL, each entry as zkCli's getAcl prints it
	// (scheme:id:perms); ACLError says why it could not be read instead.
	ACL      []string `json:"acl"`
	ACLError string   `json:"aclError,omitempty"`
}

func newNodeJSON(path string, data []byte, st client.Stat, zxid int64) nodeJSON {
	n := nodeJSON{
		Path: path, Stat: statFields(st), Version: st.Version, NumChildren: st.NumChildren,
		DataLength: st.DataLength, Ephemeral: st.EphemeralOwner != 0, Kind: st.Kind.String(), Zxid: hexID(zxid),
	}
	if len(data) > maxShownData {
		data, n.Truncated = data[:maxShownData], true
	}
	n.Data = base64.StdEncoding.EncodeToString(data)
	return n
}

// pathParam reads and checks the path query parameter.
func pathParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := r.URL.Query().Get("path")
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		writeError(w, http.StatusBadRequest, "BadArguments", fmt.Sprintf("path %q: a path starts with /", p))
		return "", false
	}
	return p, true
}

func (c *Console) handleNode(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	data, st, err := cl.Get(ctx, path)
	if err != nil {
		fail(w, fmt.Errorf("%s: %w", path, err))
		return
	}
	n := newNodeJSON(path, data, st, cl.LastZxid())
	n.ACL = []string{}
	acl, _, err := cl.GetACL(ctx, path)
	if err != nil {
		n.ACLError = err.Error()
	}
	for _, a := range acl {
		n.ACL = append(n.ACL, a.String())
	}
	writeJSON(w, http.StatusOK, n)
}

// childJSON is one child in a listing.
type childJSON struct {
	Name        string `json:"name"`
	NumChildren int32  `json:"numChildren"`
	DataLength  int32  `json:"dataLength"`
	Ephemeral   bool   `json:"ephemeral"`
	// Gone: the child was deleted between the listing and its read.
	Gone bool `json:"gone,omitempty"`
}

// childrenJSON is one page of a node's children, in name order.
type childrenJSON struct {
	Path     string      `json:"path"`
	Total    int         `json:"total"`
	Offset   int         `json:"offset"`
	Children []childJSON `json:"children"`
}

// intParam reads a non-negative integer query parameter.
func intParam(r *http.Request, name string, def int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s=%q: want a number, 0 or more", name, s)
	}
	return v, nil
}

func (c *Console) handleChildren(w http.ResponseWriter, r *http.Request) {
	path, ok := pathParam(w, r)
	if !ok {
		return
	}
	offset, err := intParam(r, "offset", 0)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadArguments", err.Error())
		return
	}
	limit, err := intParam(r, "limit", defaultPage)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadArguments", err.Error())
		return
	}
	limit = min(max(limit, 1), maxPage)
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	names, _, err := cl.Children(ctx, path)
	if err != nil {
		fail(w, fmt.Errorf("%s: %w", path, err))
		return
	}
	out := childrenJSON{Path: path, Total: len(names), Offset: min(offset, len(names)), Children: []childJSON{}}
	page := names[out.Offset:min(out.Offset+limit, len(names))]
	out.Children = make([]childJSON, len(page))
	// The stats of the page, a few reads at a time (the client pipelines them).
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(statWorkers, len(page)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				st, ok, err := cl.Exists(ctx, join(path, page[i]))
				ch := childJSON{Name: page[i], Gone: !ok, NumChildren: st.NumChildren, DataLength: st.DataLength, Ephemeral: st.EphemeralOwner != 0}
				mu.Lock()
				out.Children[i] = ch
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range page {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		fail(w, fmt.Errorf("%s: %w", path, first))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// join makes the path of child name of dir.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// dataJSON is a node's data in a write: text (UTF-8) or base64.
type dataJSON struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding"` // "text" (default) or "base64"
}

func (d dataJSON) bytes() ([]byte, error) {
	switch d.Encoding {
	case "", "text":
		return []byte(d.Data), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(d.Data)
		if err != nil {
			return nil, fmt.Errorf("data is not base64: %v", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("encoding %q: want text or base64", d.Encoding)
}

// readBody decodes a write's JSON body into v, refusing unknown fields.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "BadArguments", fmt.Sprintf("the request is larger than %d bytes", tooBig.Limit))
			return false
		}
		writeError(w, http.StatusBadRequest, "BadArguments", "bad request: "+err.Error())
		return false
	}
	return true
}

// createJSON asks to create a node.
type createJSON struct {
	Path string `json:"path"`
	dataJSON
	// Kind: "persistent" (default), "container" or "ttl" (with TTLMs). The
	// console makes no ephemeral nodes: they would belong to its own
	// session and vanish with it.
	Kind       string `json:"kind"`
	Sequential bool   `json:"sequential"`
	TTLMs      int64  `json:"ttlMs"`
}

// versionJSON is the version a set or delete expects; it must be given
// (-1 for any), so that a change made since the page read the node fails
// with BadVersion instead of being overwritten.
type versionJSON struct {
	Version *int32 `json:"version"`
}

func (v versionJSON) check(w http.ResponseWriter) bool {
	if v.Version == nil {
		writeError(w, http.StatusBadRequest, "BadArguments", "version is required (the version read, or -1 for any)")
		return false
	}
	return true
}

// setJSON asks to set a node's data.
type setJSON struct {
	Path string `json:"path"`
	dataJSON
	versionJSON
}

// deleteJSON asks to delete a node.
type deleteJSON struct {
	Path string `json:"path"`
	versionJSON
}

func (c *Console) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req createJSON
	if !readBody(w, r, &req) {
		return
	}
	data, err := req.bytes()
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadArguments", err.Error())
		return
	}
	mode := client.CreateMode{Sequential: req.Sequential}
	switch req.Kind {
	case "", "persistent":
	case "container":
		mode.Kind = client.Container
	case "ttl":
		mode.Kind, mode.TTL = client.TTL, time.Duration(req.TTLMs)*time.Millisecond
	default:
		writeError(w, http.StatusBadRequest, "BadArguments", fmt.Sprintf("kind %q: want persistent, container or ttl", req.Kind))
		return
	}
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	path, st, err := cl.CreateStat(ctx, req.Path, data, mode)
	if err != nil {
		fail(w, fmt.Errorf("create %s: %w", req.Path, err))
		return
	}
	c.log.Info("created", "path", path)
	writeJSON(w, http.StatusOK, newNodeJSON(path, data, st, cl.LastZxid()))
}

func (c *Console) handleSet(w http.ResponseWriter, r *http.Request) {
	var req setJSON
	if !readBody(w, r, &req) || !req.check(w) {
		return
	}
	data, err := req.bytes()
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadArguments", err.Error())
		return
	}
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	st, err := cl.Set(ctx, req.Path, data, *req.Version)
	if errors.Is(err, client.ErrBadVersion) {
		err = fmt.Errorf("set %s: the node changed since version %d was read; reload it and try again: %w", req.Path, *req.Version, err)
	} else if err != nil {
		err = fmt.Errorf("set %s: %w", req.Path, err)
	}
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("set", "path", req.Path, "version", st.Version)
	writeJSON(w, http.StatusOK, newNodeJSON(req.Path, data, st, cl.LastZxid()))
}

func (c *Console) handleDelete(w http.ResponseWriter, r *http.Request) {
	var req deleteJSON
	if !readBody(w, r, &req) || !req.check(w) {
		return
	}
	ctx, cancel := call(r)
	defer cancel()
	cl, err := c.session(ctx)
	if err != nil {
		fail(w, err)
		return
	}
	err = cl.Delete(ctx, req.Path, *req.Version)
	if errors.Is(err, client.ErrBadVersion) {
		err = fmt.Errorf("delete %s: the node changed since version %d was read; reload it and try again: %w", req.Path, *req.Version, err)
	} else if err != nil {
		err = fmt.Errorf("delete %s: %w", req.Path, err)
	}
	if err != nil {
		fail(w, err)
		return
	}
	c.log.Info("deleted", "path", req.Path)
	writeJSON(w, http.StatusOK, struct {
		Path string `json:"path"`
	}{req.Path})
}
