package aguistate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// clientLimit is how much text of one event @ag-ui/client holds, in UTF-16
// code units, before it fails the run for want of the event's end: an event
// that grows past it goes on unrepaired, as the sidecar and fix pass it
// (protocol/README.md §13, SSE_BUFFER_LIMIT).
const clientLimit = 10 << 20

// maxPending is how much text may wait for the sidecar before Write and Flush
// wait for it too: the back-pressure of a handler that writes faster than the
// stream is repaired.
const maxPending = 1 << 20

type mode int

const (
	undecided mode = iota // no header yet: the Content-Type decides at WriteHeader
	passing               // not an event stream, or no longer repaired: bytes go through as written
	repairing             // an open stream: text goes through fixStream
	closing               // the repair stops (passOn): closeStream is out, and what the handler writes waits in buf, to go after its text
	detached              // the client left a resumable stream: text still goes through fixStream, its output to the run log only
	gone                  // the client left and the run was cancelled: writes fail, the handler's context is cancelled
)

// streamWriter is the ResponseWriter the handler writes to. A repaired body
// goes to the sidecar in parts that end where an event ends (SSE: a blank
// line; NDJSON: a line end), so the sidecar never holds a part of an event
// that only it has: when it fails, everything not yet answered is still here
// and goes on unrepaired, and nothing is lost or sent twice. A cut at an
// event's end is also a cut between UTF-8 characters.
//
// What is held of an event whose end has not come is bounded by the client's
// own limit (clientLimit): past it the client fails the run whatever is sent,
// so the repair stops there (passOn) rather than hold, in the server's
// memory, an event that may never end.
//
// One goroutine at a time (drain, or passOn's close, or finish: the one that
// set sending) talks to the sidecar, and the handler does not wait for it:
// what the handler flushes while a call is out goes in the next call, whole.
// No sidecar call is made with mu held (but recover's, below), so a sidecar
// that hangs holds up no Write, Flush, heartbeat or watch for its
// repairCallLimit: each call's state is read under mu, the call made without
// it, and its answer applied under mu again, to whatever the stream has
// become meanwhile. At a low rate each flush is one call, sent at once; at a
// high rate the calls carry many events each, so the stream is not held to
// one round trip per event (docs/benchmarks.md, B13).
type streamWriter struct {
	w     http.ResponseWriter
	m     *middleware
	req   *http.Request
	ctx   context.Context // the handler's: sidecar calls are bound to it, not to the client's connection
	input runInput        // what the request's RunAgentInput says
	state json.RawMessage // the request's RunAgentInput.state, nil for {}
	note  string          // why the request had no usable state, when it meant to
	stop  func()          // cancels the handler's context (resume: only when the run is cancelled); nil without resume

	mu      sync.Mutex // everything below, and every write to w
	cond    *sync.Cond // on mu: drain has finished a call
	mode    mode
	c       *Client
	p       *proc // the process the stream lives on: its id means nothing to another
	id      string
	framing string
	params  OpenStreamParams // what it was opened with, to open it again (middleware_recover.go)
	replay  []byte           // every part the sidecar has taken, to feed a new one; nil once past ReplayLimit
	started []byte           // past ReplayLimit: the response's RUN_STARTED, kept when it is its first event, fed to a new sidecar alone
	reopens int              // how many times the stream was opened again after a crash
	counted outcomes         // the findings fixStream has counted on this process's stream
	buf     []byte           // written by the handler, not yet handed to the sidecar
	cut     int              // buf[:cut] is whole events, ready for the sidecar
	seen    int              // buf[:seen] has been read by scan
	held    int              // a lower bound of buf[cut:seen]'s length in UTF-16 code units
	sending bool             // drain, passOn's close or finish is talking to the sidecar
	werr    error            // the first error writing to w: the client is gone
	done    chan struct{}    // closed when the stream ends, to stop the watch
	run     string           // the run's handle when the stream is resumable (protocol §16), else ""
	left    bool             // the client left: nothing more is written to w
	poll    bool             // detached: drain calls fixStream even with nothing to send, to learn of a cancel
	leaving bool             // the client of a resumable stream left: drain detaches it (leave)
}

