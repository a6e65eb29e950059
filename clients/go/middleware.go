package aguistate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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
	// Logger gets the sidecar's findings by outcome, each restart of the
	// sidecar, and one line per stream the middleware could not repair to its
	// end (the rest went on unrepaired); nil means log.Default().
	Logger *log.Logger
	// Findings, when set, is called with each finding of the repair, in
	// order (protocol/README.md §13): every op sent rewritten or left out,
	// every event left out or passed on although the client refuses it, each
	// with its outcome, as proxy logs them at debug level. It is called on the
	// response's own path, between two writes: it must not block. Logger has
	// them counted by outcome either way.
	Findings func(r *http.Request, f StreamFinding)
	// Sidecar says how to spawn the sidecar, when the middleware starts its
	// own (NewMiddleware, or Middleware with a nil Client).
	Sidecar Options
	// ReplayLimit is how much of each response's text, in bytes, is kept
	// while it streams, to rebuild the sidecar's view of it should the
	// sidecar die: the new one is fed that text again (its output is not
	// sent twice), and the repair goes on exactly as if nothing had happened.
	// Past it, or when it is negative, a response whose sidecar dies is
	// opened again from the request's state alone: under Own, the next
	// STATE_SNAPSHOT is still an add of each owned member, whole, which needs
	// nothing the lost sidecar knew, so the client's own keys are kept; a
	// STATE_DELTA before it is checked against the request's state. Zero
	// means defaultReplayLimit.
	ReplayLimit int

	// NoResume turns resume off (protocol/README.md §16; on by default when
	// the sidecar keeps a run log, as it does unless started with --store
	// none): no event ids, no detach, and a request with Last-Event-ID or a
	// POST to <path>/connect goes to the handler like any other.
	NoResume bool
	// Store is the sidecar's --store, when the middleware starts it: "" for
	// its default ("memory": this process serves rejoins), or
	// "redis://HOST:PORT[/DB]", so that every server sharing the database
	// serves a rejoin for a run another one is executing.
	Store string
	// DetachGrace is the sidecar's --detach-grace, when the middleware starts
	// it: how long a run goes on after its client left, for the client to
	// rejoin it. Zero is the sidecar's default (30 s); negative cancels the
	// handler at once, as before resume.
	DetachGrace time.Duration
}

// sidecarOptions is opts.Sidecar with the flags of Store and DetachGrace.
func sidecarOptions(opts MiddlewareOptions) Options {
	o := opts.Sidecar
	args := append([]string(nil), o.Args...)
	if opts.Store != "" {
		args = append(args, "--store", opts.Store)
	}
	switch {
	case opts.DetachGrace < 0:
		args = append(args, "--detach-grace", "0")
	case opts.DetachGrace > 0:
		args = append(args, "--detach-grace", fmt.Sprintf("%.3f", opts.DetachGrace.Seconds()))
	}
	o.Args = args
	return o
}

// defaultReplayLimit is MiddlewareOptions.ReplayLimit's default: an agent's
// response is most often far smaller, and one past it is still repaired
// after a crash, from its next snapshot on.
const defaultReplayLimit = 8 << 20

// maxReopens is how many times one response opens its stream again after the
// sidecar died: a sidecar that dies each time (input that crashes it, a host
// out of memory) must not be restarted for ever; the response then goes on
// unrepaired (fail open).
const maxReopens = 2

// maxBaselineBytes bounds the request body kept for its RunAgentInput.state;
// past it the body still reaches the handler whole, and the baseline is {}
// (the proxy's limit, src/proxy/baseline.ts).
const maxBaselineBytes = 64 << 20

// flushAt is how much written text waits for a Flush: a handler that never
// flushes still streams, in parts of about this size, as net/http's own
// buffer would send it.
const flushAt = 16 << 10

