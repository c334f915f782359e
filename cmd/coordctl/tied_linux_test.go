//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// procState returns the state letter and the process group of pid from
// /proc, ok false when there is no such process.
func procState(pid int) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0], pgrp, true
}

// running reports whether pid is a process that has not ended (a zombie
// has ended: it only waits to be reaped).
func running(pid int) bool {
	st, _, ok := procState(pid)
	return ok && st != "Z" && st != "X"
}

// killLeftover kills pid with SIGKILL if it still runs.
func killLeftover(pid int) {
	if running(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestKilledCoordctlTakesCommandAlong: when coordctl lock (or elect) is
// killed with SIGKILL, CMD does not run on: CMD and a child of CMD in its
// process group are gone soon after (Pdeathsig and the group's reaper).
func TestKilledCoordctlTakesCommandAlong(t *testing.T) {
	for _, verb := range []string{"lock", "elect"} {
		t.Run(verb, func(t *testing.T) {
			p := "/t/killed/" + verb
			fresh(t, p)
			pids := filepath.Join(t.TempDir(), "pids")
			// CMD, a shell, starts a grandchild (in its group) and waits.
			script := `sleep 1000 & echo "$$ $!" > "$1.tmp"; mv "$1.tmp" "$1"; wait`
			ctl, _, stderr := startHelper(t, "main", "--servers", server(t), "--session-timeout", "2s",
				verb, p, "--", "sh", "-c", script, "sh", pids)
			var child, grandchild int
			if !poll(10*time.Second, func() bool {
				_, err := fmt.Sscan(readFile(pids), &child, &grandchild)
				return err == nil
			}) {
				t.Fatalf("CMD never ran; stderr:\n%s", stderr.String())
			}
			t.Cleanup(func() { killLeftover(child); killLeftover(grandchild) })
			if _, g, _ := procState(child); g != child {
				t.Fatalf("CMD %d is in process group %d, not its own", child, g)
			}
			if _, g, _ := procState(grandchild); g != child {
				t.Fatalf("CMD's child %d is in process group %d, not CMD's %d", grandchild, g, child)
			}
			if err := ctl.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = ctl.Wait()
			if !poll(10*time.Second, func() bool { return !running(child) && !running(grandchild) }) {
				t.Fatalf("10s after coordctl %s was killed: CMD %d running %v, its child %d running %v",
					verb, child, running(child), grandchild, running(grandchild))
			}
		})
	}
}

// TestTiedCommandDiesWithoutGroup: a command started by startTied that
// shares coordctl's process group (a terminal's foreground, where there is
// no reaper) is killed when coordctl is, by Pdeathsig; and not before, even
// though the runtime ends OS threads meanwhile.
func TestTiedCommandDiesWithoutGroup(t *testing.T) {
	h, stdout, stderr := startHelper(t, "tied")
	if !poll(10*time.Second, func() bool { return strings.HasSuffix(stdout.String(), "ready\n") }) {
		t.Fatalf("helper: stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	pid, err := strconv.Atoi(strings.Fields(stdout.String())[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killLeftover(pid) })
	if !running(pid) {
		t.Fatalf("the command %d ended before its parent did (its thread ended)", pid)
	}
	if _, g, _ := procState(pid); g == pid {
		t.Fatalf("the command %d has a group of its own", pid)
	}
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.Wait()
	if !poll(10*time.Second, func() bool { return !running(pid) }) {
		t.Fatalf("the command %d still runs 10s after its parent was killed", pid)
	}
}
