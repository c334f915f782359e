package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSnapshotVerbs: snapshot save writes a backup that snapshot status
// reads back; an existing file is kept unless -force; a truncated, corrupt
// or foreign file is refused by status with its code.
func TestSnapshotVerbs(t *testing.T) {
	fresh(t, "/snap")
	ok(t, "create", "/snap", "")
	for _, p := range []string{"/snap/a", "/snap/b", "/snap/c"} {
		ok(t, "create", p, "data of "+p)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.coordd")
	var saved backupJSON
	if err := json.Unmarshal([]byte(ok(t, "snapshot", "save", file, "-o", "json")), &saved); err != nil {
		t.Fatal(err)
	}
	if saved.Index <= 0 || saved.Znodes < 5 || !saved.ChecksumOK || len(saved.SHA256) != 64 || saved.Server != "1" || len(saved.Members) != 1 {
		t.Fatalf("snapshot save: %+v", saved)
	}
	if _, err := os.Stat(file + ".part"); !os.IsNotExist(err) {
		t.Fatalf("the .part file is left behind: %v", err)
	}
	var st backupJSON
	if err := json.Unmarshal([]byte(ok(t, "snapshot", "status", "-o", "json", file)), &st); err != nil {
		t.Fatal(err)
	}
	if st.SHA256 != saved.SHA256 || st.Index != saved.Index || st.Znodes != saved.Znodes || st.Size != saved.Size {
		t.Fatalf("status %+v, saved %+v", st, saved)
	}
	text := ok(t, "snapshot", "status", file)
	for _, want := range []string{"index:", "term ", "znodes:", "size:", "(checksum OK)", "members:    1="} {
		if !strings.Contains(text, want) {
			t.Errorf("snapshot status lacks %q:\n%s", want, text)
		}
	}
	if out := ok(t, "snapshot", "save", "-force", file); !strings.HasPrefix(out, "saved "+file+": index 0x") {
		t.Errorf("snapshot save -force printed %q", out)
	}
	r := ctl(t, "-o", "json", "snapshot", "save", file)
	wantRefusal(t, r, "Exists", "add -force")

	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), good...)
	corrupt[len(corrupt)-100] ^= 0xff
	for _, tc := range []struct {
		name string
		data []byte
		code string
		msg  string
	}{
		{"truncated", good[:len(good)-10], "Truncated", "cut short"},
		{"corrupt", corrupt, "Corrupt", "SHA-256"},
		{"foreign", []byte("PK\x03\x04 a zip file, not a backup"), "NotBackup", "not a coordd backup"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		wantRefusal(t, ctl(t, "-o", "json", "snapshot", "status", p), tc.code, tc.msg)
	}
	if r := ctl(t, "snapshot", "status", filepath.Join(dir, "truncated")); r.code != 1 || !strings.Contains(r.stderr, "coordctl: snapshot status: ") || !strings.Contains(r.stderr, "truncated") {
		t.Errorf("text refusal: exit %d, %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"snapshot"}, {"snapshot", "save"}, {"snapshot", "status", "a", "b"}, {"snapshot", "load", "x"}, {"snapshot", "status", "-force", file}} {
		if r := ctl(t, args...); r.code != 2 {
			t.Errorf("coordctl %q: exit %d, want 2 (%q)", args, r.code, r.stderr)
		}
	}
}
