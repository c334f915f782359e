# coordd — build, test and run.
#
#   make test      everything CI checks: formatting, vet, dependency
#                  direction, doc comments, the links of the Markdown files, the raft
#                  fork (rpc/third_party/raft), then the whole suite with -race
#   make cluster   a local 3-node cluster in the foreground (N=5 for five;
#                  TLS=1 for TLS on both ports, certificates from make certs)
#   make certs     a CA and server, peer and client certificates in .cluster/tls
#   make release   static, version-stamped archives of both binaries in dist/
#   make deploy-check  the systemd unit and the Kubernetes manifests, checked
#   make console-test  the web console in headless Chromium, with screenshots
#   make crash     the Raft log store killed and torn CRASH_ROUNDS times (long)
#   make diskfault disks that fill up, stall or forget, under a cluster (root; long)
#   make scale     ZooKeeper 3.8 and coordd at scale, side by side (long)

GO        ?= go
BIN       ?= bin
N         ?= 3
PKGS      := ./...
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTOS    := rpc/apipb/api.proto rpc/peerpb/peer.proto fsm/cmdpb/command.proto
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin
# VERSION is what the binaries report (coordd --version, coordctl version,
# each member in coordctl status): git describe of the checkout, "dev"
# outside one; make build VERSION=... overrides it.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
DIST      ?= dist
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64

.PHONY: all build test unit lint fmt vet deps docs links raftfork proto proto-check cluster certs bench restart-bench compare-zookeeper compare-failover compare-etcd compat scale scale-ci scale-inprocess fuzz clean release release-check deploy-check console-test

all: build

## build: the first build downloads and compiles every dependency, which
## takes minutes on a small machine: it says so rather than sit silent.
build:
	@[ -x $(BIN)/coordd ] || echo "building $(BIN)/coordd and $(BIN)/coordctl (first time: a few minutes)"
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/coordd ./cmd/coordd
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/coordctl ./cmd/coordctl

## test: lint, then the whole suite with the race detector.
test: lint unit

unit:
	$(GO) test -race -count=1 -timeout 18m $(PKGS)
	cd test/cluster/compare && $(GO) test -race -count=1 .

lint: fmt vet deps docs links raftfork

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	$(GO) vet -tags browser ./cmd/coordd/
	$(GO) vet -tags diskfault $(DISKFAULT_PKGS)
	cd test/cluster/compare && $(GO) vet .

## deps: the import direction of DESIGN.md.
deps:
	@bash scripts/check-deps.sh

## raftfork: rpc/third_party/raft and rpc/third_party/raft-boltdb are the upstream modules plus exactly their coordd.patch.
raftfork:
	@bash scripts/check-raft-fork.sh

## docs: every package and exported name has a doc comment.
docs:
	@$(GO) run ./scripts/doccheck .

## links: every relative link of every Markdown file (README.md, DESIGN.md,
## docs/...) leads to a file that exists, and its #anchor to a heading there.
links:
	@$(GO) run ./scripts/linkcheck .

## proto: regenerate the committed protobuf code (needs Debian's protobuf-compiler).
proto:
	GOBIN=$(GOBIN_DIR) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(GOBIN_DIR) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(GOBIN_DIR):$$PATH" protoc --proto_path=. \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative $(PROTOS)

## proto-check: fail when the committed generated code is stale.
proto-check: proto
	@git diff --exit-code -- '*.pb.go' || (echo "generated protobuf code is stale: run make proto and commit"; exit 1)

## cluster: N local servers on 127.0.0.1 in the foreground; Ctrl-C stops all.
## TLS=1: TLS on the client and peer ports, client certificates required,
## with the files of make certs.
TLS       ?=
CERTS_DIR ?= .cluster/tls
cluster: build $(if $(filter 1,$(TLS)),certs)
	@$(if $(filter 1,$(TLS)),TLS_DIR=$(CERTS_DIR)) bash scripts/cluster.sh $(N)

## certs: a CA and server, peer and client certificates for a local cluster
## in CERTS_DIR (coordctl certs init; hosts 127.0.0.1, localhost, ::1),
## unless it holds a CA already.
certs: build
	@if [ -f $(CERTS_DIR)/ca.crt ]; then echo "$(CERTS_DIR) already holds a CA (remove it for new ones)"; \
	else $(BIN)/coordctl certs init $(CERTS_DIR) --hosts 127.0.0.1,localhost,::1; fi

