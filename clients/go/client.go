// Package aguistate is a Go client for the agui-state sidecar: it spawns the
// process and speaks JSON-RPC 2.0 to it over stdin/stdout, one JSON message per
// line. A Client is safe for concurrent use by multiple goroutines.
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

// Options says how to spawn the sidecar.
type Options struct {
	Path   string    // the executable; default $AGUI_STATE_BIN, else "agui-state" on PATH
	Args   []string  // extra arguments, e.g. {"--max-ops", "500"}
	Env    []string  // the environment; nil inherits this process's
	Stderr io.Writer // the sidecar's log lines (JSON); default os.Stderr

	// CloseTimeout is how long Close and Restart wait for the process to exit
	// after its stdin is closed (it answers what it has read, then exits 0)
	// before they kill it. Zero means DefaultCloseTimeout.
	CloseTimeout time.Duration
}

// DefaultCloseTimeout is the CloseTimeout used when Options leaves it zero.
const DefaultCloseTimeout = 5 * time.Second

// ExitError is returned by every call pending on, or made after, a sidecar
// process that has exited. Restart starts a fresh one.
type ExitError struct {
	State *os.ProcessState // nil if the process could not be waited for
	Err   error            // what ended the session, if not simply the exit
}

func (e *ExitError) Error() string {
	s := "agui-state exited"
	if e.State != nil {
		s += ": " + e.State.String()
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

func (e *ExitError) Unwrap() error { return e.Err }

// Client is a connection to one sidecar process at a time.
type Client struct {
	opts   Options
	nextID int64 // atomic
	mu     sync.Mutex
	p      *proc
}

// Start spawns the sidecar. ctx bounds only the start, not the process's life.
func Start(ctx context.Context, opts Options) (*Client, error) {
	c := &Client{opts: opts}
	p, err := c.spawn(ctx)
	if err != nil {
		return nil, err
	}
	c.p = p
	return c, nil
}

func (c *Client) spawn(ctx context.Context) (*proc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := c.opts.Path
	if path == "" {
		path = os.Getenv("AGUI_STATE_BIN")
	}
	if path == "" {
		path = "agui-state"
	}
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

// Process is the running sidecar process (for its pid, or to signal it).
func (c *Client) Process() *os.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p.cmd.Process
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

// Close ends the sidecar: nil if it exited cleanly, else its *ExitError.
// Calls made after Close return an *ExitError.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.p.stop(c.closeTimeout())
}

// Restart stops the current process (if it is still running) and starts a
// fresh one on the same client. The new process knows no threads: call
// OpenRun with each thread's state (see README.md, "Recovery").
func (c *Client) Restart(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.p.stop(c.closeTimeout())
	p, err := c.spawn(ctx)
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
