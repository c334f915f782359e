package engine

import (
	"github.com/coordd/coordd/tree"
)

// ZooKeeper's system nodes (/zookeeper, /zookeeper/quota, /zookeeper/config)
// are in the tree, as in ZooKeeper (tree.AddSystemNodes): reads, ACLs,
// creates below them and quotas are the tree's. The data of
// /zookeeper/config, the ensemble's membership, comes from the cluster's
// configuration (Config.ConfigData), and its mzxid is the configuration's
// version.
const systemConfig = tree.ConfigPath

// configNode returns /zookeeper/config's data and stat as reads see them.
func (s *Session) configNode(t *tree.Tree) ([]byte, tree.Stat, error) {
	_, st, err := t.Get(systemConfig)
	if err != nil {
		return nil, st, err
	}
	data, version := s.e.cfg.ConfigData()
	if data == nil {
		data = []byte{}
	}
	st.DataLength, st.Mzxid = int32(len(data)), version
	return data, st, nil
}

func (s *Session) getData(t *tree.Tree, p string) ([]byte, tree.Stat, error) {
	if p == systemConfig {
		return s.configNode(t)
	}
	return t.Get(p)
}

func (s *Session) exists(t *tree.Tree, p string) (tree.Stat, error) {
	_, st, err := s.getData(t, p)
	return st, err
}

func (s *Session) children(t *tree.Tree, p string) ([]string, tree.Stat, error) {
	names, st, err := t.Children(p)
	if p == systemConfig && err == nil {
		_, st, err = s.configNode(t)
	}
	return names, st, err
}
