package console

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/rpc/apipb"
)

// Config configures a Console.
type Config struct {
	// Server is the client address ("host:port") of the server the console
	// belongs to; the console's session and calls go there only.
	Server string
	// TLS is the configuration to dial Server with when its client port
	// speaks TLS (nil: plaintext): RootCAs verifies the server, and
	// Certificates is the console's client certificate when the server
	// requires one.
	TLS *tls.Config
	// Writes lets the console create, set and delete znodes. Without it the
	// console's handlers refuse every write.
	Writes bool
	// Auth is the identity the console's session acts with, as
	// "scheme:credentials" (ZooKeeper's addAuth: digest:user:password).
	// Empty: none, only what the connection itself is (its certificate).
	Auth string
	// SessionTimeout is the console's session timeout (default 10s).
	SessionTimeout time.Duration
	// Interval is how often the cluster view is refreshed (default 1s):
	// the console asks its server for Status that often from New to
	// Close, whether or not a page watches, to keep the chart's history.
	Interval time.Duration
	// History is how far back the traffic chart goes (default 5 minutes),
	// from the console's start on.
	History time.Duration
	// Logger receives the console's logs (default: discard).
	Logger *slog.Logger
}

// Console is the web console of one server: an http.Handler. It holds one
// session on its server, opened at the first request that needs it and
// opened again if it expires.
type Console struct {
	cfg     Config
	log     *slog.Logger
	token   string // the write token of this console's pages
	cc      *grpc.ClientConn
	api     apipb.CoordClient
	handler http.Handler
	cluster *hub

	ctx    context.Context // ends with Close
	cancel context.CancelFunc

	mu     sync.Mutex
	cl     *client.Client
	closed bool
}

// The limits of one request.
const (
	callTimeout    = 10 * time.Second
	connectTimeout = 5 * time.Second
	// maxBody bounds a POST body: a znode's data, base64-encoded, in JSON.
	maxBody = 16 << 20
)

//go:embed static
var static embed.FS

// errClosed is returned once the console is closed.
var errClosed = errors.New("console: closed")

// New returns a console of the server whose client address is cfg.Server.
// It starts polling the cluster view (Config.Interval) at once; its
// session is opened at the first request that needs one.
func New(cfg Config) (*Console, error) {
	if cfg.Server == "" {
		return nil, errors.New("console: no server address")
	}
	if cfg.Auth != "" {
		if err := CheckAuth(cfg.Auth); err != nil {
			return nil, err
		}
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.History <= 0 {
		cfg.History = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		t := cfg.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		creds = credentials.NewTLS(t)
	}
	cc, err := grpc.NewClient(cfg.Server, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("console: %s: %w", cfg.Server, err)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:]) // crypto/rand.Read never fails
	c := &Console{
		cfg: cfg, log: cfg.Logger.With("component", "console"), token: hex.EncodeToString(tok[:]),
		cc: cc, api: apipb.NewCoordClient(cc),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.cluster = newHub(c)
	c.handler = c.routes()
	go c.cluster.run()
	return c, nil
}

// ServeHTTP serves the console: the page at "/", its files under
// "/static/", and its JSON and event-stream API under "/api/".
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Close ends the console's event streams and closes its session.
func (c *Console) Close() error {
	c.mu.Lock()
	cl := c.cl
	c.cl, c.closed = nil, true
	c.mu.Unlock()
	c.cancel()
	if cl != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = cl.Close(ctx)
	}
	return c.cc.Close()
}

