package client

import (
	"context"

	"github.com/coordd/coordd/rpc/apipb"
)

// Create creates a node and returns its name (which differs from path for a
// sequential node). Like every write, if ctx ends before the reply the
// outcome is unknown.
func (c *Client) Create(ctx context.Context, path string, data []byte, mode CreateMode) (string, error) {
	name, _, err := c.CreateStat(ctx, path, data, mode)
	return name, err
}

// CreateStat is Create that also returns the new node's stat.
func (c *Client) CreateStat(ctx context.Context, path string, data []byte, mode CreateMode) (string, Stat, error) {
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_Create{Create: createRequest(path, data, mode)}}, true, nil)
	if err != nil {
		return "", Stat{}, err
	}
	cr := resp.GetCreate()
	return cr.GetPath(), statFromPB(cr.GetStat()), nil
}

// Delete deletes a node if its version matches (-1: any version).
func (c *Client) Delete(ctx context.Context, path string, version int32) error {
	_, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_Delete{Delete: &apipb.DeleteRequest{Path: path, Version: version}}}, true, nil)
	return err
}

// Set replaces a node's data if its version matches (-1: any version) and
// returns its new stat.
func (c *Client) Set(ctx context.Context, path string, data []byte, version int32) (Stat, error) {
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_SetData{SetData: &apipb.SetDataRequest{Path: path, Data: data, Version: version}}}, true, nil)
	if err != nil {
		return Stat{}, err
	}
	return statFromPB(resp.GetSetData().GetStat()), nil
}

// Get returns a node's data and stat.
func (c *Client) Get(ctx context.Context, path string) ([]byte, Stat, error) {
	data, stat, _, err := c.get(ctx, path, false)
	return data, stat, err
}

// GetW is Get that also leaves a data watch, fired by the node's next data
// change or deletion. On error (ErrNoNode included) no watch is left and the
// channel is nil.
func (c *Client) GetW(ctx context.Context, path string) ([]byte, Stat, <-chan Event, error) {
	return c.get(ctx, path, true)
}

func (c *Client) get(ctx context.Context, path string, watch bool) ([]byte, Stat, <-chan Event, error) {
	var w *watcher
	if watch {
		w = newWatcher(path, kindData)
	}
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: path, Watch: watch}}}, false, w)
	if err != nil {
		return nil, Stat{}, nil, err
	}
	g := resp.GetGetData()
	return g.GetData(), statFromPB(g.GetStat()), w.channel(), nil
}

// Exists reports whether a node exists, and its stat if it does.
func (c *Client) Exists(ctx context.Context, path string) (Stat, bool, error) {
	stat, ok, _, err := c.exists(ctx, path, false)
	return stat, ok, err
}

// ExistsW is Exists that also leaves a watch, even when the node does not
// exist: it fires on the node's creation, data change or deletion.
func (c *Client) ExistsW(ctx context.Context, path string) (Stat, bool, <-chan Event, error) {
	return c.exists(ctx, path, true)
}

func (c *Client) exists(ctx context.Context, path string, watch bool) (Stat, bool, <-chan Event, error) {
	var w *watcher
	if watch {
		w = newWatcher(path, kindExist)
	}
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_Exists{Exists: &apipb.ExistsRequest{Path: path, Watch: watch}}}, false, w)
	if resp != nil && resp.Error == apipb.ErrorCode_NO_NODE {
		return Stat{}, false, w.channel(), nil
	}
	if err != nil {
		return Stat{}, false, nil, err
	}
	st := resp.GetExists().GetStat()
	if st == nil {
		return Stat{}, false, w.channel(), nil
	}
	return statFromPB(st), true, w.channel(), nil
}

// Children returns the names of a node's children, sorted, and its stat.
func (c *Client) Children(ctx context.Context, path string) ([]string, Stat, error) {
	ch, stat, _, err := c.children(ctx, path, false)
	return ch, stat, err
}

// ChildrenW is Children that also leaves a child watch, fired when a child
// is created or deleted or the node is deleted. On error no watch is left.
func (c *Client) ChildrenW(ctx context.Context, path string) ([]string, Stat, <-chan Event, error) {
	return c.children(ctx, path, true)
}

func (c *Client) children(ctx context.Context, path string, watch bool) ([]string, Stat, <-chan Event, error) {
	var w *watcher
	if watch {
		w = newWatcher(path, kindChild)
	}
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_GetChildren{GetChildren: &apipb.GetChildrenRequest{Path: path, Watch: watch}}}, false, w)
	if err != nil {
		return nil, Stat{}, nil, err
	}
	g := resp.GetGetChildren()
	return g.GetChildren(), statFromPB(g.GetStat()), w.channel(), nil
}

// Sync makes the session's next reads at least as new as the leader's
// commit point at the time of the sync (Sync then a read is a linearizable
// read).
func (c *Client) Sync(ctx context.Context, path string) error {
	_, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_Sync{Sync: &apipb.SyncRequest{Path: path}}}, false, nil)
	return err
}

// SyncGet is a linearizable Get: a Sync of path and a Get of it, sent
// together. The session applies its requests in order, so the Get runs once
// the Sync has completed and sees every write committed before SyncGet was
// called; it costs one round trip to the server instead of the two of Sync
// then Get. (ZooKeeper clients do the same by calling the asynchronous sync
// and reading at once.) If the Sync fails, its error is returned and the
// Get's outcome is not.
func (c *Client) SyncGet(ctx context.Context, path string) ([]byte, Stat, error) {
	r := c.doAll(ctx,
		&call{req: &apipb.Request{Op: &apipb.Request_Sync{Sync: &apipb.SyncRequest{Path: path}}}},
		&call{req: &apipb.Request{Op: &apipb.Request_GetData{GetData: &apipb.GetDataRequest{Path: path}}}})
	if r[0].err != nil {
		return nil, Stat{}, r[0].err
	}
	if r[1].err != nil {
		return nil, Stat{}, r[1].err
	}
	g := r[1].resp.GetGetData()
	return g.GetData(), statFromPB(g.GetStat()), nil
}

// Multi applies every op or none, atomically. When the server answered, the
// results (one per op) are returned even if the multi failed; the error is
// then the failing op's error (match it with errors.Is).
func (c *Client) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	m := &apipb.MultiRequest{Ops: make([]*apipb.MultiOp, len(ops))}
	for i, op := range ops {
		m.Ops[i] = op.pb
	}
	resp, err := c.do(ctx, &apipb.Request{Op: &apipb.Request_Multi{Multi: m}}, true, nil)
	if resp == nil {
		return nil, err
	}
	rs := resp.GetMulti().GetResults()
	out := make([]OpResult, len(rs))
	var failed, inconsistent error
	for i, r := range rs {
		out[i] = OpResult{Path: r.Path, Stat: statFromPB(r.Stat)}
		if r.Error == apipb.ErrorCode_OK {
			continue
		}
		if err != nil && r.Error == resp.Error {
			out[i].Err = err // the failing op: keep the server's message
		} else {
			out[i].Err = codeError(r.Error, "")
		}
		if r.Error == apipb.ErrorCode_RUNTIME_INCONSISTENCY {
			if inconsistent == nil {
				inconsistent = out[i].Err
			}
		} else if failed == nil {
			failed = out[i].Err
		}
	}
	if err == nil {
		err = failed
	}
	if err == nil {
		err = inconsistent
	}
	return out, err
}

// channel returns w's channel, or nil for no watcher.
func (w *watcher) channel() <-chan Event {
	if w == nil {
		return nil
	}
	return w.ch
}
