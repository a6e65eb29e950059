package aguistate

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"runtime/debug"
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
	// Lifecycle is fix --lifecycle (issue 40, protocol/README.md §13): "repair"
	// mends a run's lifecycle the client would refuse (content after its
	// message's end, a run finished with a tool call open, events after the
	// run's end, ...), and ends a run the response stopped inside, the handler
	// returned or panicked, with its closes and a RUN_ERROR (INCOMPLETE_STREAM)
	// followed by a clean end of the response: the client gets a whole,
	// failed run. "pass" sends the lifecycle as the handler wrote it. "" is
	// left out of openStream: the sidecar's default, pass. Any other value is
	// ErrInvalidOption.
	Lifecycle string
	// JoinKeys reads an unescaped /toolState/raster-ops/dataset as the key
	// "raster-ops/dataset" when that is the only way the op applies.
	JoinKeys bool
	// Paths are the request paths the middleware handles; none means every
	// path. The sidecar matches them (classifyRequest): an entry handles its
	// own path and every path below it ("/agent" handles "/agent/run", not
	// "/agents"); every other request goes to the handler untouched.
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
	// own (NewMiddleware, or Middleware with a nil Client). Its Address (or
	// $AGUI_STATE_SIDECAR) names the host's shared sidecar instead, which
	// every worker connects to, and its Start (or AGUI_STATE_SIDECAR_START=1)
	// starts that one when nobody answers (protocol/README.md §2): a rejoin
	// the load balancer sends to another worker then finds the run with the
	// memory store.
	Sidecar Options
	// ReplayLimit is how much of each response's text, in bytes, is kept
	// while it streams, to rebuild the sidecar's view of it should the
	// sidecar die: the new one is fed that text again (its output is not
	// sent twice), and the repair goes on exactly as if nothing had happened.
	// Past it, or when it is negative, a response whose sidecar dies is
	// opened again from the request's state and its RUN_STARTED alone: under
	// Own, the next STATE_SNAPSHOT is still an add of each owned member,
	// whole, which needs nothing the lost sidecar knew, so the client's own
	// keys are kept; a STATE_DELTA before it is checked against the request's
	// state. Zero means the sidecar's figure (openStream's replayBytes).
	ReplayLimit int

	// NoResume turns resume off (protocol/README.md §16; on by default when
	// the sidecar keeps a run log, as it does unless started with --store
	// none): no event ids, no detach, and a request with Last-Event-ID or a
	// POST to <path>/connect goes to the handler like any other.
	NoResume bool
	// Store, DetachGrace and Sidecar are for a sidecar the middleware starts:
	// given with a Client, they are an error (ErrConflictingOptions); so are
	// Store, DetachGrace and Sidecar.Args with a Sidecar.Address and no start
	// mode, since the sidecar there keeps the flags it was started with.
	//
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

// ErrConflictingOptions: MiddlewareOptions' Store, DetachGrace or Sidecar,
// which are flags of a sidecar the middleware starts, given with a Client it
// does not start. An error that names sidecar flags given with an address and
// no start mode (Options.Args; Store, DetachGrace, Sidecar.Args) is one too,
// for errors.Is.
var ErrConflictingOptions = errors.New("agui-state: CONFLICTING_OPTIONS: Store, DetachGrace and Sidecar start a sidecar, and a Client was given")

// ErrInvalidOption: an option with a value it cannot take (Lifecycle other
// than "", "repair" or "pass", a Sidecar.Address or $AGUI_STATE_SIDECAR that
// is not unix:PATH or tcp:HOST:PORT on a loopback host); Check's error and
// Start's wrap it, naming the option.
var ErrInvalidOption = errors.New("agui-state: INVALID_OPTION")