// Middleware repairs the AG-UI event streams a handler writes (a response
// whose Content-Type is text/event-stream, or NDJSON: application/x-ndjson,
// application/jsonl) through the sidecar's stream methods, with the
// request's RunAgentInput.state as the client's baseline. Every other
// response, and any response with a Content-Encoding, passes untouched: put
// it inside a compression middleware, where the body is still plain text.
//
// It fails open: whatever happens to the sidecar, the user's stream
// completes. If the sidecar dies in the middle of a stream, it is restarted
// on c (Client.Restart: threads the server kept on c must then be reopened,
// as after any crash) and the stream is opened again on the new one, with
// what it had repaired so far replayed (MiddlewareOptions.ReplayLimit), so the
// repair goes on for the rest of the response; every response the sidecar
// was serving recovers so, each on its own. A sidecar that dies again on the
// same response (maxReopens) is left alone: the rest of that response goes
// through unrepaired, and Logger says so. Logger also gets the restart, and
// the sidecar's findings by outcome (passed, mended, discarded, kept).
//
// A nil c starts a sidecar with opts.Sidecar at the first stream, which then
// waits for it (a few hundred milliseconds); NewMiddleware starts it at once.
func Middleware(c *Client, opts MiddlewareOptions) func(http.Handler) http.Handler {
	return newMiddleware(c, opts).wrap
}

// Repairer is a Middleware that started its own sidecar (NewMiddleware).
type Repairer struct{ m *middleware }

// NewMiddleware starts the sidecar (opts.Sidecar) and readies it for streams
// before it returns, so that the first stream after the app starts does not
// wait for it (docs/benchmarks.md, B22go): call it where the app starts, and
// Close when it stops. ctx bounds only the start. An error (the executable
// not found, a sidecar that exits at once, options it refuses) is returned,
// and no process is left behind.
//
//	repair, err := aguistate.NewMiddleware(ctx, aguistate.MiddlewareOptions{Own: []string{"/toolState"}})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer repair.Close()
//	http.ListenAndServe(addr, repair.Handler(mux))
func NewMiddleware(ctx context.Context, opts MiddlewareOptions) (*Repairer, error) {
	c, err := Start(ctx, sidecarOptions(opts))
	if err != nil {
		return nil, err
	}
	// The sidecar loads its stream pipeline at the first openStream
	// (protocol/README.md §14), and a process's first event through it costs
	// more than the next (B22go): one short run through a stream opened with
	// these options does both now, and an Own the sidecar refuses is an error
	// here rather than a log line at each stream.
	id, err := c.OpenStream(ctx, OpenStreamParams{Own: opts.Own, Snapshots: opts.Snapshots, JoinKeys: opts.JoinKeys, Framing: "sse"})
	if err == nil {
		_, err = c.FixStream(ctx, id, warmRun)
	}
	if err == nil {
		_, err = c.CloseStream(ctx, id)
	}
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("agui-state: the sidecar did not start its stream repair: %w", err)
	}
	return &Repairer{newMiddleware(c, opts)}, nil
}

// warmRun is the run NewMiddleware sends through the sidecar before it returns.
const warmRun = "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n" +
	"data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{}}\n\n" +
	"data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n"

// Handler wraps next: its event streams are repaired (see Middleware).
func (r *Repairer) Handler(next http.Handler) http.Handler { return r.m.wrap(next) }

// Client is the sidecar's client, e.g. for its pid (Client.Process) or
// Stats. After a crash the middleware restarts the process on this same
// Client.
func (r *Repairer) Client() *Client { return r.m.c }

// Close stops the sidecar: nil if it exited cleanly, else its *ExitError.
// Call it once the server has stopped serving (http.Server.Shutdown):
// responses still streaming go on unrepaired.
func (r *Repairer) Close() error { return r.m.c.Close() }