func (s *streamWriter) Header() http.Header { return s.w.Header() }

// Unwrap is for http.ResponseController (Go 1.20), which reaches deadlines
// and the like on the writer underneath.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.w }

func (s *streamWriter) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writeHeader(code)
}

func (s *streamWriter) writeHeader(code int) {
	// An informational (1xx) header leaves the real one to come; a second
	// call goes on as it is, for net/http to report as superfluous.
	if s.mode != undecided || code < 200 {
		s.w.WriteHeader(code)
		return
	}
	s.mode = passing
	opening := ""
	h := s.w.Header()
	if f := framing(h.Get("Content-Type")); f != "" {
		if enc := h.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
			s.m.log.Printf("agui-state: %s: the event stream is already Content-Encoding %q, so it goes unrepaired: add the middleware inside the compression", s.req.URL.Path, enc)
		} else {
			opening = s.open(f)
		}
	}
	if s.mode == repairing {
		h.Del("Content-Length") // the repaired body has another length
	}
	s.w.WriteHeader(code)
	// §16: the opening id block goes right behind the head, flushed, before the
	// handler's first event, so that a client cut before it holds an id. A
	// stream opened again after a restart (middleware_recover.go) is a new run
	// whose opening is not written: the client has this one.
	if opening != "" {
		if s.out(opening) == nil {
			_ = s.flush()
		}
		if s.werr != nil {
			s.leave() // as drain does: a client already gone leaves a run that goes on
		}
	}
}

// open opens the stream on the sidecar; it returns the opening block to write
// first when the stream was filed as a resumable run, else "".
func (s *streamWriter) open(f string) string {
	if s.note != "" {
		s.m.log.Printf("agui-state: %s: %s; the stream is repaired from the state {}", s.req.URL.Path, s.note)
	}
	o := s.m.opts
	params := OpenStreamParams{State: s.state, Own: o.Own, Snapshots: o.Snapshots, JoinKeys: o.JoinKeys, Framing: f}
	if s.stop != nil && f == "sse" {
		params.Resume = s.resumeRun()
	}
	p, opened, params, err := s.m.open(s.ctx, params)
	if err != nil {
		var hung *hungError
		switch {
		case errors.As(err, &hung):
			s.m.logHung(s.req.URL.Path, hung, "and this response goes through unrepaired")
		case s.req.Context().Err() == nil: // a client that went away needs no word
			s.m.log.Printf("agui-state: %s: no stream repair (%v); the response goes through unrepaired", s.req.URL.Path, err)
		}
		return ""
	}
	s.c, s.p, s.id, s.params, s.framing, s.mode = s.m.c, p, opened.StreamID, params, f, repairing
	if params.Resume != nil {
		s.run = opened.Run // "" from a sidecar without a run log (--store none)
	}
	if s.m.replayLimit > 0 {
		s.replay = []byte{}
	}
	s.cond = sync.NewCond(&s.mu)
	s.done = make(chan struct{})
	if s.stop == nil { // with resume, the watch in detachable does this
		go s.watch(s.req.Context(), s.done)
	}
	if s.run == "" {
		return ""
	}
	for k, v := range opened.Headers { // the announcement (protocol/README.md §16)
		s.w.Header().Set(k, v)
	}
	return opened.Opening
}

// watch closes the stream when the client goes away while the handler may
// still be running (or blocked): the sidecar forgets it at once, rather than
// at its idle limit (protocol/README.md §14).
func (s *streamWriter) watch(ctx context.Context, done <-chan struct{}) {
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mode == repairing {
			s.buf = nil
			s.abandon()
		}
	}
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == undecided {
		s.writeHeader(http.StatusOK)
	}
	switch s.mode {
	case gone:
		return 0, s.werr
	case closing: // after closeStream's text (passOn)
		s.buf = append(s.buf, b...)
		return len(b), s.werr
	case repairing, detached:
	default:
		return s.w.Write(b)
	}
	s.buf = append(s.buf, b...)
	if s.scan(); s.held > clientLimit {
		s.passOn()
		return len(b), s.writeErr()
	}
	if len(s.buf) >= flushAt {
		s.kick()
		for s.feeding() && s.sending && len(s.buf) >= maxPending {
			s.cond.Wait()
		}
	}
	return len(b), s.writeErr()
}

