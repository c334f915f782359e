// The tests of the scripts that make runs. They run from the repository's
// root, as make does.
package scripts_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRaftForkCheckSaysWhatIsMissing: offline, with the upstream module
// neither in the module cache nor reachable, the fork check says which
// module it needs, why it could not get it, and how to get it (it used to
// fail with no message at all).
func TestRaftForkCheckSaysWhatIsMissing(t *testing.T) {
	cmd := exec.Command("bash", "scripts/check-raft-fork.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOMODCACHE="+t.TempDir(), "GOPROXY=off", "GOFLAGS=-modcacherw")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the check passed without its upstream module:\n%s", out)
	}
	for _, want := range []string{
		"raftfork: cannot get github.com/hashicorp/raft v",
		"module lookup disabled by GOPROXY=off",
		"go mod download github.com/hashicorp/raft@v",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCompatRefusesBadSettings: make compat's script refuses an unknown
// target or suite (and takes reconnect for its five suites), and UPDATE=1 (which rewrites coordd's goldens) with
// another target, before it installs, builds or starts anything.
func TestCompatRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"TARGET=etcd"}, "TARGET is coordd or zookeeper, not etcd"},
		{[]string{"SUITES=zkcli nope"}, "no suite nope"},
		// reconnect stands for the five *-reconnect suites, and only those are suites.
		{[]string{"SUITES=reconnect node-reconnect nope"}, "no suite nope"},
		{[]string{"SUITES=kazoo-reconnect go-reconnect"}, "no suite go-reconnect"},
		{[]string{"TARGET=zookeeper", "UPDATE=1"}, "UPDATE=1 rewrites coordd's goldens: not with TARGET=zookeeper"},
		{[]string{"UPDATE=1", "WATCH_FIXES=/nowhere"}, "not with WATCH_FIXES"},
	} {
		cmd := exec.Command("bash", "scripts/compat.sh")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "TARGET=", "SUITES=", "UPDATE=", "WATCH_FIXES=")
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: want exit status 2, got %v:\n%s", c.env, err, out)
		}
		if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "usage: make compat") {
			t.Errorf("%v: output lacks %q and the usage:\n%s", c.env, c.want, out)
		}
	}
}

// TestCompatRefusesAddressesInUse: make compat's script stops, before it
// builds or starts anything, when something already listens on its
// cluster's addresses; it used to start its servers, which could not bind,
// and run its suites against whatever answered there (another run's
// cluster on the same COMPAT_NET).
func TestCompatRefusesAddressesInUse(t *testing.T) {
	const net3 = "127.0.237"
	if ln, err := net.Listen("tcp", net3+".12:2888"); err == nil {
		defer ln.Close()
	} // else it is in use already, which is the case under test
	cmd := exec.Command("bash", "scripts/compat.sh")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "TARGET=", "SUITES=", "UPDATE=", "WATCH_FIXES=", "COMPAT_NET="+net3, "GO=false")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("want exit status 2, got %v:\n%s", err, out)
	}
	if want := "compat: " + net3 + ".12:2888 is in use"; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