// Check is nil, ErrConflictingOptions when o cannot go with c, an error
// wrapping it for Store, DetachGrace or Sidecar.Args with a Sidecar.Address
// (or $AGUI_STATE_SIDECAR) and no start mode, which no sidecar would take, or
// an error wrapping ErrInvalidOption for an option's value.
func (o MiddlewareOptions) Check(c *Client) error {
	switch o.Lifecycle {
	case "", "repair", "pass":
	default:
		return fmt.Errorf("%w: Lifecycle %q: want \"repair\" (or \"\") or \"pass\"", ErrInvalidOption, o.Lifecycle)
	}
	s := o.Sidecar
	if c != nil && (o.Store != "" || o.DetachGrace != 0 || s.Path != "" || s.Args != nil || s.Env != nil || s.Stderr != nil || s.CloseTimeout != 0 || s.Address != "" || s.Start) {
		return ErrConflictingOptions
	}
	if c == nil { // an address the middleware will connect to, the environment's too
		a, start, err := s.sharedSidecar()
		if err != nil {
			return err
		}
		var given []string
		if o.Store != "" {
			given = append(given, "Store")
		}
		if o.DetachGrace != 0 {
			given = append(given, "DetachGrace")
		}
		if len(s.Args) > 0 {
			given = append(given, fmt.Sprintf("Sidecar.Args %q", s.Args))
		}
		return unstarted(a, start, given)
	}
	return nil
}

// maxReopens is how many times one response opens its stream again after the
// sidecar died: a sidecar that dies each time (input that crashes it, a host
// out of memory) must not be restarted for ever; the response then goes on
// unrepaired (fail open).
const maxReopens = 2

// Middleware repairs the AG-UI event streams a handler writes through the
// sidecar's stream methods. It is the sidecar's I/O (protocol/README.md §14):
// the sidecar classifies each request (which it handles, which is a rejoin),
// and, at the response head, given the raw request and the head, decides
// whether the response is an event stream it repairs (SSE or NDJSON, not
// Content-Encoded: put the middleware inside a compression middleware), its
// baseline (the request's RunAgentInput.state) and the head to write.
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
// A nil c starts a sidecar with opts.Sidecar at the first request, which then
// waits for it (a few hundred milliseconds); NewMiddleware starts it at once.
// Options that start a sidecar, given with c, panic with ErrConflictingOptions,
// and an option's invalid value with ErrInvalidOption (MiddlewareOptions.Check).
func Middleware(c *Client, opts MiddlewareOptions) func(http.Handler) http.Handler {
	if err := opts.Check(c); err != nil {
		panic(err)
	}
	return newMiddleware(c, opts).wrap
}

// Repairer is a Middleware that started its own sidecar (NewMiddleware).
type Repairer struct{ m *middleware }

