package aguistate

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"unicode/utf8"
)

// maxBatch is the most text one fixStream call carries: what the app wrote
// while a call was out goes in the next one, joined up to this.
const maxBatch = 1 << 20

// maxPending is how much text may wait for the sidecar before Write waits for
// it too: the back-pressure of a handler that writes faster than the stream
// is repaired.
const maxPending = 1 << 20

// errClientGone is what the handler's writes return once its client left a
// stream that was not resumable.
var errClientGone = errors.New("agui-state: the client has gone")

// streamWriter is the ResponseWriter the handler of a handled request writes
// to, through the phases of middleware_state.go. At the head it opens the
// stream with the raw request and head, and writes the head the sidecar
// gives; then each write goes to the sidecar as it comes, and each reply's
// text is written and flushed as it comes. It decides nothing about the text:
// where events end, how long one may grow, is the sidecar's (its reply's
// `pending`: the tail it has not answered for, which is all the writer keeps
// to fail open with).
//
// One goroutine at a time (drain, or finish: the one that holds turn) talks to
// the sidecar, and the handler does not wait for it: what the handler writes
// while a call is out goes in the next call. No sidecar call is made with mu
// held (but recover's, middleware_recover.go), so a sidecar that hangs holds
// up no Write, Flush, heartbeat or watch for its repairCallLimit: each call's
// state is read under mu, the call made without it, and its answer applied
// under mu again, to whatever the stream has become meanwhile.
type streamWriter struct {
	w    http.ResponseWriter
	m    *middleware
	req  *http.Request   // as received (the handler's carries the tee and, with resume, a detachable context)
	ctx  context.Context // the handler's: sidecar calls are bound to it, not to the client's connection
	body *teeBody        // nil: no body
	stop func()          // cancels the handler's context (resume: only when the run is cancelled); nil without resume

	mu       sync.Mutex // everything below, and every write to w
	cond     *sync.Cond // on mu: the turn was given back
	life     lifecycle
	c        *Client
	p        *proc // the process the stream lives on: its id means nothing to another
	id       string
	params   OpenStreamParams // what it was opened with, to open it again (middleware_recover.go)
	run      string           // the run's handle when the stream is resumable (protocol §16), else ""
	buf      []byte           // written by the handler, not yet sent to the sidecar
	tail     []byte           // sent and not yet answered for: the last `pending` bytes of what was sent
	tailSent int              // tail's length as the sidecar counts it (keepTail)
	replay   []byte           // every part the sidecar has taken, to feed a new one; nil once past the limit
	limit    int              // how much replay to keep (openStream's replayBytes, or ReplayLimit)
	head     []byte           // the stream's first event, a RUN_STARTED (fixStream's head): fed to a new sidecar past the limit
	first    []byte           // what the sidecar took before it answered the first event, to cut head from; nil after
	reopens  int              // how many times the stream was opened again after a crash
	counted  outcomes         // the findings fixStream has counted on this process's stream
	turn     bool             // drain or finish is talking to the sidecar
	grace    int              // detached: detachStream's graceMs; 0 until it has answered
	werr     error            // the first error writing to w: the client is gone
	done     chan struct{}    // closed when the repair stops, to stop the watch and the heartbeat
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

// writeHeader is the head: in waiting, openStream with the raw request (its
// body read on up to bodyBytes, teeBody) and the head, with mu released. An
// informational (1xx) head leaves the real one to come; a second call goes
// on as it is, for net/http to report as superfluous.
func (s *streamWriter) writeHeader(code int) {
	if s.life.at != waiting || code < 200 {
		s.w.WriteHeader(code)
		return
	}
	o := s.m.opts
	params := OpenStreamParams{
		Request:  &StreamRequest{Method: s.req.Method, Path: s.req.URL.RequestURI(), Headers: HeaderPairs(s.req.Header)},
		Response: &HTTPResponseHead{Status: code, Headers: HeaderPairs(s.w.Header())},
		Own:      o.Own, Snapshots: o.Snapshots, JoinKeys: o.JoinKeys, NoResume: o.NoResume, Lifecycle: o.Lifecycle,
	}
	s.mu.Unlock()
	if s.body != nil {
		params.Request.Body = s.body.atHead()
	} else {
		params.Request.Body = new(string)
	}
	p, opened, err := s.m.open(s.ctx, params)
	s.mu.Lock()
	path := s.req.URL.Path
	var hung *hungError
	switch {
	case errors.As(err, &hung):
		s.m.logHung(path, hung, "and this response goes through unrepaired")
	case err != nil && s.req.Context().Err() == nil: // a client that went away needs no word
		s.m.log.Printf("agui-state: %s: no stream repair (%v); the response goes through unrepaired", path, err)
	case err != nil:
	case opened.Pass != nil:
		if opened.Pass.Code != "NOT_AN_EVENT_STREAM" { // the common case, not worth a line
			s.m.log.Printf("agui-state: %s: %s (%s); the response goes through unrepaired", path, opened.Pass.Message, opened.Pass.Code)
		}
	default:
		s.repair(p, opened, params)
	}
	if s.life.at == waiting { // no stream: the app's head, as it is
		s.life.to(passing)
	}
	s.w.WriteHeader(code)
	// §16: the opening id block goes right behind the head, flushed, before the
	// handler's first event, so that a client cut before it holds an id.
	if s.life.at == repairing && opened.Opening != "" {
		if s.out(opened.Opening) == nil {
			_ = s.flush()
		}
		if s.werr != nil {
			s.leave() // as drain does: a client already gone leaves a run that goes on
		}
	}
}

// repair takes the stream openStream opened: the head it gives in place of
// the app's, and what to keep for a replay. The phase moves in writeHeader.
func (s *streamWriter) repair(p *proc, o openedStream, params OpenStreamParams) {
	s.c, s.p, s.id, s.params, s.run = s.m.c, p, o.StreamID, params, o.Run
	if o.Baseline != nil {
		s.m.log.Printf("agui-state: %s: %s (%s); the stream is repaired from the state {}", s.req.URL.Path, o.Baseline.Message, o.Baseline.Code)
	}
	if o.Headers != nil { // the whole head, as given (a 1.1 sidecar gives none)
		h := s.w.Header()
		for name := range h {
			delete(h, name)
		}
		for _, kv := range o.Headers {
			h.Add(kv[0], kv[1])
		}
	}
	switch limit := s.m.opts.ReplayLimit; {
	case limit > 0:
		s.limit = limit
	case limit == 0:
		s.limit = o.ReplayBytes
	}
	if s.limit > 0 {
		s.replay = []byte{}
	}
	s.first = []byte{}
	s.cond = sync.NewCond(&s.mu)
	s.done = make(chan struct{})
	s.life.to(repairing)
	if s.stop == nil { // with resume, the watch in detachable does this
		go s.watch(s.req.Context(), s.done)
	}
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
		if s.life.at == repairing {
			s.buf = nil
			s.abandon()
		}
	}
}

