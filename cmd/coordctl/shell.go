package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/chzyer/readline"

	"github.com/coordd/coordd/client"
)

// shell runs the interactive shell on one session and returns the exit
// status: in pipe mode 1 if any command failed, else 0.
func (c *cli) shell() int {
	c.inShell = true
	_, err := c.interruptible(func(ctx context.Context) error {
		_, err := c.session(ctx)
		return err
	})
	if err != nil {
		return c.report(err)
	}
	defer func() {
		if err := c.sess.close(c.timeout); err != nil {
			fmt.Fprintf(c.stderr, "coordctl: %s\n", errText(err))
		}
	}()
	// Runs before the session closes: the watches left running stop first.
	defer c.startBackground()()
	cl := c.sess.cl
	fmt.Fprintf(c.stderr, "coordctl: connected to %s, session 0x%x (timeout %s)\n", cl.Server(), cl.SessionID(), cl.SessionTimeout())

	src, interactive := c.lineSource()
	defer src.close()
	c.lines, c.interactive = src, interactive
	type lineResult struct {
		line string
		err  error
	}
	want := make(chan struct{})
	lines := make(chan lineResult, 1)
	defer close(want)
	go func() {
		for range want {
			line, err := src.readLine()
			lines <- lineResult{line, err}
		}
	}()

	failed := false
	for {
		want <- struct{}{}
		var r lineResult
		select {
		case r = <-lines:
		case <-c.sig:
			fmt.Fprintln(c.stderr)
			return exitStatus(failed, interactive)
		}
		if r.err != nil {
			if !errors.Is(r.err, io.EOF) {
				fmt.Fprintf(c.stderr, "coordctl: reading commands: %v\n", r.err)
				failed = true
			}
			return exitStatus(failed, interactive)
		}
		line := strings.TrimSpace(r.line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c.errJSON = c.format == "json"
		argv, err := splitLine(line)
		if err != nil {
			c.report(usagef("", "%v", err))
			failed = true
			continue
		}
		if argv[0] == "quit" || argv[0] == "exit" {
			return exitStatus(failed, interactive)
		}
		terminated, err := c.interruptible(func(ctx context.Context) error { return c.execute(ctx, argv) })
		if c.report(err) != 0 {
			failed = true
		}
		if terminated {
			return exitStatus(failed, interactive)
		}
	}
}

func exitStatus(failed, interactive bool) int {
	if failed && !interactive {
		return 1
	}
	return 0
}

// lineReader is where the shell reads its commands.
type lineReader interface {
	readLine() (string, error)
	// ask shows prompt and reads the answer.
	ask(prompt string) (string, error)
	close()
}

// confirm asks a yes/no question in the interactive shell; only "y" or
// "yes" is yes. An interrupt is no.
func (c *cli) confirm(question string) (bool, error) {
	answer, err := c.lines.ask(question)
	if errors.Is(err, readline.ErrInterrupt) {
		return false, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes", nil
}

// lineSource returns a readline editor when stdin is a terminal, else a
// plain line reader; interactive says which.
func (c *cli) lineSource() (lineReader, bool) {
	if c.terminal {
		return &plainLines{r: bufio.NewReader(c.stdin)}, true
	}
	if f, ok := c.stdin.(*os.File); ok && readline.IsTerminal(int(f.Fd())) {
		cfg := &readline.Config{
			Prompt:            "coordctl> ",
			HistorySearchFold: true,
			AutoComplete:      c.shellCompleter(),
			InterruptPrompt:   "^C",
			EOFPrompt:         "quit",
		}
		if home, err := os.UserHomeDir(); err == nil {
			// readline ignores a history file it cannot open or write.
			cfg.HistoryFile = filepath.Join(home, ".coordctl_history")
		}
		if rl, err := readline.NewEx(cfg); err == nil {
			// Route output through readline so that state changes printed
			// while a prompt is shown do not garble it.
			c.stdout.(*syncWriter).set(rl.Stdout())
			c.stderr.(*syncWriter).set(rl.Stderr())
			return &editor{rl: rl, c: c}, true
		}
	}
	return &plainLines{r: bufio.NewReader(c.stdin)}, false
}

func (s *syncWriter) set(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

// editor reads lines on a terminal with line editing, history (kept in
// ~/.coordctl_history) and completion (completer).
type editor struct {
	rl *readline.Instance
	c  *cli
}

func (e *editor) readLine() (string, error) {
	for {
		e.rl.SetPrompt(e.c.prompt())
		line, err := e.rl.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			continue // Ctrl-C at the prompt drops the line
		}
		return line, err
	}
}

// ask reads an answer, which is no command: it stays out of the history.
func (e *editor) ask(prompt string) (string, error) {
	e.rl.HistoryDisable()
	defer e.rl.HistoryEnable()
	e.rl.SetPrompt(prompt)
	return e.rl.Readline()
}

func (e *editor) close() { e.rl.Close() }

// prompt shows the server and, unless connected, the session's state.
func (c *cli) prompt() string {
	cl := c.sess.cl
	switch st := cl.State(); st {
	case client.StateConnected, client.StateReconnected:
		return fmt.Sprintf("coordctl %s> ", cl.Server())
	default:
		return fmt.Sprintf("coordctl %s (%s)> ", cl.Server(), st)
	}
}

// plainLines reads lines from a pipe or file, the last one possibly without
// a newline.
type plainLines struct {
	r *bufio.Reader
}

func (p *plainLines) readLine() (string, error) {
	line, err := p.r.ReadString('\n')
	if err == io.EOF && line != "" {
		return line, nil
	}
	return line, err
}

func (p *plainLines) ask(prompt string) (string, error) { return p.readLine() }

func (p *plainLines) close() {}

// splitLine splits a shell line into arguments at unquoted white space.
// '...' quotes literally; "..." quotes with \" and \\ as escapes; outside
// quotes a backslash escapes the next character.
func splitLine(s string) ([]string, error) {
	var (
		args  []string
		cur   strings.Builder
		inArg bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case ch == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inArg = true
		case ch == '"':
			inArg = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New(`unterminated " quote`)
			}
		case ch == '\\':
			inArg = true
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
			} else {
				cur.WriteByte(ch)
			}
		default:
			inArg = true
			cur.WriteByte(ch)
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}