## bench: Go micro-benchmarks, then coordctl bench's sweep against a local
## 3-node cluster (scripts/bench.sh; BENCH_DURATION, BENCH_SWEEP,
## BENCH_PROTOCOL=zk for ZooKeeper's protocol through go-zookeeper,
## BENCH_SERVERS=5 for five servers; TLS=1 runs the cluster with TLS on both
## ports).
bench: $(if $(filter 1,$(TLS)),certs)
	$(GO) test -run='^$$' -bench=. -benchmem ./tree/ ./session/ ./watch/ ./fsm/
	$(if $(filter 1,$(TLS)),TLS_DIR=$(CERTS_DIR)) GO=$(GO) BIN=$(BIN) bash scripts/bench.sh

## restart-bench: a follower of a 3-node cluster on 127.0.205.11-13 killed
## with SIGKILL and started again, RESTART_ROUNDS times, with the cores
## loaded (a CPU burner per core and coordctl bench write:16) and a health
## check asking coordctl status meanwhile: how long until it is caught up,
## reachable in coordctl status and serving (scripts/restart-bench.sh;
## RESTART_DOWN, RESTART_KILL=leader, RESTART_BURNERS, RESTART_WRITERS).
restart-bench:
	GO=$(GO) BIN=$(BIN) LDFLAGS="$(LDFLAGS)" bash scripts/restart-bench.sh

## compare-zookeeper, compare-etcd: coordd against a local 3-node ZooKeeper 3.8
## or etcd 3.4 cluster (Debian's zookeeper or etcd-server package), workload by
## workload, in alternation (scripts/compare.sh; COMPARE_SWEEP, COMPARE_DURATION,
## COMPARE_ROUNDS; COMPARE_PROTOCOL=zk|grpc|both: coordd driven by go-zookeeper,
## as ZooKeeper is, by its Go client, or both; against ZooKeeper also memory and
## a follower's catch-up, COMPARE_MEMORY_ZNODES, COMPARE_CATCHUP_WRITES; and
## the failover scenarios, COMPARE_FAILOVER, COMPARE_FAILOVER_ROUNDS).
compare-zookeeper:
	GO=$(GO) BIN=$(BIN) bash scripts/compare.sh zookeeper

## compare-failover: the failover scenarios alone against ZooKeeper 3.8 (a
## leader killed, a leader stopped, a rolling restart, a follower killed,
## under 64 writers and 64 readers; COMPARE_FAILOVER=all or a list,
## COMPARE_FAILOVER_ROUNDS, COMPARE_FAILOVER_DURATION, COMPARE_FAILOVER_CLIENTS).
compare-failover:
	GO=$(GO) BIN=$(BIN) COMPARE_SWEEP=none bash scripts/compare.sh zookeeper

compare-etcd:
	GO=$(GO) BIN=$(BIN) bash scripts/compare.sh etcd

## compat: ZooKeeper's own clients, unchanged (zkCli.sh, the Java client,
## Curator, kazoo; the C client and node-zookeeper-client through
## reconnects) and WatchProbe's scenarios against a 3-node cluster it
## starts on 127.0.200.11-13 (scripts/compat.sh; installs Debian's packages
## when root; about 6 minutes; not part of make test). TARGET=zookeeper runs
## the same suites against ZooKeeper 3.8 (but kazoo-lockdelay and
## curator-lockdelay, coordd's only: lock-delay); UPDATE=1 rewrites coordd's
## WatchProbe goldens; SUITES="zkcli java curator kazoo sasl fourletter probe
## reconnect kazoo-lockdelay" picks some (reconnect: the five *-reconnect suites);
## WATCH_FIXES=ZOOKEEPER_CLONE probes with ZooKeeper 3.9's watch fixes.
compat:
	GO=$(GO) BIN=$(BIN) LDFLAGS="$(LDFLAGS)" TARGET="$(TARGET)" UPDATE="$(UPDATE)" SUITES="$(SUITES)" WATCH_FIXES="$(WATCH_FIXES)" bash scripts/compat.sh

