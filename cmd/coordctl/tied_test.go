package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary a helper process instead of running the
// tests: "main" runs coordctl with the process's arguments, "tied" runs
// tiedHelper.
const helperEnv = "COORDCTL_TEST_HELPER"

// startHelper starts the test binary as a helper process in mode, with
// args; it is killed (SIGKILL) and waited for when the test ends. Its
// stdin is a pipe that stays open until then.
func startHelper(t *testing.T, mode string, args ...string) (cmd *exec.Cmd, stdout, stderr *lockedBuffer) {
	t.Helper()
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	stdout, stderr = &lockedBuffer{}, &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A process left behind keeps the output pipes open: Wait must not
	// wait for it.
	cmd.WaitDelay = 5 * time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		in.Close()
	})
	return cmd, stdout, stderr
}

// tiedHelper starts "sleep 1000" with startTied in the helper's own process
// group (no reaper, Pdeathsig alone), prints its pid, ends OS threads the
// way the runtime does (a goroutine that exits locked to its thread ends
// it; the thread that started the command must not be one of them), prints
// "ready" and waits for stdin to close.
func tiedHelper() {
	c := exec.Command("sleep", "1000")
	c.SysProcAttr = &syscall.SysProcAttr{}
	if _, err := startTied(c, false, func(error) {}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(c.Process.Pid)
	for range 200 {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(done)
		}()
		<-done
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}
