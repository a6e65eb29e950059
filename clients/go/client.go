// Package aguistate is a Go client for the agui-state sidecar: it spawns the
// process and speaks JSON-RPC 2.0 to it over stdin/stdout, one JSON message per
// line, or connects to the host's shared sidecar (Options.Address) and speaks
// the same over the connection. A Client is safe for concurrent use by
// multiple goroutines.
package aguistate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Options says how to spawn the sidecar, or where to find the host's.
type Options struct {
	Path   string    // the executable; default $AGUI_STATE_BIN, else "agui-state" on PATH
	Args   []string  // extra arguments, e.g. {"--max-ops", "500"}; with an Address, only in start mode (ErrConflictingOptions)
	Env    []string  // the environment; nil inherits this process's
	Stderr io.Writer // the sidecar's log lines (JSON); default os.Stderr; not a shared sidecar's

	// Address is the host's shared sidecar (`agui-state serve --listen
	// ADDRESS`, protocol/README.md §2), "unix:PATH" or "tcp:HOST:PORT" with
	// HOST a loopback address: the client connects to it instead of spawning
	// a sidecar of its own, and every worker of a server shares its threads,
	// streams and runs. "" reads $AGUI_STATE_SIDECAR; both empty, the client
	// spawns its own, as before.
	Address string
	// Start: when nobody answers at Address, start the shared sidecar there
	// (Path serve --listen ADDRESS --exit-idle 60000, then Args), detached so
	// that it outlives this process, and connect once it answers
	// (SidecarStartWait). Of several workers starting at once, one sidecar
	// serves. false reads $AGUI_STATE_SIDECAR_START ("1" starts).
	Start bool

	// CloseTimeout is how long Close and Restart wait for the process to exit
	// after its stdin is closed (it answers what it has read, then exits 0)
	// before they kill it. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration
}

// DefaultCloseTimeout is the CloseTimeout used when Options leaves it zero.
const DefaultCloseTimeout = 5 * time.Second

// ExitError is returned by every call pending on, or made after, a sidecar
// process that has exited, or a connection to the shared sidecar that ended
// (the sidecar died, or the client closed it). Restart starts a fresh one, or
// connects again.
type ExitError struct {
	State   *os.ProcessState // nil if the process could not be waited for, or for a connection
	Err     error            // what ended the session, if not simply the exit
	Address string           // the shared sidecar's address, when the session was a connection
}

func (e *ExitError) Error() string {
	s := "agui-state exited"
	if e.Address != "" {
		s = "agui-state at " + e.Address + ": the connection ended"
	}
	if e.State != nil {
		s += ": " + e.State.String()
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *ExitError) Unwrap() error { return e.Err }

// Client is a connection to one sidecar process at a time: one it spawned, or
// the host's shared one (Options.Address).
type Client struct {
	opts   Options
	shared *sharedAddress // the shared sidecar's address; nil: a process of the client's own
	start  bool           // start the shared sidecar when nobody answers
	nextID int64          // atomic
	mu     sync.Mutex
	p      *proc
}

// Start spawns the sidecar, or connects to the host's shared one (starting it
// in start mode) when Options.Address or $AGUI_STATE_SIDECAR names it; an
// address that is not one is an error wrapping ErrInvalidOption, and Args
// with an address and no start mode one wrapping ErrConflictingOptions (no
// sidecar is started here for them to reach). ctx bounds
// only the start, not the process's life.
func Start(ctx context.Context, opts Options) (*Client, error) {
	shared, start, err := opts.sharedSidecar()
	if err != nil {
		return nil, err
	}
	var flags []string
	if len(opts.Args) > 0 {
		flags = []string{fmt.Sprintf("Args %q", opts.Args)}
	}
	if err := unstarted(shared, start, flags); err != nil {
		return nil, err
	}
	c := &Client{opts: opts, shared: shared, start: start}
	p, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	c.p = p
	return c, nil
}

// open spawns the client's own sidecar, or connects to the shared one.
func (c *Client) open(ctx context.Context) (*proc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if c.shared != nil {
		return c.connect(ctx, *c.shared, c.start) // shared.go
	}
	return c.spawn()
}

// path is the sidecar's executable.
func (c *Client) path() string {
	if c.opts.Path != "" {
		return c.opts.Path
	}
	if path := os.Getenv("AGUI_STATE_BIN"); path != "" {
		return path
	}
	return "agui-state"
}

func (c *Client) spawn() (*proc, error) {
	path := c.path()
	cmd := exec.Command(path, c.opts.Args...)
	cmd.Env = c.opts.Env
	cmd.Stderr = c.opts.Stderr // a non-*os.File writer is copied by os/exec as it comes
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("agui-state: start %s: %w", path, err)
	}
	return newProc(cmd, stdin, stdout), nil
}

