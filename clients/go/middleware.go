package aguistate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"time"
)

// MiddlewareOptions is the repair policy of `agui-state fix` (protocol/README.md
// §13), with the names of the Python middleware's keywords.
type MiddlewareOptions struct {
	// Own names, as escaped JSON Pointers, the members the server owns, e.g.
	// {"/toolState"}: a STATE_SNAPSHOT then changes only those, and the
	// client keeps everything else (fix --own).
	Own []string
	// Snapshots is "" or "pass" (a snapshot replaces the client's state, as
	// AG-UI says), or "delta" (the same, sent as a minimal STATE_DELTA).
	Snapshots string
	// JoinKeys reads an unescaped /toolState/raster-ops/dataset as the key
	// "raster-ops/dataset" when that is the only way the op applies.
	JoinKeys bool
	// Paths are the request paths to repair; none means every path. A path
	// that ends in "/" names its subtree, as in http.ServeMux.
	Paths []string
	// Logger gets one line per stream the middleware could not repair to its
	// end (the stream went on unrepaired); nil means log.Default().
	Logger *log.Logger
}

// maxBaselineBytes bounds the request body kept for its RunAgentInput.state;
// past it the body still reaches the handler whole, and the baseline is {}
// (the proxy's limit, src/proxy/baseline.ts).
const maxBaselineBytes = 64 << 20

// flushAt is how much written text waits for a Flush: a handler that never
// flushes still streams, in parts of about this size, as net/http's own
// buffer would send it.
const flushAt = 16 << 10

// closeTimeout bounds closeStream, which runs when the handler has returned
// or its client has gone, so no request context bounds it.
const closeTimeout = 10 * time.Second

// callTimeout bounds each openStream and fixStream: a sidecar that stops
// answering without exiting must not hold the user's stream (fail open), as
// the Python and Clojure middlewares bound theirs.
const callTimeout = 30 * time.Second

// withCallTimeout is the request's context, bounded by callTimeout.
func withCallTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// Middleware repairs the AG-UI event streams a handler writes (a response
// whose Content-Type is text/event-stream, or NDJSON: application/x-ndjson,
// application/jsonl) through the sidecar's stream methods, with the
// request's RunAgentInput.state as the client's baseline. Every other
// response, and any response with a Content-Encoding, passes untouched: put
// it inside a compression middleware, where the body is still plain text.
//
// It fails open: if the sidecar dies or errors in the middle of a stream, the
// rest of that stream goes through as the handler wrote it, and Logger says
// so. The next request that needs it restarts the sidecar on c (Client.Restart:
// threads the server kept on c must then be reopened, as after any crash). A
// nil c starts a sidecar with Options{} at the first stream.
func Middleware(c *Client, opts MiddlewareOptions) func(http.Handler) http.Handler {
	m := &middleware{c: c, opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = log.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !m.wants(r.URL.Path) {
				next.ServeHTTP(w, r)
				return
			}
			sw := &streamWriter{w: w, m: m, req: r}
			sw.state, sw.note = baseline(r)
			defer sw.finish()
			next.ServeHTTP(sw, r)
		})
	}
}

type middleware struct {
	opts MiddlewareOptions
	log  *log.Logger

	mu sync.Mutex // guards c, and makes one restart of a dead sidecar out of many callers' attempts
	c  *Client
}

func (m *middleware) wants(path string) bool {
	if len(m.opts.Paths) == 0 {
		return true
	}
	for _, p := range m.opts.Paths {
		if path == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(path, p)) {
			return true
		}
	}
	return false
}

// client returns the sidecar's client and the pid of the process it holds,
// starting it first for Middleware(nil, ...).
func (m *middleware) client(ctx context.Context) (*Client, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		c, err := Start(ctx, Options{})
		if err != nil {
			return nil, 0, err
		}
		m.c = c
	}
	return m.c, m.c.Process().Pid, nil
}

// restart starts a fresh sidecar, unless the process that was seen dead
// (pid) has already been replaced by another request's restart.
func (m *middleware) restart(ctx context.Context, pid int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c.Process().Pid != pid {
		return nil
	}
	return m.c.Restart(ctx)
}

// open opens a stream, restarting a sidecar that has exited and trying once
// more; a baseline the sidecar refuses is dropped for {}, as the proxy does.
func (m *middleware) open(ctx context.Context, p OpenStreamParams) (*Client, string, error) {
	c, pid, err := m.client(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err := c.OpenStream(ctx, p)
	var exited *ExitError
	if errors.As(err, &exited) {
		m.log.Printf("agui-state: the sidecar had exited (%v); restarting it", err)
		if err := m.restart(ctx, pid); err != nil {
			return nil, "", err
		}
		id, err = c.OpenStream(ctx, p)
	}
	if p.State != nil && (errors.Is(err, ErrInvalidParams) || errors.Is(err, ErrLimitExceeded)) {
		m.log.Printf("agui-state: the request's RunAgentInput.state was refused (%v); the stream is repaired from {}", err)
		p.State = nil
		id, err = c.OpenStream(ctx, p)
	}
	return c, id, err
}

// baseline reads the request body for RunAgentInput.state and puts it back
// for the handler, whole, however long it is. The state goes to the sidecar
// as its raw text, to be read by the sidecar's one JSON reader (its rules for
// numbers and depth); nil means none, and note says why when one was meant.
func baseline(r *http.Request) (json.RawMessage, string) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, ""
	}
	body := r.Body
	read, err := io.ReadAll(io.LimitReader(body, maxBaselineBytes+1))
	rest := io.Reader(body)
	if err != nil {
		rest = &failedReader{err} // the handler sees the same error where it would have
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(read), rest), body}
	switch {
	case err != nil:
		return nil, "the request body could not be read"
	case len(read) > maxBaselineBytes:
		return nil, "the request body is too large to keep"
	case r.Header.Get("Content-Encoding") != "" && !strings.EqualFold(r.Header.Get("Content-Encoding"), "identity"):
		return nil, "the request body is encoded"
	}
	var input struct {
		State json.RawMessage `json:"state"`
	}
	if json.Unmarshal(read, &input) != nil {
		return nil, "the request body is not JSON"
	}
	if s := bytes.TrimLeft(input.State, " \t\r\n"); len(s) > 0 && s[0] == '{' {
		return input.State, ""
	}
	return nil, "" // no state, null or not an object: the client holds {} as far as a patch can tell
}

type readCloser struct {
	io.Reader
	io.Closer
}

type failedReader struct{ err error }

func (f *failedReader) Read([]byte) (int, error) { return 0, f.err }

// framing is the stream framing a Content-Type names, or "" for a response
// that is not an event stream (protocol/README.md §14, openStream).
func framing(contentType string) string {
	mediaType, _, _ := strings.Cut(contentType, ";")
	switch strings.ToLower(strings.TrimSpace(mediaType)) {
	case "text/event-stream":
		return "sse"
	case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonl", "application/jsonlines":
		return "ndjson"
	}
	return ""
}