// feeding: the handler's text goes to the sidecar, whether or not its client
// is still there.
func (s *streamWriter) feeding() bool { return s.mode == repairing || s.mode == detached }

// writeErr is the error the handler's Write and Flush return: none while
// the stream is detached (or being detached), so that the handler goes on
// for a rejoin.
func (s *streamWriter) writeErr() error {
	if s.left && s.mode != gone {
		return nil
	}
	return s.werr
}

// Flush sends every event written so far, repaired, then flushes.
func (s *streamWriter) Flush() { _ = s.FlushError() }

// FlushError is Flush with its error, the form http.ResponseController asks for first.
func (s *streamWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mode == undecided {
		s.writeHeader(http.StatusOK)
	}
	switch s.mode {
	case gone:
		return s.werr
	case closing:
		return s.werr // passOn flushes once it has written the held text
	case detached:
		s.kick()
		return nil
	case repairing:
		if s.kick(); s.sending {
			return s.werr // drain flushes once it has written the repaired text
		}
	}
	return s.flush()
}

func (s *streamWriter) flush() error {
	switch f := s.w.(type) {
	case interface{ FlushError() error }:
		return f.FlushError()
	case http.Flusher:
		f.Flush()
		return nil
	}
	return errors.New("agui-state: the ResponseWriter underneath cannot flush")
}

// Hijack hands the connection over, for a handler that upgrades it; a
// response already repaired as an event stream cannot be.
func (s *streamWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.w.(http.Hijacker)
	if !ok || s.mode == repairing || s.mode == closing {
		return nil, nil, errors.New("agui-state: this response cannot be hijacked")
	}
	s.mode = passing
	return h.Hijack()
}

// kick starts drain if something is ready and it is not running.
func (s *streamWriter) kick() {
	if !s.sending && (s.ready() > 0 || s.poll || s.leaving) {
		s.sending = true
		go s.drain()
	}
}

// drain hands what is ready to the sidecar, one call at a time, and writes
// and flushes the repaired text, until nothing is ready. mu is released
// during each call, so the handler goes on writing.
func (s *streamWriter) drain() {
	s.mu.Lock()
	defer func() {
		s.sending = false
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for s.feeding() {
		if s.leaving {
			s.leaving = false
			s.detach()
			continue
		}
		n := s.ready()
		if n == 0 && !s.poll {
			return
		}
		s.poll = false
		part := string(s.buf[:n])
		s.buf = s.buf[:copy(s.buf, s.buf[n:])]
		s.cut, s.seen = s.cut-n, s.seen-n
		s.cond.Broadcast() // room for a Write held back
		p, id := s.p, s.id
		s.mu.Unlock()
		r, err := s.fix(p, id, part)
		s.mu.Lock()
		if !s.feeding() {
			return // the client went away meanwhile (watch): nothing is worth sending
		}
		if err != nil {
			s.buf = append([]byte(part), s.buf...)
			s.cut, s.seen = s.cut+n, s.seen+n
			if err = s.recover(err); err == nil {
				continue // the part again, on the new sidecar
			}
			s.fail(err)
			return
		}
		s.took(part, r)
		if s.mode == detached {
			if r.Cancel {
				s.cancelRun("nobody rejoined it within the grace")
				return
			}
			continue
		}
		if s.out(r.Text) == nil {
			_ = s.flush() // a client that is gone shows in the next write
		}
		if s.werr != nil {
			s.leave()
		}
	}
}

// out writes repaired text to w; the first error is kept for the handler.
// Once the client has left, the text goes nowhere (the sidecar has logged it).
func (s *streamWriter) out(text string) error {
	if s.left {
		return nil
	}
	if text == "" || s.werr != nil {
		return s.werr
	}
	_, s.werr = io.WriteString(s.w, text)
	return s.werr
}
