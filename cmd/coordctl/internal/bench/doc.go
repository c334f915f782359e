// Package bench is the engine of coordctl bench: load generators against a
// running cluster. A run opens sessions of its own, spreads them evenly over
// the servers, warms up, measures one workload for a fixed time and reports
// its throughput, its latency percentiles and the servers' memory and CPU.
//
// The sessions speak either of the cluster's client protocols: coordd's
// gRPC API through package client, or ZooKeeper's through go-zookeeper
// (github.com/go-zookeeper/zk), which also measures a ZooKeeper ensemble.
// Both are behind one interface, session (session.go; grpc.go and zk.go
// implement it), opened by one connect loop (connect.go), so a workload is
// written once for both. Each workload is a file of its own; workload.go
// lists them.
//
// It must not know coordctl's command line or its output (the verb turns
// flags into a Config and prints the Results, as text or JSON), nor any
// server package: it reaches the cluster as a client does.
package bench
