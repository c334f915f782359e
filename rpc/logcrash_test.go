//go:build linux

package rpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	walfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/types"
)

// The crash test of the Raft log store (TestWALCrash): a child process
// appends to the WAL, truncates its head and tail, and sets its stable
// store, reporting each operation as it begins and ends, until the test
// SIGKILLs it at a random point. Every time a segment file is fsynced, the
// child copies it aside (its shadow: what a power failure cannot take
// away). The test then plays the power failure the kill was not: in each
// segment, the sectors that differ from the shadow keep their new content,
// revert to the old, or tear (a prefix written, garbage), and a segment
// never synced may vanish. It reopens the store and checks that it holds
// exactly the log of every operation that returned, plus perhaps the one
// under way, all of it or none: nothing acknowledged lost, no gap, no entry
// it was not given. Then it starts the next child on the same files. make
// crash runs many more rounds than make test.
var (
	crashRounds = flag.Int("logcrash.rounds", 12, "TestWALCrash: kill-and-reopen rounds")
	crashSeed   = flag.Uint64("logcrash.seed", 0, "TestWALCrash: seed (0: from the clock; printed)")
)

// crashChildEnv names the environment variable that makes the test binary
// a crash child: it holds the child's crashStart as JSON.
const crashChildEnv = "COORDD_LOGCRASH_CHILD"

// crashSegmentSize is the WAL segment size in the crash test: small, so that
// segments fill, seal and rotate every few operations.
const crashSegmentSize = 96 << 10

func TestMain(m *testing.M) {
	if s := os.Getenv(crashChildEnv); s != "" {
		os.Exit(crashChild(s))
	}
	os.Exit(m.Run())
}

// crashModel is what the log store must hold: entries first..last (none
// when last is 0), each of a term, and the stable store's one key.
type crashModel struct {
	First, Last uint64
	Terms       []uint64 // Terms[i] is the term of entry First+i
	Next        uint64   // the index of the next append to an empty log
	Term        uint64   // the term of the next append
	Stable      uint64   // CurrentTerm in the stable store (0: unset)
}

func (m crashModel) clone() crashModel {
	m.Terms = slices.Clone(m.Terms)
	return m
}

// Operations on the store.
const (
	opAppend     = "append"      // StoreLogs of entries Lo..Hi
	opDeleteHead = "delete-head" // DeleteRange(Lo, Hi), a prefix: compaction after a snapshot
	opDeleteTail = "delete-tail" // DeleteRange(Lo, Hi), a suffix: a follower's conflicting entries
	opDeleteAll  = "delete-all"  // DeleteRange(First, Last): a snapshot installed
	opSetStable  = "set-stable"  // SetUint64(CurrentTerm, Hi)
	opReopen     = "reopen"      // Close and open again
)

type crashOp struct {
	Kind   string
	Lo, Hi uint64
}

// next picks an operation valid in m.
func (m crashModel) next(r *rand.Rand) crashOp {
	n := m.Last - m.First + 1
	if m.Last == 0 {
		n = 0
	}
	for {
		switch p := r.IntN(100); {
		case p < 55:
			lo := m.Last + 1
			if m.Last == 0 {
				lo = m.Next
			}
			return crashOp{Kind: opAppend, Lo: lo, Hi: lo + uint64(r.IntN(24))}
		case p < 68 && n > 1:
			k := 1 + uint64(r.IntN(int(min(n-1, 40))))
			return crashOp{Kind: opDeleteTail, Lo: m.Last - k + 1, Hi: m.Last}
		case p < 80 && n > 1:
			return crashOp{Kind: opDeleteHead, Lo: m.First, Hi: m.First + uint64(r.IntN(int(n/2)+1))}
		case p < 84 && n > 0:
			return crashOp{Kind: opDeleteAll, Lo: m.First, Hi: m.Last}
		case p < 97:
			return crashOp{Kind: opSetStable, Hi: m.Stable + 1 + uint64(r.IntN(3))}
		case p < 100:
			return crashOp{Kind: opReopen}
		}
	}
}