// NewMiddleware starts the sidecar (opts.Sidecar) and readies it for streams
// before it returns, so that the first stream after the app starts does not
// wait for it (docs/benchmarks.md, B22go): call it where the app starts, and
// Close when it stops. ctx bounds only the start. An error (an invalid
// option, the executable not found, a sidecar that exits at once, options it
// refuses) is returned, and no process is left behind.
//
//	repair, err := aguistate.NewMiddleware(ctx, aguistate.MiddlewareOptions{Own: []string{"/toolState"}})
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer repair.Close()
//	http.ListenAndServe(addr, repair.Handler(mux))
func NewMiddleware(ctx context.Context, opts MiddlewareOptions) (*Repairer, error) {
	if err := opts.Check(nil); err != nil {
		return nil, err
	}
	c, err := Start(ctx, sidecarOptions(opts))
	if err != nil {
		return nil, err
	}
	// The sidecar loads its stream pipeline at the first openStream
	// (protocol/README.md §14), and a process's first event through it costs
	// more than the next (B22go): one short run through a stream opened with
	// these options does both now, and an Own the sidecar refuses is an error
	// here rather than a log line at each stream.
	id, err := c.OpenStream(ctx, OpenStreamParams{Own: opts.Own, Snapshots: opts.Snapshots, JoinKeys: opts.JoinKeys, Lifecycle: opts.Lifecycle, Framing: "sse"})
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
// A shared sidecar (Sidecar.Address) goes on serving the other workers: Close
// ends this one's connection to it (one started in start mode exits a minute
// after its last worker has gone). Call it once the server has stopped
// serving (http.Server.Shutdown): responses still streaming go on unrepaired.
func (r *Repairer) Close() error { return r.m.c.Close() }

func newMiddleware(c *Client, opts MiddlewareOptions) *middleware {
	m := &middleware{c: c, opts: opts, log: opts.Logger}
	if m.log == nil {
		m.log = log.Default()
	}
	return m
}

// wrap classifies every request (one call) and does what the sidecar says:
// a rejoin or a reload is answered from its run log, never the handler; a
// request it does not handle, or cannot classify, reaches the handler
// untouched; a handled one reaches it through the body tee and the stream
// writer, which opens the stream at the response head.
func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cl := m.classify(r)
		switch {
		case cl == nil || !cl.Handled:
			next.ServeHTTP(w, r)
			return
		case cl.Kind == "rejoin" || cl.Kind == "reload":
			m.rejoin(w, r, cl) // middleware_resume.go
			return
		}
		sw := &streamWriter{w: w, m: m, req: r, ctx: r.Context()}
		app := r
		if r.Body != nil && r.Body != http.NoBody {
			sw.body = newTeeBody(r.Body, int64(cl.BodyBytes), r.ContentLength)
			app = r.WithContext(r.Context())
			app.Body = sw.body
		}
		if !m.opts.NoResume {
			app = sw.detachable(app) // the handler outlives its client for the grace (middleware_resume.go)
		}
		returned := false
		defer func() {
			// A handler that panicked mid-run: when the sidecar ended its run
			// (closeStream's ended: the closes and a RUN_ERROR, written), the
			// response is a whole, failed run, and ends cleanly rather than
			// breaking off (issue 40); the panic is logged here, once. Else
			// it goes on up, and net/http breaks the response off, as before.
			if sw.finish(!returned) && !returned {
				m.panicked(r, recover())
			}
		}()
		next.ServeHTTP(sw, app)
		returned = true
	})
}

// panicked logs the panic of a handler whose run the sidecar ended: once,
// with its stack as net/http would, but for http.ErrAbortHandler, the panic
// that asks for a quiet abort.
func (m *middleware) panicked(r *http.Request, p any) {
	const ended = "the sidecar ended its run (RUN_ERROR INCOMPLETE_STREAM), and the response ends cleanly"
	if p == http.ErrAbortHandler {
		m.log.Printf("agui-state: %s: the handler aborted (%v); %s", r.URL.Path, p, ended)
		return
	}
	m.log.Printf("agui-state: %s: the handler panicked: %v; %s\n%s", r.URL.Path, p, ended, debug.Stack())
}

type middleware struct {
	opts MiddlewareOptions
	log  *log.Logger

	mu sync.Mutex // guards c, and makes one restart of a dead sidecar out of many callers' attempts
	c  *Client

	old int32 // atomic; 1: the sidecar was found older than classifyRequest's paths, and said so once
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
		if m.c.Address() != "" {
			m.log.Printf("agui-state: the connection to the sidecar ended (%v), and could not be made again: %v", why, err)
		} else {
			m.log.Printf("agui-state: the sidecar exited (%v), and could not be restarted: %v", why, err)
		}
		return nil, err
	}
	if a := m.c.Address(); a != "" {
		m.log.Printf("agui-state: the connection to the sidecar ended (%v); connected to %s again", why, a)
	} else {
		m.log.Printf("agui-state: the sidecar exited (%v); restarted it (pid %d)", why, m.c.Process().Pid)
	}
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

// open opens a stream (onSidecar): the process it lives on, and what
// openStream answered.
func (m *middleware) open(ctx context.Context, p OpenStreamParams) (*proc, openedStream, error) {
	var o openedStream
	_, on, err := m.onSidecar(ctx, func(c *Client, on *proc) (err error) {
		o, err = m.openOn(ctx, c, on, p)
		return err
	})
	return on, o, err
}

// openOn is openStream on the process on, within repairCallLimit.
func (m *middleware) openOn(ctx context.Context, c *Client, on *proc, p OpenStreamParams) (o openedStream, err error) {
	err = bounded(ctx, on, "openStream", func(ctx context.Context) (err error) {
		o, err = c.openStreamOn(ctx, on, p)
		return err
	})
	return o, err
}
