package faultfs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The file system is served by a process of its own: the test binary run
// again (Mount), which serves it and nothing else (init, below). Served
// from the process whose servers use it, it could deadlock that process:
// bbolt maps its file into memory, a goroutine faulting on a page of it
// waits for the FUSE server, and a garbage collection that starts then
// waits for that goroutine to stop, while the FUSE server's goroutines wait
// for the collection. The test talks to the serving process over its stdin
// and stdout, a command a line.

const (
	envBacking = "COORDD_FAULTFS_BACKING"
	envMount   = "COORDD_FAULTFS_MOUNT"
)

// init serves the file system, and exits, in a process Mount started.
func init() {
	backing := os.Getenv(envBacking)
	if backing == "" {
		return
	}
	os.Exit(serveChild(backing, os.Getenv(envMount), os.Stdin, os.Stdout))
}

// serveChild mounts the file system and runs the commands read from in
// until "unmount" or the end of in, answering each on out.
func serveChild(backing, mountpoint string, in io.Reader, out io.Writer) int {
	srv, err := mount(backing, mountpoint)
	if err != nil {
		fmt.Fprintf(out, "err %v\n", err)
		return 1
	}
	fmt.Fprintln(out, "ok")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "delay":
			ns, _ := strconv.ParseInt(f[1], 10, 64)
			srv.syncDelay.Store(ns)
			fmt.Fprintln(out, "ok")
		case "syncs":
			fmt.Fprintf(out, "ok %d\n", srv.syncs.Load())
		case "lose":
			srv.loseUnsynced(f[1] == "1")
			fmt.Fprintln(out, "ok")
		case "crash":
			srv.crash()
			fmt.Fprintln(out, "ok")
		case "restart":
			if err := srv.restart(); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
			} else {
				fmt.Fprintln(out, "ok")
			}
		case "lost":
			files, entries := srv.lostNow()
			fmt.Fprintf(out, "ok %d %d\n", files, entries)
		case "unmount":
			if err := srv.unmount(); err != nil {
				fmt.Fprintf(out, "err %v\n", err)
				return 1
			}
			fmt.Fprintln(out, "ok")
			return 0
		default:
			fmt.Fprintf(out, "err unknown command %q\n", f[0])
		}
	}
	// The test is gone: unmount all the same.
	srv.syncDelay.Store(0)
	if err := srv.unmount(); err != nil {
		return 1
	}
	return 0
}

// FS is a mounted fault file system, served by a process of its own.
type FS struct {
	// Dir is where it is mounted: what the test hands the server.
	Dir string

	mu   sync.Mutex
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	done bool
}

// Mount mounts a loopback of backing (a directory) on mountpoint (an
// empty directory), served by the test binary run again. Unmount it when
// done. The test binary must import this package (its init serves).
func Mount(backing, mountpoint string) (*FS, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envBacking+"="+backing, envMount+"="+mountpoint)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("faultfs: %w", err)
	}
	f := &FS{Dir: mountpoint, cmd: cmd, in: in, out: bufio.NewReader(out)}
	if _, err := f.reply(); err != nil {
		in.Close()
		cmd.Wait()
		return nil, err
	}
	return f, nil
}

// reply reads the serving process's answer: its values, or its error.
func (f *FS) reply() ([]string, error) {
	line, err := f.out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("faultfs: the serving process: %w", err)
	}
	fs := strings.Fields(line)
	if len(fs) == 0 || fs[0] != "ok" {
		return nil, fmt.Errorf("faultfs: %s", strings.TrimSpace(strings.TrimPrefix(line, "err ")))
	}
	return fs[1:], nil
}

// do sends a command and returns the answer's values.
func (f *FS) do(cmd string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return nil, fmt.Errorf("faultfs: %s is unmounted", f.Dir)
	}
	if _, err := fmt.Fprintln(f.in, cmd); err != nil {
		return nil, fmt.Errorf("faultfs: the serving process: %w", err)
	}
	return f.reply()
}

// must is do for the commands that cannot fail but for a dead server.
func (f *FS) must(cmd string) []string {
	v, err := f.do(cmd)
	if err != nil {
		panic(err)
	}
	return v
}

// Unmount unmounts the file system and ends its serving process; the
// files stay in the backing directory.
func (f *FS) Unmount() error {
	_, err := f.do("unmount")
	f.mu.Lock()
	f.done = true
	f.in.Close()
	f.mu.Unlock()
	if werr := f.cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("faultfs: the serving process: %w", werr)
	}
	return err
}

// SetSyncDelay makes every fsync from now on take d longer (0: none).
func (f *FS) SetSyncDelay(d time.Duration) { f.must(fmt.Sprintf("delay %d", int64(d))) }

// Syncs returns the number of fsyncs done so far.
func (f *FS) Syncs() int64 {
	n, _ := strconv.ParseInt(f.must("syncs")[0], 10, 64)
	return n
}

// LoseUnsynced turns on (or off) the remembering of what a crash loses:
// the content of each file as of its last fsync, and the entries made in
// each directory since its last fsync. Turned on, what was written before
// counts as synced.
func (f *FS) LoseUnsynced(on bool) {
	v := "0"
	if on {
		v = "1"
	}
	f.must("lose " + v)
}

// Crash freezes the file system, as a machine that stops: every write,
// sync and change of a directory fails with EIO from now on, until
// Restart. Stop the server on it, then call Restart.
func (f *FS) Crash() { f.must("crash") }

// Restart undoes what was never synced (with LoseUnsynced on) and thaws
// the file system, as the machine that comes back.
func (f *FS) Restart() error {
	_, err := f.do("restart")
	return err
}

// Lost reports how many files hold unsynced writes, and how many
// directory entries are unsynced: what Restart would undo now.
func (f *FS) Lost() (files, entries int) {
	v := f.must("lost")
	files, _ = strconv.Atoi(v[0])
	entries, _ = strconv.Atoi(v[1])
	return files, entries
}
