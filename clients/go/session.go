package aguistate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// A call's goroutine reads its own reply: there is no reader goroutine. A
// reply handed from a reader goroutine to its caller wakes a second goroutine
// per call, and the scheduler then wakes an idle thread to look for work,
// which cost more than the rest of the client together (docs/benchmarks.md,
// B18). When several goroutines call at once, the one holding the turn reads
// stdout for all of them: a reply for another call goes to that call's
// channel, and when the reader's own reply comes it gives the turn up and a
// waiting call takes it. The end of stdout is seen by whoever reads it, at
// once, and fails every waiting call with the ExitError.

// pollCancel is how often a reader whose ctx can be cancelled (but has no
// earlier deadline) looks at it while no reply comes: a read can be
// interrupted only by a deadline on the pipe.
const pollCancel = 20 * time.Millisecond

// proc is one session: a spawned process on its stdin and stdout, or a
// connection to the shared sidecar (shared.go), which carries the same lines
// both ways. The transport is the only difference: a connection that ends is
// a process that exited (an *ExitError), and the middleware recovers from
// either the same way (protocol/README.md §2, §14).
type proc struct {
	cmd   *exec.Cmd // nil for a connection
	conn  net.Conn  // nil for a process
	addr  string    // the connection's address
	stdin io.WriteCloser
	wmu   sync.Mutex // serializes writes (one line per request) and the close of stdin

	// The reader's: whoever holds turn (a one-slot channel) reads stdout.
	turn      chan struct{}
	stdout    io.Reader
	deadline  interface{ SetReadDeadline(time.Time) error } // stdout's, when it has one (os.Pipe does)
	br        *bufio.Reader
	partial   []byte // a line cut short by a read deadline
	lost      bool   // an unreadable line was read: what follows is discarded
	unbounded bool   // stdout has no read deadline now

	mu      sync.Mutex            // guards pending, cause, ended and err
	pending map[int64]chan []byte // id -> where its reply line goes (nil: the process has exited)
	cause   error                 // why the client ended the session, if it did (an unreadable reply, Close's wait run out)
	ended   bool                  // stdout has ended: no reply will come
	closing bool                  // a connection's: the client closed its side (stop)
	err     *ExitError            // set once the process has exited
	done    chan struct{}         // closed after err is set
}

func newProc(cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader) *proc {
	p := &proc{cmd: cmd, stdin: stdin, turn: make(chan struct{}, 1), stdout: stdout,
		br: bufio.NewReaderSize(stdout, 64<<10), pending: map[int64]chan []byte{}, done: make(chan struct{})}
	p.deadline, _ = stdout.(interface{ SetReadDeadline(time.Time) error })
	return p
}

// newConnProc is a session on a connection to the shared sidecar: its
// requests are written to it and its replies read from it, with read
// deadlines as on a pipe.
func newConnProc(conn net.Conn, addr string) *proc {
	p := newProc(nil, conn, conn)
	p.conn, p.addr = conn, addr
	return p
}

// await returns the reply line for id, read by this goroutine when it holds
// the turn, or handed over on ch by the goroutine that does. With id 0 and ch
// nil it reads (or waits while another call reads) until stdout ends and the
// process is reaped, or ctx is done.
func (p *proc) await(ctx context.Context, id int64, ch chan []byte) ([]byte, error) {
	for {
		turn := p.turn
		if p.hasEnded() {
			turn = nil // nothing more to read: wait for the exit status
		}
		select {
		case line := <-ch:
			if line == nil {
				return nil, p.err
			}
			return line, nil
		case <-p.done:
			select {
			case line := <-ch: // handed over before the end
				if line != nil {
					return line, nil
				}
			default:
			}
			return nil, p.err
		case <-ctx.Done():
			p.forget(id) // a late reply is dropped
			return nil, ctx.Err()
		case turn <- struct{}{}:
			line, mine, err := p.lead(ctx, id, ch)
			<-p.turn
			if mine {
				return line, err
			}
		}
	}
}

// lead reads stdout, holding the turn, until this call's reply comes (mine),
// ctx is done (mine, with its error), or stdout ends (not mine: await then
// waits for the exit status).
func (p *proc) lead(ctx context.Context, id int64, ch chan []byte) ([]byte, bool, error) {
	select {
	case line := <-ch: // handed over before this goroutine took the turn
		if line == nil {
			return nil, true, p.err
		}
		return line, true, nil
	default:
	}
	if p.hasEnded() {
		return nil, false, nil
	}
	for {
		p.setDeadline(ctx)
		line, err := p.br.ReadBytes('\n') // a new slice each time: it goes to its caller as it is
		if len(p.partial) > 0 {
			line = append(p.partial, line...)
			p.partial = nil
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			p.partial = line
			if ctx.Err() != nil {
				p.forget(id)
				return nil, true, ctx.Err()
			}
			continue
		}
		if mine := p.dispatch(line, id); mine != nil {
			return mine, true, nil
		}
		if err != nil { // the end of stdout (or of the pipe, or of the connection): the process is gone or going
			p.end(err)
			return nil, false, nil
		}
	}
}

// setDeadline bounds the next read by ctx: its deadline, and pollCancel when
// it can be cancelled. A ctx that cannot (context.Background) reads unbounded.
func (p *proc) setDeadline(ctx context.Context) {
	if p.deadline == nil {
		return
	}
	if ctx.Done() == nil {
		if !p.unbounded { // set once, not before every read
			_ = p.deadline.SetReadDeadline(time.Time{})
			p.unbounded = true
		}
		return
	}
	d := time.Now().Add(pollCancel)
	if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
		d = dl
	}
	_ = p.deadline.SetReadDeadline(d)
	p.unbounded = false
}

