// Package aguistate is a Go client for the agui-state sidecar: it spawns the
// process and speaks JSON-RPC 2.0 to it over stdin/stdout, one JSON message per
// line. A Client is safe for concurrent use by multiple goroutines.
package aguistate

import (
	"bufio"
	"bytes"
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

// proc is one spawned process and its session.
type proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	wmu     sync.Mutex // serializes writes (one line per request) and the close of stdin
	mu      sync.Mutex // guards pending and err
	pending map[int64]chan *response
	err     *ExitError    // set once the process has exited
	done    chan struct{} // closed after err is set
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
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
	p := &proc{cmd: cmd, stdin: stdin, pending: map[int64]chan *response{}, done: make(chan struct{})}
	go p.read(stdout)
	return p, nil
}

// read dispatches responses by id until stdout ends, then reaps the process
// and fails every pending call with the ExitError.
func (p *proc) read(stdout io.Reader) {
	var cause error
	br := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var r response
			id, perr := int64(0), json.Unmarshal(line, &r)
			if perr == nil && string(r.ID) != "null" { // id null: a reply that names no request
				id, perr = strconv.ParseInt(string(r.ID), 10, 64)
			}
			if perr != nil { // stdout carries protocol frames only: this stream cannot be trusted
				cause = fmt.Errorf("unreadable response %.200q: %v", line, perr)
				_ = p.cmd.Process.Kill()
				break
			}
			p.mu.Lock()
			ch := p.pending[id]
			delete(p.pending, id)
			p.mu.Unlock()
			if ch != nil {
				ch <- &r // buffered: never blocks
			}
		}
		if err != nil {
			break
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.err = &ExitError{State: p.cmd.ProcessState, Err: cause}
	for id, ch := range p.pending {
		delete(p.pending, id)
		ch <- nil
	}
	p.mu.Unlock()
	close(p.done)
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
	msg, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int64           `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", id, method, ps})
	if err != nil {
		return err
	}
	c.mu.Lock()
	p := c.p
	c.mu.Unlock()

	ch := make(chan *response, 1)
	p.mu.Lock()
	if p.err != nil {
		p.mu.Unlock()
		return p.err
	}
	p.pending[id] = ch
	p.mu.Unlock()

	p.wmu.Lock()
	_, werr := p.stdin.Write(append(msg, '\n'))
	p.wmu.Unlock()
	if werr != nil { // the process is going away: report how it ended
		p.forget(id)
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case r := <-ch:
		if r == nil {
			return p.err
		}
		if r.Error != nil {
			return r.Error
		}
		if result != nil {
			if err := json.Unmarshal(r.Result, result); err != nil {
				return fmt.Errorf("agui-state: %s result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		p.forget(id) // a late response is dropped
		return ctx.Err()
	}
}

func (p *proc) forget(id int64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// stop closes stdin, which makes the sidecar answer what it has read and exit
// 0; after timeout it is killed.
func (p *proc) stop(timeout time.Duration) error {
	p.wmu.Lock()
	_ = p.stdin.Close()
	p.wmu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	if p.err.State != nil && p.err.State.Success() && p.err.Err == nil {
		return nil
	}
	return p.err
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