// apply returns m after op.
func (m crashModel) apply(op crashOp) crashModel {
	m = m.clone()
	switch op.Kind {
	case opAppend:
		if m.Last == 0 {
			m.First = op.Lo
		}
		for i := op.Lo; i <= op.Hi; i++ {
			m.Terms = append(m.Terms, m.Term)
		}
		m.Last = op.Hi
	case opDeleteTail:
		m.Terms = m.Terms[:op.Lo-m.First]
		m.Last = op.Lo - 1
		m.Term++ // a new leader's entries replace them
	case opDeleteHead:
		if op.Hi >= m.Last {
			m.Next, m.First, m.Last, m.Terms = m.Last+1, 0, 0, nil
			break
		}
		m.Terms = m.Terms[op.Hi+1-m.First:]
		m.First = op.Hi + 1
	case opDeleteAll:
		// The snapshot is ahead of the log, as a follower's is.
		m.Next, m.First, m.Last, m.Terms = m.Last+1+uint64(len(m.Terms)%7), 0, 0, nil
		m.Term++
	case opSetStable:
		m.Stable = op.Hi
	}
	return m
}

// crashEntry is entry index of term as the child writes it: its data, of a
// size and content that follow from index and term.
func crashEntry(index, term uint64) *raft.Log {
	r := rand.New(rand.NewPCG(index, term))
	n := 16 + r.IntN(300)
	if r.IntN(25) == 0 {
		n = 8<<10 + r.IntN(40<<10) // spans blocks, fills segments
	}
	data := make([]byte, n)
	binary.LittleEndian.PutUint64(data, index)
	binary.LittleEndian.PutUint64(data[8:], term)
	for i := 16; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(data[i:], w[:])
	}
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: data, AppendedAt: time.Unix(1700000000, 0)}
}

// crashStart is what a crash child starts from.
type crashStart struct {
	Dir    string
	Shadow string // where segment files are copied when synced
	Seed   uint64
	Model  crashModel
	MaxOps int
}

// crashChild runs the child's operations against the store in
// start.Dir until it is killed or has done start.MaxOps. It reports on
// stdout, one write per line, "begin N KIND" and "done N" around operation
// N, and "write FILE" after each write to a segment file (before its fsync).
func crashChild(env string) int {
	var st crashStart
	if err := json.Unmarshal([]byte(env), &st); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	out := os.Stdout
	open := func() raftStore {
		s, err := openWALStore(st.Dir, hclog.NewNullLogger(), walOptions{segmentSize: crashSegmentSize, vfs: &shadowVFS{VFS: walfs.New(), shadow: st.Shadow, out: out}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "crash child: open:", err)
			os.Exit(3)
		}
		return s
	}
	s := open()
	r := rand.New(rand.NewPCG(st.Seed, 0))
	m := st.Model
	for n := 1; n <= st.MaxOps; n++ {
		op := m.next(r)
		fmt.Fprintf(out, "begin %d %s\n", n, op.Kind)
		var err error
		switch op.Kind {
		case opAppend:
			var logs []*raft.Log
			for i := op.Lo; i <= op.Hi; i++ {
				logs = append(logs, crashEntry(i, m.Term))
			}
			err = s.StoreLogs(logs)
		case opDeleteHead, opDeleteTail, opDeleteAll:
			err = s.DeleteRange(op.Lo, op.Hi)
		case opSetStable:
			err = s.SetUint64(keyCurrentTerm, op.Hi)
		case opReopen:
			err = s.Close()
			s = open()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "crash child: op %d %+v: %v\n", n, op, err)
			return 4
		}
		m = m.apply(op)
		fmt.Fprintf(out, "done %d\n", n)
	}
	s.Close()
	return 0
}

// shadowVFS is raft-wal's file system with every segment file copied to
// the shadow dir each time it is fsynced: the shadow is what the disk is
// sure to hold.
type shadowVFS struct {
	types.VFS
	shadow string
	out    io.Writer // if set, told "write NAME" after each write to a segment
}

func (v *shadowVFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return &shadowFile{WritableFile: f, path: filepath.Join(dir, name), shadow: filepath.Join(v.shadow, name), out: v.out}, nil
}

func (v *shadowVFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return &shadowFile{WritableFile: f, path: filepath.Join(dir, name), shadow: filepath.Join(v.shadow, name), out: v.out}, nil
}

type shadowFile struct {
	types.WritableFile
	path, shadow string
	out          io.Writer
}

func (f *shadowFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.WritableFile.WriteAt(p, off)
	if f.out != nil {
		fmt.Fprintf(f.out, "write %s\n", filepath.Base(f.path))
	}
	return n, err
}

// Sync fsyncs the file, then replaces its shadow with its content (written
// aside and renamed, so that a kill leaves the old shadow or the new).
func (f *shadowFile) Sync() error {
	if err := f.WritableFile.Sync(); err != nil {
		return err
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.shadow+".tmp", b, 0o600); err != nil {
		return err
	}
	return os.Rename(f.shadow+".tmp", f.shadow)
}

