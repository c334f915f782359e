package main

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
)

// The command that lock and elect run must not outlive coordctl: a
// coordctl killed with SIGKILL can neither stop it nor release the lock,
// and the next holder's command would run beside it once the session
// expires. Two measures tie it to coordctl:
//
//   - On Linux the command gets SIGKILL when coordctl dies (Pdeathsig,
//     tied_linux.go). The kernel sends it when the thread that started the
//     command ends, not the process, so the command is started and waited
//     for by a goroutine locked to its thread: the thread lives until the
//     command has ended.
//   - When the command has a process group of its own, a reaper, a small
//     /bin/sh beside it in a group of its own, holds the read end of a pipe
//     whose write end only coordctl has. When coordctl ends the command it
//     writes a line and the reaper exits; when coordctl dies the reaper
//     reads end-of-file instead and kills the command's whole group with
//     SIGKILL (this works on every Unix, Linux or not).
//
// What remains: a process that left the group (setsid, setpgid: daemons),
// a command in the terminal's foreground group on a system without
// Pdeathsig, and whatever a SIGKILL of the reaper itself leaves. The fencing
// token is the protection that holds in every case.

// reaperScript kills the process group $1 unless a line arrives on stdin
// first (end-of-file: coordctl is gone).
const reaperScript = `read -r line || kill -s KILL -- "-$1"`

// reaper watches coordctl on behalf of one command's process group.
type reaper struct {
	w   *os.File
	cmd *exec.Cmd
}

// startReaper starts the reaper of the process group pgid.
func startReaper(pgid int) (*reaper, error) {
	r, w, err := os.Pipe() // close-on-exec: no other child inherits w
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", reaperScript, "coordctl-reaper", strconv.Itoa(pgid))
	cmd.Stdin = r
	// A group of its own: the signals sent to coordctl's group (a
	// terminal's Ctrl-C, kill -- -PGID) or to the command's leave it alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &reaper{w: w, cmd: cmd}, nil
}

// dismiss tells the reaper that the command ended (its group is not
// killed) and waits for it to exit.
func (r *reaper) dismiss() {
	if r == nil {
		return
	}
	_, _ = io.WriteString(r.w, "\n")
	r.w.Close()
	_ = r.cmd.Wait()
}

// startTied starts c tied to coordctl as described above (with a reaper
// when group says c gets a process group of its own) and returns a channel
// that receives c.Wait's result. warn reports a reaper that could not be
// started (the command then runs without one).
func startTied(c *exec.Cmd, group bool, warn func(error)) (<-chan error, error) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	setParentDeathSignal(c.SysProcAttr)
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread that forked c must not end (or serve
		// another goroutine that might end it) while c runs. When this
		// goroutine returns, after c has ended, the thread ends with it.
		runtime.LockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		var r *reaper
		if group {
			var err error
			if r, err = startReaper(c.Process.Pid); err != nil {
				warn(err)
			}
		}
		started <- nil
		err := c.Wait()
		r.dismiss()
		done <- err
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}
