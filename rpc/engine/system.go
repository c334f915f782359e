package engine

import (
	"github.com/coordd/coordd/tree"
)

// ZooKeeper's system nodes (/zookeeper, /zookeeper/quota, /zookeeper/config)
// are in the tree, as in ZooKeeper (tree.AddSystemNodes): reads, ACLs,
// creates below them and quotas are the tree's, and so is
// /zookeeper/config's data, the membership, which the FSM renders from each
// configuration it applies (fsm/zkconfig.go).
const systemConfig = tree.ConfigPath

func (s *Session) getData(t *tree.Tree, p string) ([]byte, tree.Stat, error) {
	return t.Get(p)
}

func (s *Session) exists(t *tree.Tree, p string) (tree.Stat, error) {
	return t.Exists(p)
}

func (s *Session) children(t *tree.Tree, p string) ([]string, tree.Stat, error) {
	return t.Children(p)
}