func newMiddleware(c *Client, opts MiddlewareOptions) *middleware {
	m := &middleware{c: c, opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = log.Default()
	}
	switch {
	case opts.ReplayLimit == 0:
		m.replayLimit = defaultReplayLimit
	case opts.ReplayLimit > 0:
		m.replayLimit = opts.ReplayLimit
	}
	return m
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.resumes() && m.handles(r.URL.Path) {
			if kind := m.classify(r); kind == "rejoin" || kind == "reload" {
				m.rejoin(w, r, kind) // never the handler (middleware_resume.go)
				return
			}
		}
		if !m.wants(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		sw := &streamWriter{w: w, m: m, req: r, ctx: r.Context()}
		sw.input = baseline(r)
		sw.state, sw.note = sw.input.state, sw.input.note
		if m.resumes() {
			r = sw.detachable(r) // the handler outlives its client for the grace (middleware_resume.go)
		}
		returned := false
		defer func() { sw.finish(!returned) }()
		next.ServeHTTP(sw, r)
		returned = true
	})
}

type middleware struct {
	opts        MiddlewareOptions
	log         *log.Logger
	replayLimit int // 0: none kept

	mu sync.Mutex // guards c, and makes one restart of a dead sidecar out of many callers' attempts
	c  *Client

	noResume int32 // atomic; 1: the sidecar refused openStream's resume, and is not asked again (atomic.Bool is Go 1.19)
}

// resumes: streams are opened with resume, and requests classified.
func (m *middleware) resumes() bool { return !m.opts.NoResume && atomic.LoadInt32(&m.noResume) == 0 }

// dropResume turns resume off for a sidecar that does not know it (older
// than protocol/README.md §16's methods): streams are repaired without ids,
// as before resume, and it is not asked again.
func (m *middleware) dropResume(err error) {
	if atomic.CompareAndSwapInt32(&m.noResume, 0, 1) {
		m.log.Printf("agui-state: the sidecar cannot file streams as resumable runs (%v); they are repaired without resume", err)
	}
}

// resumeRefused is the member of openStream's resume the sidecar refused
// ("/resume" itself, or "/resume/<member>"), "" when it refused none. unknown:
// the sidecar does not know it (older than protocol/README.md §16, or than
// that member), rather than refusing this request's value of it (a header
// past the protocol's limits).
func resumeRefused(err error) (field string, unknown bool) {
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalidParams) {
		return "", false
	}
	field, _ = e.Field()
	if field != "/resume" && !strings.HasPrefix(field, "/resume/") {
		return "", false
	}
	return field, e.Reason() == "UNKNOWN_PARAM"
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

// client returns the sidecar's client and the process it holds, starting it
// first for Middleware(nil, ...).
func (m *middleware) client(ctx context.Context) (*Client, *proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		c, err := Start(ctx, sidecarOptions(m.opts))
		if err != nil {
			return nil, nil, err
		}
		m.c = c
	}
	return m.c, m.c.current(), nil
}

// restart starts a fresh sidecar in place of the process that was seen dead
// (dead), unless another request's restart has already replaced it; it
// returns the process to use now.
func (m *middleware) restart(ctx context.Context, dead *proc, why error) (*proc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.c.current(); p != dead {
		return p, nil
	}
	if err := m.c.Restart(ctx); err != nil {
		m.log.Printf("agui-state: the sidecar exited (%v), and could not be restarted: %v", why, err)
		return nil, err
	}
	m.log.Printf("agui-state: the sidecar exited (%v); restarted it (pid %d)", why, m.c.Process().Pid)
	return m.c.current(), nil
}

// onSidecar makes call on the sidecar's process, and once more on a new one
// when that process has exited (with Redis, a new sidecar serves what the old
// one logged). It returns the client and the process of the last call, nil
// when there is no sidecar to call, and that call's error.
func (m *middleware) onSidecar(ctx context.Context, call func(c *Client, on *proc) error) (*Client, *proc, error) {
	c, on, err := m.client(ctx)
	if err != nil {
		return nil, nil, err
	}
	err = call(c, on)
	var exited *ExitError
	if errors.As(err, &exited) {
		if on, err = m.restart(ctx, on, err); err != nil {
			return nil, nil, err
		}
		err = call(c, on)
	}
	return c, on, err
}