## scale: issue 41's figures at scale, ZooKeeper 3.8 and coordd side by side,
## each as three real processes with their data on disk, one after the other
## (scripts/scale.sh; about an hour at the default sizes, which want ~10 GB of
## memory; ZooKeeper needs Debian's zookeeper package): memory per znode, a
## 1 M-child parent, writes under snapshots, restarts, a follower behind and
## one wiped, watches and sessions held. SCALE_SYSTEMS=coordd for coordd alone;
## SCALE_ZNODES, SCALE_CHILDREN, SCALE_CATCHUP_WRITES, SCALE_WATCHES,
## SCALE_RECURSIVE, SCALE_SESSIONS, SCALE_GRPC_SESSIONS, SCALE_WRITE_TIME,
## SCALE_HOLD, ZK_HEAP change it (a size of 0 skips its figure); the table goes
## to SCALE_OUT (.scale/table.md). scale-ci is the short run CI makes (about
## two minutes). scale-inprocess: the in-process benchmark, one process, where
## a follower's catch-up time goes (SCALE_ZNODES, SCALE_WRITES).
SCALE_ZNODES ?= 1000000
SCALE_WRITES ?= 100000
scale:
	GO=$(GO) BIN=$(BIN) bash scripts/scale.sh

scale-ci:
	SCALE_SYSTEMS=coordd SCALE_ZNODES=20000 SCALE_CHILDREN=20000 SCALE_CATCHUP_WRITES=20000 \
	SCALE_WATCHES=20000 SCALE_RECURSIVE=2000 SCALE_SESSIONS=2000 SCALE_GRPC_SESSIONS=2000 \
	SCALE_WRITE_TIME=5s SCALE_HOLD=5s SCALE_SETTLE=6s SCALE_OUT=$${SCALE_OUT:-$$(mktemp -d)} \
	GO=$(GO) BIN=$(BIN) bash scripts/scale.sh

scale-inprocess:
	$(GO) test ./test/cluster/ -run='^$$' -bench='^BenchmarkScale$$' -benchtime=1x -timeout=30m -args -scale.znodes=$(SCALE_ZNODES) -scale.writes=$(SCALE_WRITES)

## fuzz: a short run of every fuzz target.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzValidatePath -fuzztime=30s ./tree/
	$(GO) test -run='^$$' -fuzz=FuzzRead -fuzztime=30s ./tree/
	$(GO) test -run='^$$' -fuzz=FuzzReadRegistry -fuzztime=30s ./session/
	$(GO) test -run='^$$' -fuzz=FuzzApply -fuzztime=30s ./fsm/
	$(GO) test -run='^$$' -fuzz=FuzzParseServerSpec -fuzztime=30s ./fsm/
	$(GO) test -run='^$$' -fuzz=FuzzReadFrame -fuzztime=30s ./rpc/zk/jute/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeRequest -fuzztime=30s ./rpc/zk/jute/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeResponse -fuzztime=30s ./rpc/zk/jute/
	$(GO) test -run='^$$' -fuzz=FuzzJAAS -fuzztime=30s ./rpc/zk/sasl/
	$(GO) test -run='^$$' -fuzz=FuzzResponse -fuzztime=30s ./rpc/zk/sasl/
	$(GO) test -run='^$$' -fuzz=FuzzRead -fuzztime=30s ./rpc/backup/

## release: coordd and coordctl for each of PLATFORMS, static (CGO off),
## -trimpath, VERSION stamped, as $(DIST)/coordd-VERSION-OS-ARCH.tar.gz, and
## $(DIST)/SHA256SUMS (scripts/release.sh).
release:
	GO=$(GO) VERSION=$(VERSION) LDFLAGS="$(LDFLAGS)" DIST=$(DIST) bash scripts/release.sh $(PLATFORMS)

## release-check: make release, then check the archives: checksums, build
## settings of every binary, and the linux/amd64 one run (scripts/release-check.sh).
release-check: release
	GO=$(GO) VERSION=$(VERSION) DIST=$(DIST) bash scripts/release-check.sh $(PLATFORMS)

## deploy-check: systemd-analyze verify and security on deploy/systemd, and the
## Kubernetes manifests decoded strictly into k8s.io/api types and checked
## (deploy/kubecheck); installs Debian's systemd if systemd-analyze is missing.
deploy-check:
	GO=$(GO) bash scripts/deploy-check.sh

## console-test: the web console in a real browser: headless Chromium
## (Debian's chromium, installed with apt-get when missing) driven by chromedp
## against three coordd processes, from the cluster view to a leader's death;
## the screenshots of each view go to CONSOLE_SHOTS, docs/console by default
## (build tag browser, so that chromedp stays out of the binaries and of make
## test).
CHROMIUM      ?= /usr/bin/chromium
CONSOLE_SHOTS ?= $(CURDIR)/docs/console
console-test:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "console-test needs Chromium: apt-get install chromium (as root)"; exit 1; fi; fi
	$(GO) test -tags browser -count=1 -timeout 10m -run '^TestConsoleInBrowser$$' ./cmd/coordd/ -args -chromium=$(CHROMIUM) -screenshots=$(CONSOLE_SHOTS)