func (s *streamWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.at == waiting {
		s.writeHeader(http.StatusOK)
	}
	switch s.life.at {
	case ended:
		return 0, s.gone()
	case passing:
		return s.w.Write(b)
	}
	s.buf = append(s.buf, b...)
	s.kick(false)
	for s.life.feeding() && s.turn && len(s.buf) >= maxPending {
		s.cond.Wait()
	}
	return len(b), s.writeErr()
}

// writeErr is the error the handler's Write and Flush return: none while
// the stream is detached, so that the handler goes on for a rejoin.
func (s *streamWriter) writeErr() error {
	if s.life.at == detached {
		return nil
	}
	return s.werr
}

// gone is the error of a write after the end.
func (s *streamWriter) gone() error {
	if s.werr != nil {
		return s.werr
	}
	return errClientGone
}

// Flush flushes what is written; while a call is out, drain flushes its text
// when it comes (each reply's text is written and flushed as it comes).
func (s *streamWriter) Flush() { _ = s.FlushError() }

// FlushError is Flush with its error, the form http.ResponseController asks for first.
func (s *streamWriter) FlushError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.life.at == waiting {
		s.writeHeader(http.StatusOK)
	}
	switch s.life.at {
	case ended:
		return s.gone()
	case detached:
		return nil
	case repairing:
		if s.kick(false); s.turn {
			return s.werr
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
	if !ok || (s.life.at != waiting && s.life.at != passing) {
		return nil, nil, errors.New("agui-state: this response cannot be hijacked")
	}
	s.life.to(passing)
	return h.Hijack()
}

// ready is how much of buf to send now: up to maxBatch, and not the start
// of a UTF-8 character its last write cut (the sidecar takes text: a cut
// character would reach it as U+FFFD), unless final.
func (s *streamWriter) ready(final bool) int {
	n := len(s.buf)
	if n > maxBatch {
		n = maxBatch
	}
	if final && n == len(s.buf) {
		return n
	}
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s.buf[i]) {
			if !utf8.FullRune(s.buf[i:n]) {
				return i
			}
			break
		}
	}
	return n
}

// kick starts drain if there is something to send, or a detach to make, or
// (poll: the heartbeat of a detached stream) a cancel to learn of, and no
// call is out.
func (s *streamWriter) kick(poll bool) {
	if !s.turn && (s.ready(false) > 0 || poll || (s.life.at == detached && s.grace == 0)) {
		s.turn = true
		go s.drain(poll)
	}
}

// drain hands what is written to the sidecar, one call at a time, and writes
// and flushes each reply's text, until nothing is left. mu is released during
// each call, so the handler goes on writing.
func (s *streamWriter) drain(poll bool) {
	s.mu.Lock()
	defer func() {
		s.turn = false
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	for s.life.feeding() {
		if s.life.at == detached && s.grace == 0 {
			s.detach() // middleware_resume.go
			continue
		}
		n := s.ready(false)
		if n == 0 && !poll {
			return
		}
		poll = false
		part := string(s.buf[:n])
		s.buf = s.buf[:copy(s.buf, s.buf[n:])]
		s.cond.Broadcast() // room for a Write held back
		p, id := s.p, s.id
		s.mu.Unlock()
		r, err := s.fix(p, id, part)
		s.mu.Lock()
		if !s.life.feeding() {
			return // the client went away meanwhile (watch): nothing is worth sending
		}
		if err != nil {
			s.buf = append([]byte(part), s.buf...)
			if err = s.recover(err); err == nil {
				continue // the part again, on the new sidecar
			}
			s.fail(err)
			return
		}
		s.took(part, r)
		if s.life.at == detached {
			if r.Cancel {
				s.cancelRun("nobody rejoined it within the grace")
				return
			}
			continue
		}
		if r.Text != "" && s.out(r.Text) == nil {
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
	if s.life.at != repairing {
		return nil
	}
	if text == "" || s.werr != nil {
		return s.werr
	}
	_, s.werr = io.WriteString(s.w, text)
	return s.werr
}