// open opens a stream (onSidecar); a baseline the sidecar refuses is dropped
// for {}, as the proxy does. It returns the stream's process, what openStream
// answered, and the params it was opened with (a refused baseline or resume
// left out).
func (m *middleware) open(ctx context.Context, p OpenStreamParams) (*proc, openedStream, OpenStreamParams, error) {
	var o openedStream
	c, on, err := m.onSidecar(ctx, func(c *Client, on *proc) (err error) {
		o, err = m.openOn(ctx, c, on, p)
		return err
	})
	if c == nil {
		return nil, o, p, err
	}
	if field, unknown := resumeRefused(err); p.Resume != nil && field != "" {
		switch {
		case unknown:
			m.dropResume(err)
			p.Resume = nil
		case field == "/resume/threadId" && p.Resume.ThreadID != "":
			// Past the protocol's cap: it names no thread, and the run is
			// filed under none (rejoinable by id, never reloaded; §16).
			r := *p.Resume
			r.ThreadID = ""
			p.Resume = &r
		default:
			m.log.Printf("agui-state: the request's resume was refused (%v); the stream is repaired without resume", err)
			p.Resume = nil
		}
		o, err = m.openOn(ctx, c, on, p)
	}
	if p.State != nil && (errors.Is(err, ErrInvalidParams) || errors.Is(err, ErrLimitExceeded)) {
		m.log.Printf("agui-state: the request's RunAgentInput.state was refused (%v); the stream is repaired from {}", err)
		p.State = nil
		o, err = m.openOn(ctx, c, on, p)
	}
	return on, o, p, err
}

// openOn is openStream on the process on, within repairCallLimit.
func (m *middleware) openOn(ctx context.Context, c *Client, on *proc, p OpenStreamParams) (o openedStream, err error) {
	err = bounded(ctx, on, "openStream", func(ctx context.Context) (err error) {
		o, err = c.openStreamOn(ctx, on, p)
		return err
	})
	return o, err
}

// runInput is what the middleware reads of the request's RunAgentInput.
type runInput struct {
	state    json.RawMessage // the client's state, an object; nil: {}
	note     string          // why there is no state, when one was meant
	threadID string          // "" when the body has none: the run is filed without one
	messages json.RawMessage // an array, or nil
}

// baseline reads the request body for RunAgentInput.state (and threadId and
// messages, for resume) and puts it back for the handler, whole, however long
// it is. The state goes to the sidecar as its raw text, to be read by the
// sidecar's one JSON reader (its rules for numbers and depth); nil means
// none, and note says why when one was meant.
func baseline(r *http.Request) runInput {
	if r.Body == nil || r.Body == http.NoBody {
		return runInput{}
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
		return runInput{note: "the request body could not be read"}
	case len(read) > maxBaselineBytes:
		return runInput{note: "the request body is too large to keep"}
	case r.Header.Get("Content-Encoding") != "" && !strings.EqualFold(r.Header.Get("Content-Encoding"), "identity"):
		return runInput{note: "the request body is encoded"}
	}
	var input struct {
		State    json.RawMessage `json:"state"`
		ThreadID json.RawMessage `json:"threadId"` // raw: a threadId that is not a string must not lose the state
		Messages json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(read, &input) != nil {
		return runInput{note: "the request body is not JSON"}
	}
	var in runInput
	_ = json.Unmarshal(input.ThreadID, &in.threadID)
	if s := bytes.TrimLeft(input.Messages, " \t\r\n"); len(s) > 0 && s[0] == '[' {
		in.messages = input.Messages
	}
	if s := bytes.TrimLeft(input.State, " \t\r\n"); len(s) > 0 && s[0] == '{' {
		in.state = input.State
	}
	return in // no state, null or not an object: the client holds {} as far as a patch can tell
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
