// The tests of the scripts that make runs. They run from the repository's
// root, as make does.
package scripts_test

import (
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
