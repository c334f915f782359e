package main

import (
	"net"
	"os"
	"reflect"
	"testing"
	"time"
)

func TestParsePids(t *testing.T) {
	got, err := parsePids(" 12,34 ,,56")
	if err != nil || !reflect.DeepEqual(got, []int{12, 34, 56}) {
		t.Fatalf("parsePids: %v %v", got, err)
	}
	for _, bad := range []string{"x", "0", "-3"} {
		if _, err := parsePids(bad); err == nil {
			t.Errorf("parsePids(%q) accepted", bad)
		}
	}
}

func TestSides(t *testing.T) {
	names := func(c config) []string {
		var out []string
		for _, s := range sides(c, "ZooKeeper") {
			out = append(out, s.name+"/"+s.proto)
		}
		return out
	}
	if got := names(config{protocol: "zk"}); !reflect.DeepEqual(got, []string{"ZooKeeper/", "coordd/zk"}) {
		t.Errorf("zk: %v", got)
	}
	if got := names(config{protocol: "both"}); !reflect.DeepEqual(got, []string{"ZooKeeper/", "coordd-zk/zk", "coordd-grpc/grpc"}) {
		t.Errorf("both: %v", got)
	}
}

// TestSrvr reads the mode and zxid from a srvr answer, ZooKeeper's and
// coordd's alike.
func TestSrvr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 4)
			_, _ = c.Read(buf)
			_, _ = c.Write([]byte("Zookeeper version: 3.8.4\nLatency min/avg/max: 0/0.1/3\nZxid: 0x100000a2f\nMode: follower\nNode count: 5\n"))
			c.Close()
		}
	}()
	mode, zxid, err := srvr(ln.Addr().String())
	if err != nil || mode != "follower" || zxid != 0x100000a2f {
		t.Fatalf("srvr: %q %#x %v", mode, zxid, err)
	}
}

func TestProcHelpers(t *testing.T) {
	if got := split0([]byte("a\x00bc\x00\x00")); !reflect.DeepEqual(got, []string{"a", "bc"}) {
		t.Errorf("split0: %q", got)
	}
	if !alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	// This test's own binary is mapped (file pages) and its heap is not
	// empty (anonymous), and the two make up the whole.
	r := rssMB(os.Getpid())
	if r[totalRSS] <= 0 || r[anonRSS] <= 0 || r[fileRSS] <= 0 {
		t.Errorf("resident memory of this process: %+v, want every part > 0", r)
	}
	if d := r[totalRSS] - r[anonRSS] - r[fileRSS]; d < -0.01 || d > r[totalRSS]/2 {
		t.Errorf("resident memory of this process: %+v: anonymous and file pages are not most of it", r)
	}
}

func TestProcCPU(t *testing.T) {
	self := []int{os.Getpid()}
	before := procCPU(self)
	// Spin until the kernel has charged this process at least two more
	// ticks: procCPU must see CPU time grow as a process runs.
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for procCPU(self) < before+2*clockTick {
		if time.Now().After(deadline) {
			t.Fatalf("procCPU stayed at %v (from %v) for 10s of spinning", procCPU(self), before)
		}
		for i := range 1_000_000 {
			x += i
		}
	}
	_ = x
	if got := procCPU([]int{-1}); got != 0 {
		t.Errorf("procCPU of no process: %v, want 0", got)
	}
}

// coordctl bench's JSON gives the run's figures and each server's CPU
// seconds in the measured part; the servers' CPU per op is their sum over
// the ops.
func TestParseBench(t *testing.T) {
	out := []byte(`bench write clients=64: 1s/1s 100 ops, 100 ops/s, errors 0
{"workload":"write","clients":64,"ops":20000,"errors":0,"ops_per_s":10000,"p50_ms":4,"p99_ms":9.5,"servers":[{"id":"1","cpu_s":1.5},{"id":"2","cpu_s":0.25},{"id":"3","cpu_s":0.25}]}
`)
	r, err := parseBench(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 20000 || r.OpsPerS != 10000 || r.P99 != 9.5 || r.ServerCPUPerOp != 100 {
		t.Errorf("parseBench: %+v, want 20000 ops at 10000/s, p99 9.5 ms, 100 µs of server CPU per op", r)
	}
	r, err = parseBench([]byte(`{"workload":"read","ops":10,"ops_per_s":5}`))
	if err != nil || r.ServerCPUPerOp != 0 {
		t.Errorf("without servers: %+v %v, want no CPU per op", r, err)
	}
	if _, err := parseBench([]byte("not json")); err == nil {
		t.Error("parseBench accepted garbage")
	}
}