// dispatch hands one line to the call it answers; it returns the line if that
// is the call with id (ids start at 1: 0 is no call).
func (p *proc) dispatch(line []byte, id int64) []byte {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || p.lost {
		return nil
	}
	rid, err := replyID(line)
	if err != nil {
		p.lost = true
		p.unreadable(line, err)
		return nil
	}
	p.mu.Lock()
	ch := p.pending[rid]
	delete(p.pending, rid)
	p.mu.Unlock()
	if rid == id && id != 0 {
		return line
	}
	if ch != nil {
		ch <- line // buffered: never blocks
	}
	return nil
}

func (p *proc) hasEnded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// end marks stdout ended, and reaps the process on a goroutine of its own: a
// process that closed stdout may live on, and no call waits for it longer
// than its ctx allows. A connection has nothing to wait for: it is closed,
// and read says why it ended.
func (p *proc) end(read error) {
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	if p.conn != nil {
		_ = p.conn.Close()
		p.mu.Lock()
		why := p.cause
		if why == nil && !p.closing {
			why = read
			if errors.Is(read, io.EOF) {
				why = errors.New("the sidecar closed it")
			}
		}
		p.exited(&ExitError{Err: why, Address: p.addr})
		return
	}
	go func() {
		_ = p.cmd.Wait()
		p.mu.Lock()
		p.exited(&ExitError{State: p.cmd.ProcessState, Err: p.cause})
	}()
}

// exited fails every call pending on the session with err; called with mu
// held, which it releases.
func (p *proc) exited(err *ExitError) {
	p.err = err
	for id, ch := range p.pending {
		delete(p.pending, id)
		ch <- nil
	}
	p.mu.Unlock()
	close(p.done)
}

// unreadable ends a session whose stdout cannot be trusted: stdout carries
// protocol frames only, so a line that is not one means the stream is lost.
func (p *proc) unreadable(line []byte, err error) {
	p.kill(fmt.Errorf("unreadable response %.200q: %v", line, err))
}

// kill ends the process for a reason of the client's (the first one given):
// every call pending on it, or made on it later, fails with an *ExitError
// that says why. A process stopped (SIGSTOP) dies of it too. A connection is
// closed instead: the shared sidecar is not the client's to kill, and it
// releases what the connection opened (protocol/README.md §2).
func (p *proc) kill(why error) {
	p.mu.Lock()
	if p.cause == nil {
		p.cause = why
	}
	p.mu.Unlock()
	p.terminate()
}

func (p *proc) terminate() {
	if p.conn != nil {
		_ = p.conn.Close()
		return
	}
	_ = p.cmd.Process.Kill()
}

// ending is what kill does, for the sentence that says why it did.
func (p *proc) ending() string {
	if p.conn != nil {
		return "disconnected"
	}
	return "killed"
}

// idPrefix is how the sidecar begins every reply to a request of ours (its
// encoder writes the members in this order). A line that begins otherwise is
// decoded in full to find its id.
var idPrefix = []byte(`{"jsonrpc":"2.0","id":`)

// replyID is the id of a reply line: 0 for id null (a reply that names no
// request). The line itself is checked by the call that decodes it.
func replyID(line []byte) (int64, error) {
	if bytes.HasPrefix(line, idPrefix) {
		rest := line[len(idPrefix):]
		if end := bytes.IndexByte(rest, ','); end > 0 && end <= 20 {
			if id, err := strconv.ParseInt(string(rest[:end]), 10, 64); err == nil {
				return id, nil
			}
		}
	}
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return 0, err
	}
	if string(r.ID) == "null" {
		return 0, nil
	}
	return strconv.ParseInt(string(r.ID), 10, 64)
}

// decode decodes a reply line in one pass, as a bare client would: its error,
// or its result into result (a pointer held in an interface is decoded into,
// not replaced), not once into a raw result and then again.
func (p *proc) decode(method string, line []byte, result any) error {
	var discard json.RawMessage
	if result == nil {
		result = &discard
	}
	reply := struct {
		Result any    `json:"result"`
		Error  *Error `json:"error"`
	}{Result: result}
	err := json.Unmarshal(line, &reply)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) { // not JSON at all: the session is lost (see unreadable)
		p.unreadable(line, err)
		_, err = p.await(context.Background(), 0, nil)
		return err
	}
	if reply.Error != nil {
		return reply.Error
	}
	if err != nil {
		return fmt.Errorf("agui-state: %s result: %w", method, err)
	}
	return nil
}

func (p *proc) forget(id int64) {
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
}

// stop closes stdin, which makes the sidecar answer what it has read and exit
// 0; after timeout it is killed. Whatever it still writes is read to the end,
// for the calls that wait on it. A connection's side is closed the same way
// (the sidecar answers what it read and closes its own), and after timeout the
// connection.
func (p *proc) stop(timeout time.Duration) error {
	p.wmu.Lock()
	if cw, ok := p.conn.(interface{ CloseWrite() error }); ok {
		p.mu.Lock()
		p.closing = true
		p.mu.Unlock()
		_ = cw.CloseWrite()
	} else {
		_ = p.stdin.Close()
	}
	p.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _ = p.await(ctx, 0, nil)
	select {
	case <-p.done:
	default: // the timeout passed first
		// The error says the kill was ours, and after how long, so that it
		// reads apart from a kill from outside.
		p.mu.Lock()
		if p.err == nil && p.cause == nil {
			p.cause = fmt.Errorf("still running %v after its input closed; %s", timeout, p.ending())
		}
		p.mu.Unlock()
		p.terminate()
		_, _ = p.await(context.Background(), 0, nil)
	}
	if p.err.Err == nil && (p.conn != nil || p.err.State != nil && p.err.State.Success()) {
		return nil
	}
	return p.err
}