// crashRound is what the test learnt from one child.
type crashRound struct {
	done   int            // the last operation reported done
	begun  int            // the last operation begun
	kind   map[int]string // operation -> kind
	exited error          // the child's exit
	stderr string
}

// runCrashChild starts a child on st and kills it when kill says so,
// reading its reports.
func runCrashChild(t *testing.T, st crashStart, kill func(line string, n int) bool) crashRound {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), crashChildEnv+"="+string(env))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
	}()
	rd := crashRound{kind: map[int]string{}}
	sc := bufio.NewScanner(stdout)
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "begin":
			n, _ := strconv.Atoi(f[1])
			rd.begun, rd.kind[n] = n, f[2]
		case len(f) == 2 && f[0] == "done":
			rd.done, _ = strconv.Atoi(f[1])
		case len(f) == 2 && f[0] == "write":
		default:
			t.Fatalf("crash child said %q", line)
		}
		if !killed && kill(line, lines) {
			_ = cmd.Process.Kill()
			killed = true
		}
	}
	rd.exited = cmd.Wait()
	killed = true
	rd.stderr = stderr.String()
	return rd
}

// tear plays a power failure on the WAL's segment files: each sector that
// differs from the file's shadow (its content at its last fsync) keeps its
// new content or reverts to the old, as a disk may have written some and
// not others, or is torn (its new bytes part written, part garbage); a file
// never synced may vanish, or lose any of its sectors. What an fsync made
// durable is never changed. It returns what it did, for the failure
// message.
func tear(t *testing.T, dir, shadow string, r *rand.Rand) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	const sector = 512
	var did []string
	for _, path := range files {
		name := filepath.Base(path)
		cur, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(filepath.Join(shadow, name))
		synced := err == nil
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if !synced && r.IntN(3) == 0 {
			// Created, but its directory entry was never made durable.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			did = append(did, "removed "+name)
			continue
		}
		// The sectors written since the last fsync.
		var changed []int
		for at := 0; at < len(cur); at += sector {
			end := min(at+sector, len(cur))
			var was []byte
			if at < len(old) {
				was = old[at:min(end, len(old))]
			}
			if !bytes.Equal(cur[at:end], append(was, make([]byte, end-at-len(was))...)) {
				changed = append(changed, at)
			}
		}
		if len(changed) == 0 {
			continue
		}
		revert := func(at int) {
			for i := at; i < min(at+sector, len(cur)); i++ {
				cur[i] = 0
				if i < len(old) {
					cur[i] = old[i]
				}
			}
		}
		mode := r.IntN(5)
		switch mode {
		case 0: // the kill only: the page cache reached the disk
		case 1: // nothing since the last fsync reached the disk
			for _, at := range changed {
				revert(at)
			}
		case 2: // some sectors did, some did not
			for _, at := range changed {
				if r.IntN(2) == 0 {
					revert(at)
				}
			}
		case 3: // written in order, cut off
			k := r.IntN(len(changed) + 1)
			for _, at := range changed[k:] {
				revert(at)
			}
		case 4: // cut off inside a sector: of its new bytes, those after
			// a point are garbage (the bytes it held at the last fsync stay:
			// a disk does not lose what it made durable, as bbolt and
			// raft-wal assume)
			k := r.IntN(len(changed))
			for _, at := range changed[k+1:] {
				revert(at)
			}
			at := changed[k]
			for i := at + r.IntN(sector); i < min(at+sector, len(cur)); i++ {
				if i >= len(old) || cur[i] != old[i] {
					cur[i] = byte(r.Uint32())
				}
			}
		}
		if mode == 0 {
			continue
		}
		if err := os.WriteFile(path, cur, 0o600); err != nil {
			t.Fatal(err)
		}
		did = append(did, fmt.Sprintf("%s: mode %d, %d sectors written since its fsync (the first at %d)", name, mode, len(changed), changed[0]))
	}
	return did
}

