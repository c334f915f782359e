package rpc

// clusterLevelAtLeast reports whether every server of the cluster runs at
// cluster level level or above, so that a command or field that level
// introduced may be proposed: a server below it would ignore or skip it,
// and show another state than the rest. Level 2 brings ClientAddress's
// election_port (recordSpec).
//
// A stand-in until the cluster-level feature gate is wired here: every
// server is taken to be at level 1 unless a test says otherwise
// (Config.assumeClusterLevel).
func (n *Node) clusterLevelAtLeast(level int) bool {
	return max(1, n.cfg.assumeClusterLevel) >= level
}
