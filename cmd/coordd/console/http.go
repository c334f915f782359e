package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
)

// errorJSON is every failed call's answer: code is ZooKeeper's name of the
// error where there is one (NoNode, BadVersion...), else the console's.
type errorJSON struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"Internal","error":"console: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorJSON{Code: code, Error: msg})
}

// errorCodes maps the client's errors to an HTTP status and a code, most
// specific first.
var errorCodes = []struct {
	err    error
	status int
	code   string
}{
	{client.ErrNoNode, http.StatusNotFound, "NoNode"},
	{client.ErrNodeExists, http.StatusConflict, "NodeExists"},
	{client.ErrBadVersion, http.StatusConflict, "BadVersion"},
	{client.ErrNotEmpty, http.StatusConflict, "NotEmpty"},
	{client.ErrNoChildrenForEphemerals, http.StatusConflict, "NoChildrenForEphemerals"},
	{client.ErrBadArguments, http.StatusBadRequest, "BadArguments"},
	{client.ErrInvalidACL, http.StatusBadRequest, "InvalidACL"},
	{client.ErrNoAuth, http.StatusForbidden, "NoAuth"},
	{client.ErrAuthFailed, http.StatusForbidden, "AuthFailed"},
	{client.ErrQuotaExceeded, http.StatusConflict, "QuotaExceeded"},
	{client.ErrOutcomeUnknown, http.StatusGatewayTimeout, "OutcomeUnknown"},
	{client.ErrSessionExpired, http.StatusServiceUnavailable, "SessionExpired"},
	{client.ErrConnectionLoss, http.StatusServiceUnavailable, "ConnectionLoss"},
	{client.ErrUnavailable, http.StatusServiceUnavailable, "Unavailable"},
	{client.ErrOperationTimeout, http.StatusGatewayTimeout, "OperationTimeout"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "Timeout"},
	{errClosed, http.StatusServiceUnavailable, "Closed"},
}

// fail answers a call that failed with err.
func fail(w http.ResponseWriter, err error) {
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			writeError(w, e.status, e.code, err.Error())
			return
		}
	}
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", s.Message())
		return
	}
	writeError(w, http.StatusBadGateway, "Error", err.Error())
}

// call returns the context of one call the console makes for a request.
func call(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}

func hexID(v int64) string { return fmt.Sprintf("0x%x", v) }

// eventStream writes Server-Sent Events; it is safe for concurrent use.
type eventStream struct {
	mu     sync.Mutex
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc // ends the stream's context
}

// keepAlive is how often an idle event stream sends a comment, so that
// proxies and the browser see it alive.
const keepAlive = 15 * time.Second

// newEventStream starts an event stream on w, for as long as ctx lasts
// (it pings meanwhile). The context it returns ends with ctx, with the
// console, or when a write to the stream fails (the page went away).
func (c *Console) newEventStream(ctx context.Context, w http.ResponseWriter) (*eventStream, context.Context, context.CancelFunc) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &eventStream{w: w, rc: http.NewResponseController(w)}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	s.cancel = cancel
	if s.rc.Flush() != nil {
		cancel()
	}
	go func() {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = s.ping()
			}
		}
	}()
	return s, ctx, func() { stop(); cancel() }
}

// send writes one event of type name whose data is v in JSON.
func (s *eventStream) send(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.sendRaw(name, b)
}

// sendRaw writes one event whose data is b, JSON on one line.
func (s *eventStream) sendRaw(name string, b []byte) error {
	return s.write(fmt.Sprintf("event: %s\ndata: %s\n\n", name, b))
}

// ping writes a comment.
func (s *eventStream) ping() error { return s.write(": ping\n\n") }

// write writes and flushes text; a failure ends the stream's context.
func (s *eventStream) write(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := io.WriteString(s.w, text)
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil {
		s.cancel()
	}
	return err
}

// sendError writes an "error" event: a failure the page shows while the
// stream goes on.
func (s *eventStream) sendError(err error) error {
	code := "Error"
	for _, e := range errorCodes {
		if errors.Is(err, e.err) {
			code = e.code
			break
		}
	}
	return s.send("failure", errorJSON{Code: code, Error: err.Error()})
}

// pause waits d, or less if ctx ends first (then it reports false).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