// session returns the console's session on its server, opening one when
// it has none or its last one ended.
func (c *Console) session(ctx context.Context) (*client.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.cl != nil {
		switch c.cl.State() {
		case client.StateExpired, client.StateClosed:
			old := c.cl
			go func() { _ = old.Close(context.Background()) }()
			c.cl = nil
		default:
			return c.cl, nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	opts := []client.Option{client.WithSessionTimeout(c.cfg.SessionTimeout), client.WithLogger(c.log)}
	if c.cfg.TLS != nil {
		opts = append(opts, client.WithTLS(c.cfg.TLS))
	}
	cl, err := client.Connect(cctx, []string{c.cfg.Server}, opts...)
	if err != nil {
		return nil, fmt.Errorf("console: no session on %s: %w", c.cfg.Server, err)
	}
	if err := c.authenticate(cctx, cl); err != nil {
		_ = cl.Close(cctx)
		return nil, err
	}
	c.log.Info("session opened", "session", fmt.Sprintf("0x%x", cl.SessionID()), "server", c.cfg.Server)
	c.cl = cl
	return cl, nil
}

// current returns the open session, if any, without opening one.
func (c *Console) current() *client.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl
}

// CheckAuth checks the form of an identity for Config.Auth:
// "scheme:credentials"; its error never holds the credentials.
func CheckAuth(auth string) error {
	scheme, cred, ok := strings.Cut(auth, ":")
	if !ok || scheme == "" || cred == "" {
		return fmt.Errorf("console: identity %q: want scheme:credentials, such as digest:user:password", redact(auth))
	}
	return nil
}

// authenticate gives a new session the identity of Config.Auth (addAuth),
// so that the console acts with that identity's permissions and no more.
func (c *Console) authenticate(ctx context.Context, cl *client.Client) error {
	if c.cfg.Auth == "" {
		return nil
	}
	scheme, cred, _ := strings.Cut(c.cfg.Auth, ":")
	if err := cl.AddAuth(ctx, scheme, []byte(cred)); err != nil {
		return fmt.Errorf("console: authenticating as %s: %w", redact(c.cfg.Auth), err)
	}
	return nil
}

// identity is Config.Auth without its secret: "scheme:user".
func (c *Console) identity() string {
	if c.cfg.Auth == "" {
		return ""
	}
	return redact(c.cfg.Auth)
}

// redact keeps the scheme and, for digest, the user of an identity.
func redact(auth string) string {
	scheme, cred, _ := strings.Cut(auth, ":")
	user, _, _ := strings.Cut(cred, ":")
	if scheme == "digest" {
		return scheme + ":" + user
	}
	return scheme
}

// routes builds the console's handler.
func (c *Console) routes() http.Handler {
	mux := http.NewServeMux()
	files, _ := fs.Sub(static, "static")
	page, _ := fs.ReadFile(files, "index.html")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(page)
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", noDirs(http.FileServerFS(files))))

	mux.HandleFunc("GET /api/info", c.handleInfo)
	mux.HandleFunc("GET /api/cluster", c.handleCluster)
	mux.HandleFunc("GET /api/node", c.handleNode)
	mux.HandleFunc("GET /api/children", c.handleChildren)
	mux.HandleFunc("GET /api/sessions", c.handleSessions)
	mux.HandleFunc("GET /api/locks", c.handleLocks)
	mux.HandleFunc("GET /api/recipes", c.handleRecipes)
	mux.HandleFunc("GET /api/watch", c.handleWatch)
	mux.Handle("/api/create", c.write(c.handleCreate))
	mux.Handle("/api/set", c.write(c.handleSet))
	mux.Handle("/api/delete", c.write(c.handleDelete))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", "no such console call: "+r.URL.Path)
	})
	return secure(mux)
}

// noDirs refuses directory listings of the embedded files.
func noDirs(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy allows the console's own scripts, styles and calls,
// and nothing else: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// secure sets the security headers of every answer.
func secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

// tokenHeader carries the console's write token; a page of the console
// reads it from /api/info (another origin cannot: it gets no CORS grant).
const tokenHeader = "X-Console-Token"

// write guards a write: refused unless writes are enabled, the request
// comes from the console's own origin (Sec-Fetch-Site or Origin), carries
// the token, and is JSON.
func (c *Console) write(h http.HandlerFunc) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "CrossOrigin", "refused: a write must come from the console's own page")
	}))
	guarded := cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.cfg.Writes {
			writeError(w, http.StatusForbidden, "ReadOnly", "the console is read-only: start coordd with --console-writes to create, set and delete")
			return
		}
		if r.Header.Get(tokenHeader) != c.token {
			writeError(w, http.StatusForbidden, "BadToken", "refused: a write must come from the console's own page (reload it)")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "BadRequest", "a write is a JSON body (Content-Type: application/json)")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		h(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "BadRequest", "a write is a POST")
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// infoJSON is what the page learns first.
type infoJSON struct {
	Server         string `json:"server"`
	Writes         bool   `json:"writes"`
	Token          string `json:"token,omitempty"`
	Identity       string `json:"identity,omitempty"`
	HistorySeconds int    `json:"historySeconds"`
	// HistoryFrom is the time of the chart's oldest sample (Unix ms; none
	// before the console's second poll): the console's start, or
	// HistorySeconds ago.
	HistoryFrom int64  `json:"historyFrom,omitempty"`
	Session     string `json:"session,omitempty"`
}

func (c *Console) handleInfo(w http.ResponseWriter, r *http.Request) {
	in := infoJSON{Server: c.cfg.Server, Writes: c.cfg.Writes, Identity: c.identity(), HistorySeconds: int(c.cfg.History / time.Second),
		HistoryFrom: c.cluster.oldest()}
	if c.cfg.Writes {
		in.Token = c.token
	}
	if cl := c.current(); cl != nil {
		in.Session = hexID(cl.SessionID())
	}
	writeJSON(w, http.StatusOK, in)
}
