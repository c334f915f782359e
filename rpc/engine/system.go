package engine

import (
	"strings"

	"github.com/coordd/coordd/tree"
)

// ZooKeeper's system subtree. Every ZooKeeper server has /zookeeper, with
// /zookeeper/quota and /zookeeper/config (the ensemble's membership, which
// ZooKeeper's getConfig reads), and clients and tools expect them. They are
// not replicated state here: the engine answers reads of them from the
// cluster's configuration, as if the tree held them, and refuses writes to
// them. The root's listing and stat count /zookeeper as ZooKeeper's do.
const (
	systemRoot   = "/zookeeper"
	systemQuota  = "/zookeeper/quota"
	systemConfig = "/zookeeper/config"
)

func isSystemPath(p string) bool {
	return p == systemRoot || strings.HasPrefix(p, systemRoot+"/")
}

// writesSystemPath returns the first path of a write that lies in the
// system subtree, or "".
func writesSystemPath(r *Request) string {
	if isSystemPath(r.Path) {
		return r.Path
	}
	for i := range r.Ops {
		if p := writesSystemPath(&r.Ops[i]); p != "" {
			return p
		}
	}
	return ""
}

// systemNode returns a system node's data and stat.
func (s *Session) systemNode(p string) ([]byte, *tree.Stat) {
	data, st, _ := s.systemStat(p)
	return data, &st
}

// systemStat returns a system node's data and stat, or ErrNoNode.
func (s *Session) systemStat(p string) ([]byte, tree.Stat, error) {
	switch p {
	case systemRoot:
		return nil, tree.Stat{NumChildren: 2}, nil
	case systemQuota:
		return nil, tree.Stat{}, nil
	case systemConfig:
		data, version := s.e.cfg.ConfigData()
		// ZooKeeper sets the config node's ACL with version -1, which
		// leaves its aversion -1.
		return data, tree.Stat{DataLength: int32(len(data)), Mzxid: version, Aversion: -1}, nil
	}
	return nil, tree.Stat{}, tree.ErrNoNode
}

// readOnlyACL is world:anyone with READ: ZooKeeper's READ_ACL_UNSAFE, the
// ACL of /zookeeper/config.
var readOnlyACL = []tree.ACL{{Perms: tree.PermRead, Scheme: "world", ID: "anyone"}}

// systemACL returns a system node's ACL (ZooKeeper's: /zookeeper/config
// world:anyone:r, the others world:anyone:cdrwa), nil for other paths.
func systemACL(p string) []tree.ACL {
	switch {
	case p == systemConfig:
		return readOnlyACL
	case isSystemPath(p):
		return tree.OpenACL()
	}
	return nil
}

func (s *Session) getData(t *tree.Tree, p string) ([]byte, tree.Stat, error) {
	if isSystemPath(p) {
		return s.systemStat(p)
	}
	data, st, err := t.Get(p)
	if p == "/" {
		st.NumChildren++
	}
	return data, st, err
}

func (s *Session) exists(t *tree.Tree, p string) (tree.Stat, error) {
	_, st, err := s.getData(t, p)
	return st, err
}

func (s *Session) children(t *tree.Tree, p string) ([]string, tree.Stat, error) {
	switch p {
	case systemRoot:
		_, st, err := s.systemStat(p)
		return []string{"config", "quota"}, st, err
	case systemQuota, systemConfig:
		_, st, err := s.systemStat(p)
		return []string{}, st, err
	}
	if isSystemPath(p) {
		return nil, tree.Stat{}, tree.ErrNoNode
	}
	names, st, err := t.Children(p)
	if p == "/" && err == nil {
		st.NumChildren++
		i := 0
		for i < len(names) && names[i] < "zookeeper" {
			i++
		}
		names = append(names[:i], append([]string{"zookeeper"}, names[i:]...)...)
	}
	return names, st, err
}

func (s *Session) descendants(t *tree.Tree, p string) (int, error) {
	switch {
	case p == systemRoot:
		return 2, nil
	case isSystemPath(p):
		_, _, err := s.systemStat(p)
		return 0, err
	}
	n, err := t.Descendants(p)
	if p == "/" {
		n += 3
	}
	return n, err
}
