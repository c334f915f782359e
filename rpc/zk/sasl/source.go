package sasl

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Options configure Load.
type Options struct {
	// Section is the JAAS section of the users (default DefaultSection).
	Section string
	// Logger receives a line for every reload, and for every changed file
	// that could not be used (default: discard). It never sees a password.
	Logger *slog.Logger
	// CheckInterval is the least time between two looks at the file
	// (default 1s): it is read again by the first exchange after it.
	CheckInterval time.Duration
	// Now is the clock of CheckInterval (default time.Now).
	Now func() time.Time
}

// Source is the users of a JAAS file. It reads the file again, at most
// once per CheckInterval, when an exchange asks for the users, and uses
// the new users when the file's contents changed and are good; until then
// it keeps the users it has, so an edit that leaves the file broken for a
// moment never locks everyone out. An exchange keeps the users it started
// with.
type Source struct {
	path string
	opts Options

	mu       sync.Mutex
	checked  time.Time
	loaded   []byte // the file's contents that users came from
	rejected []byte // the last contents that could not be used
	users    Users
}

// Load reads the users of the JAAS file at path. Its error says what is
// wrong with the file.
func Load(path string, o Options) (*Source, error) {
	if o.Section == "" {
		o.Section = DefaultSection
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.CheckInterval <= 0 {
		o.CheckInterval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Source{path: path, opts: o}
	data, err := s.read()
	if err != nil {
		return nil, err
	}
	users, err := UsersOf(data, o.Section)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.loaded, s.users, s.checked = data, users, o.Now()
	return s, nil
}

// Path returns the file the source reads.
func (s *Source) Path() string { return s.path }

// Users returns the users to check a password against now, reading the
// file again first if CheckInterval has passed.
func (s *Source) Users() Users {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.opts.Now(); now.Sub(s.checked) >= s.opts.CheckInterval {
		s.checked = now
		s.reload()
	}
	return s.users
}

// reload reads the file and uses it if it changed and is good.
func (s *Source) reload() {
	data, err := s.read()
	if err != nil {
		s.opts.Logger.Warn("sasl: cannot read the users file; keeping the loaded users", "file", s.path, "err", err)
		return
	}
	if bytes.Equal(data, s.loaded) || (s.rejected != nil && bytes.Equal(data, s.rejected)) {
		return
	}
	users, err := UsersOf(data, s.opts.Section)
	if err != nil {
		s.rejected = data
		s.opts.Logger.Warn("sasl: the changed users file cannot be used; keeping the loaded users", "file", s.path, "err", err)
		return
	}
	s.loaded, s.rejected, s.users = data, nil, users
	s.opts.Logger.Info("sasl: reloaded the users file", "file", s.path, "users", len(users))
}

// read reads the file, at most maxJAASSize bytes and one more (so that
// UsersOf tells a file too large).
func (s *Source) read() ([]byte, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("sasl: users file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJAASSize+1))
	if err != nil {
		return nil, fmt.Errorf("sasl: users file: %w", err)
	}
	return data, nil
}