clean:
	rm -rf $(BIN) .cluster $(DIST)

## chaos: the fault-injection suite against real coordd processes (needs root
## and iptables for partitions and slow links; skipped with a log line if not).
## SEED=0 picks a random seed (printed); failures land in test/cluster/chaos/chaos-out/<seed>.
## TLS=1 runs the servers with TLS on both ports (and client certificates);
## ACL=1 protects every workload node with an ACL (authenticated clients, a
## super user for the checkers, an unauthenticated observer); SECURE=1 is both.
## LOCKDELAY=10s runs the servers with --lock-delay /lock=10s (the lock
## workload's go-zookeeper holders must then overlap never, when it is longer
## than the schedule's longest fault).
SEED     ?= 0
DURATION ?= 5m
NODES    ?= 3
.PHONY: chaos chaos-ci chaos-ci-secure
chaos:
	$(GO) test ./test/cluster/chaos -run '^TestChaos$$' -timeout 3h -count=1 -v -args -chaos.seed=$(SEED) -chaos.duration=$(DURATION) -chaos.nodes=$(NODES) $(if $(filter 1,$(TLS) $(SECURE)),-chaos.tls) $(if $(filter 1,$(ACL) $(SECURE)),-chaos.acl) $(if $(LOCKDELAY),-chaos.lockdelay=$(LOCKDELAY))

## crash: the Raft log store's crash test at length (rpc's TestWALCrash; make
## test runs 12 rounds): a child appending and truncating is SIGKILLed at random
## points, its unsynced writes torn, and the store reopened and checked,
## CRASH_ROUNDS times; SEED=0 picks a random seed (printed).
CRASH_ROUNDS ?= 1000
.PHONY: crash
crash:
	$(GO) test ./rpc/ -run '^TestWALCrash$$' -count=1 -v -timeout 3h -args -logcrash.rounds=$(CRASH_ROUNDS) -logcrash.seed=$(SEED)

## diskfault: the disk-fault tests (build tag diskfault), DISKFAULT_ROUNDS
## times each: a server's data dir on a small tmpfs filled to the last bytes,
## the leader's then a follower's, under each log store (rpc's TestDiskFull);
## the leader's fsyncs made 2 s and 10 s slow by a FUSE file system under its
## data dir (rpc's TestSlowFsync, on test/cluster/faultfs); a server's machine
## stopping mid-write and losing what it had not fsynced, files and directory
## entries, the leader's or a follower's (rpc's TestLostFsync).
## They mount file systems, so they need root, and fail (never skip) without it.
## diskfault-ci: one round, run by .ci/run (about two minutes).
DISKFAULT_PKGS   := ./rpc/ ./test/cluster/faultfs/
DISKFAULT_RUN    := ^(TestDiskFull|TestSlowFsync|TestLostFsync|TestSyncDelay|TestLostSync)$$
DISKFAULT_ROUNDS ?= 10
.PHONY: diskfault diskfault-ci diskfault-root
diskfault-root:
	@[ "$$(id -u)" = 0 ] || { echo "make diskfault: the disk-fault tests mount file systems (tmpfs, FUSE): run them as root"; exit 1; }
diskfault: diskfault-root
	$(GO) test -tags diskfault -race -count=$(DISKFAULT_ROUNDS) -timeout 2h -v -run '$(DISKFAULT_RUN)' $(DISKFAULT_PKGS)
diskfault-ci: diskfault-root
	$(GO) test -tags diskfault -race -count=1 -timeout 10m -v -run '$(DISKFAULT_RUN)' $(DISKFAULT_PKGS)

## chaos-ci: a fixed-seed pass of about 2.5 minutes (3 nodes), run by .ci/run.
## chaos-ci-secure: a shorter one (50s of faults, about 70s) with TLS and
## ACLs on, also run by .ci/run.
chaos-ci:
	$(GO) test ./test/cluster/chaos -run '^TestChaos$$' -timeout 20m -count=1 -v -args -chaos.seed=20260601 -chaos.duration=2m -chaos.nodes=3
chaos-ci-secure:
	$(GO) test ./test/cluster/chaos -run '^TestChaos$$' -timeout 20m -count=1 -v -args -chaos.seed=20260602 -chaos.duration=50s -chaos.nodes=3 -chaos.tls -chaos.acl
