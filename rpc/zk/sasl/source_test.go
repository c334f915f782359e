package sasl

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSourceReload: the users file is read again once CheckInterval has
// passed, a good change is used, a bad one (or a missing file) keeps the
// users loaded and is logged once, and no line holds a password.
func TestSourceReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jaas.conf")
	writeFile(t, path, `Server { M required user_bob="one"; };`)
	now := time.Unix(1000, 0)
	var logs bytes.Buffer
	src, err := Load(path, Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now:    func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	users := func() Users { return src.Users() }
	if got := users(); !reflect.DeepEqual(got, Users{"bob": "one"}) {
		t.Fatalf("users %v", got)
	}

	writeFile(t, path, `Server { M required user_bob="two" user_eve="three"; };`)
	if got := users(); got["bob"] != "one" {
		t.Fatalf("read again before the interval: %v", got)
	}
	now = now.Add(time.Second)
	if got := users(); !reflect.DeepEqual(got, Users{"bob": "two", "eve": "three"}) {
		t.Fatalf("after a change: users %v", got)
	}

	steps := []struct {
		name, file string // "" removes the file
		log        string
	}{
		{"a broken file", `Server { M required user_bob="four" };`, "cannot be used"},
		{"the same broken file", `Server { M required user_bob="four" };`, ""},
		{"no section", `Client { M required username="x"; };`, "cannot be used"},
		{"gone", "", "cannot read"},
	}
	for _, s := range steps {
		logs.Reset()
		if s.file == "" {
			os.Remove(path)
		} else {
			writeFile(t, path, s.file)
		}
		now = now.Add(time.Second)
		if got := users(); !reflect.DeepEqual(got, Users{"bob": "two", "eve": "three"}) {
			t.Fatalf("%s: users %v, want the loaded ones", s.name, got)
		}
		if s.log == "" && logs.Len() > 0 || !strings.Contains(logs.String(), s.log) {
			t.Fatalf("%s: logged %q, want %q", s.name, logs.String(), s.log)
		}
		for _, pw := range []string{"two", "three", "four"} {
			if strings.Contains(logs.String(), `"`+pw+`"`) || strings.Contains(logs.String(), "="+pw) {
				t.Fatalf("%s: the log %q holds a password", s.name, logs.String())
			}
		}
	}
	logs.Reset()
	writeFile(t, path, `Server { M required user_bob="five"; };`)
	now = now.Add(time.Second)
	if got := users(); !reflect.DeepEqual(got, Users{"bob": "five"}) {
		t.Fatalf("after a good file again: users %v", got)
	}
	if !strings.Contains(logs.String(), "reloaded") || strings.Contains(logs.String(), "five") {
		t.Fatalf("logged %q", logs.String())
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.conf")
	writeFile(t, bad, `Server { M required user_a="b" };`)
	client := filepath.Join(dir, "client.conf")
	writeFile(t, client, `Client { M required username="a" password="b"; };`)
	big := filepath.Join(dir, "big.conf")
	writeFile(t, big, "Server { M required user_a=\"b\"; };"+strings.Repeat(" ", maxJAASSize))
	tests := []struct {
		path    string
		section string
		err     error
	}{
		{filepath.Join(dir, "missing.conf"), "", os.ErrNotExist},
		{bad, "", ErrJAAS},
		{client, "", ErrNoUsers},
		{client, "Other", ErrNoUsers},
		{client, "Client", ErrNoUsers},
		{big, "", ErrJAAS},
	}
	for _, tt := range tests {
		if _, err := Load(tt.path, Options{Section: tt.section}); !errors.Is(err, tt.err) || !strings.Contains(err.Error(), filepath.Base(tt.path)) {
			t.Errorf("Load(%s, %q): err = %v, want %v naming the file", filepath.Base(tt.path), tt.section, err, tt.err)
		}
	}
}