// readBack reads the store's whole log and stable store as a model (Next
// and Term, which the store does not hold, are left zero).
func readBack(s raftStore) (crashModel, error) {
	var m crashModel
	first, err := s.FirstIndex()
	if err != nil {
		return m, err
	}
	last, err := s.LastIndex()
	if err != nil {
		return m, err
	}
	if (first == 0) != (last == 0) || first > last {
		return m, fmt.Errorf("first index %d, last %d", first, last)
	}
	m.First, m.Last = first, last
	if last > 0 {
		for i := first; i <= last; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				return m, fmt.Errorf("entry %d of %d..%d: %w", i, first, last, err)
			}
			want := crashEntry(i, l.Term)
			if l.Index != i || !bytes.Equal(l.Data, want.Data) {
				return m, fmt.Errorf("entry %d of %d..%d reads as index %d term %d with %d bytes of data that are not its own", i, first, last, l.Index, l.Term, len(l.Data))
			}
			m.Terms = append(m.Terms, l.Term)
		}
	}
	m.Stable, err = s.GetUint64(keyCurrentTerm)
	return m, err
}

func sameLog(a, b crashModel) bool {
	return a.First == b.First && a.Last == b.Last && slices.Equal(a.Terms, b.Terms) && a.Stable == b.Stable
}

// TestWALCrash: see the comment on crashRounds. Each round kills the child
// at a random report, or as it begins a truncation (head, tail or all of
// the log), so that kills land inside them too.
func TestWALCrash(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-args -logcrash.seed=%d repeats it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 1))
	dir, shadow := t.TempDir(), t.TempDir()
	m := crashModel{Next: 1, Term: 1}
	kinds := map[string]int{}
	tears, withOpBegun := 0, 0
	for round := 1; round <= *crashRounds; round++ {
		st := crashStart{Dir: dir, Shadow: shadow, Seed: r.Uint64(), Model: m, MaxOps: 2000}
		// Where to kill: at a random report, as the j-th truncation
		// begins, or after the j-th write to a segment, while its fsync
		// is under way.
		var kill func(line string, n int) bool
		switch r.IntN(3) {
		case 0:
			at := 1 + r.IntN(1500)
			kill = func(_ string, n int) bool { return n == at }
		case 1:
			j := 1 + r.IntN(6)
			kill = func(line string, _ int) bool {
				if strings.HasPrefix(line, "begin ") && strings.Contains(line, " delete-") {
					j--
				}
				return j == 0
			}
		default:
			j := 1 + r.IntN(60)
			kill = func(line string, _ int) bool {
				if strings.HasPrefix(line, "write ") {
					j--
				}
				return j == 0
			}
		}
		rd := runCrashChild(t, st, kill)
		if rd.stderr != "" || (rd.exited != nil && rd.exited.Error() != "signal: killed") {
			t.Fatalf("round %d: the child failed (%v): %s", round, rd.exited, rd.stderr)
		}
		if rd.begun > rd.done {
			kinds[rd.kind[rd.begun]]++
		}

		// What the store may hold: the log after every operation done, or
		// after the one begun too.
		cr := rand.New(rand.NewPCG(st.Seed, 0))
		before := m
		var during *crashModel
		for n := 1; n <= rd.begun; n++ {
			next := before.apply(before.next(cr))
			if n <= rd.done {
				before = next
			} else {
				during = &next
			}
		}

		did := tear(t, dir, shadow, r)
		tears += len(did)
		// Reopened as a server would: what it recovers is synced, so
		// through the shadowing file system.
		s, err := openWALStore(dir, hclog.NewNullLogger(), walOptions{segmentSize: crashSegmentSize, vfs: &shadowVFS{VFS: walfs.New(), shadow: shadow}})
		if err != nil {
			t.Fatalf("round %d: killed in op %d (%s), then %v: reopening: %v", round, rd.begun, rd.kind[rd.begun], did, err)
		}
		got, err := readBack(s)
		s.Close()
		if err != nil {
			t.Fatalf("round %d: killed in op %d (%s), then %v: reading back: %v", round, rd.begun, rd.kind[rd.begun], did, err)
		}
		switch {
		case sameLog(got, before):
			m = before
		case during != nil && sameLog(got, *during):
			m = *during
			withOpBegun++
		default:
			t.Fatalf("round %d: killed in op %d (%s) after op %d returned, then %v:\nthe store holds %d..%d terms %v stable %d\nwant         %d..%d terms %v stable %d (op %d done)",
				round, rd.begun, rd.kind[rd.begun], rd.done, did, got.First, got.Last, got.Terms, got.Stable,
				before.First, before.Last, before.Terms, before.Stable, rd.done)
		}
	}
	t.Logf("%d rounds; killed inside: %v; %d files torn; %d times the store held the operation under way; the log ends at %d..%d",
		*crashRounds, kinds, tears, withOpBegun, m.First, m.Last)
}