// Process is the running sidecar process (for its pid, or to signal it); nil
// for the shared sidecar, which is not the client's.
func (c *Client) Process() *os.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.p.cmd == nil {
		return nil
	}
	return c.p.cmd.Process
}

// Address is the shared sidecar's address the client connects to ("" when it
// spawned a sidecar of its own).
func (c *Client) Address() string {
	if c.shared == nil {
		return ""
	}
	return c.shared.text
}

// Call sends one request and decodes its result into result (if non-nil).
// params is marshaled to a JSON object; nil sends {}. A sidecar error comes
// back as *Error, a dead sidecar as *ExitError, an expired ctx as ctx.Err().
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.callOn(ctx, c.current(), method, params, result)
}

// current is the process calls go to now.
func (c *Client) current() *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p
}

// callOn is Call on one process: after it has exited, the call fails with its
// *ExitError even once Restart has started another. Ids that are the
// process's own (a stream's) are used this way, so that one is never sent to
// the process that replaced it, which numbers its streams from s1 again
// (protocol/README.md §14, openStream).
func (c *Client) callOn(ctx context.Context, p *proc, method string, params, result any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if params == nil {
		params = struct{}{}
	}
	ps, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("agui-state: %s params: %w", method, err)
	}
	id := atomic.AddInt64(&c.nextID, 1)
	name, err := json.Marshal(method)
	if err != nil {
		return err
	}
	// The envelope by hand, around params as json.Marshal wrote them: marshaling
	// a struct with params as a json.RawMessage would scan and copy them again.
	msg := make([]byte, 0, len(ps)+len(name)+48)
	msg = append(msg, `{"jsonrpc":"2.0","id":`...)
	msg = strconv.AppendInt(msg, id, 10)
	msg = append(append(append(msg, `,"method":`...), name...), `,"params":`...)
	msg = append(append(msg, ps...), "}\n"...)

	ch := make(chan []byte, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return p.err
	}
	p.pending[id] = ch
	p.mu.Unlock()

	p.wmu.Lock()
	_, werr := p.stdin.Write(msg)
	p.wmu.Unlock()
	if werr != nil { // the process is going away: read stdout to its end to report how it ended
		p.forget(id)
		_, err := p.await(ctx, 0, nil)
		return err
	}
	line, err := p.await(ctx, id, ch)
	if err != nil {
		return err
	}
	return p.decode(method, line, result)
}

// Close ends the sidecar: nil if it exited cleanly, else its *ExitError. A
// shared sidecar is not ended: the connection is (nil when it ends cleanly),
// and the sidecar goes on serving the other workers.
// Calls made after Close return an *ExitError.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p.stop(c.closeTimeout())
}

// Restart stops the current process (if it is still running) and starts a
// fresh one on the same client. The new process knows no threads: call
// OpenRun with each thread's state (see README.md, "Recovery"). For the
// shared sidecar it closes the connection and connects again (starting the
// sidecar in start mode): a sidecar that lived keeps its threads, and the
// streams the old connection opened are closed (§2).
func (c *Client) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.p.stop(c.closeTimeout())
	p, err := c.open(ctx)
	if err != nil {
		return err
	}
	c.p = p
	return nil
}

func (c *Client) closeTimeout() time.Duration {
	if c.opts.CloseTimeout > 0 {
		return c.opts.CloseTimeout
	}
	return DefaultCloseTimeout
}
