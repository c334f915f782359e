package rpc

// clusterLevelAtLeast reports whether the cluster's command level, as this
// server has applied it (fsm.FSM.ClusterLevel; cmdpb.SetLevel), is level or
// above, so that a command or field that level introduced may be proposed:
// the leader raises the level only once every member applies it, so no
// server ever ignores or skips what is proposed. Level 2 brings, among
// others, ClientAddress's election_port (recordSpec).
func (n *Node) clusterLevelAtLeast(level int64) bool {
	return n.fsm.ClusterLevel() >= level
}
