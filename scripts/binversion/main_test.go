package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// build compiles a one-file command that has a main.version, for goos/goarch,
// with the given -ldflags, and returns the binary's path.
func build(t *testing.T, goos, goarch, ldflags string) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nvar version = \"dev\"\n\nfunc main() { println(version) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/v\n\ngo 1.26\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "v")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s/%s: %v\n%s", goos, goarch, err, out)
	}
	return bin
}

// TestVersion: the stamped version, or the default when none was stamped,
// is read from ELF and Mach-O binaries alike, as make release builds them.
func TestVersion(t *testing.T) {
	for _, tc := range []struct{ goos, goarch, ldflags, want string }{
		{"linux", "amd64", "-X main.version=v1.2.3-4-gabcdef0-dirty", "v1.2.3-4-gabcdef0-dirty"},
		{"linux", "amd64", "", "dev"},
		{"linux", "arm64", "-X main.version=v0.9.0", "v0.9.0"},
		{"darwin", "arm64", "-X main.version=v0.9.0", "v0.9.0"},
	} {
		bin := build(t, tc.goos, tc.goarch, tc.ldflags)
		got, err := version(bin)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s %q: version %q, %v; want %q", tc.goos, tc.goarch, tc.ldflags, got, err, tc.want)
		}
	}
}

// TestVersionErrors: a stripped binary and a file that is no executable
// give an error, not a made-up version.
func TestVersionErrors(t *testing.T) {
	if _, err := version(build(t, "linux", "amd64", "-s -w -X main.version=v1")); !errors.Is(err, errNoSymbol) {
		t.Errorf("stripped binary: %v; want %v", err, errNoSymbol)
	}
	text := filepath.Join(t.TempDir(), "README")
	if err := os.WriteFile(text, []byte("not a binary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := version(text); err == nil {
		t.Error("a text file: no error")
	}
}
