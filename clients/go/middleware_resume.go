package aguistate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Resume in the middleware (protocol/README.md §16): the sidecar keeps the
// runs (one implementation, shared by the proxy and every middleware) and
// decides every rule of resume; the middleware is its I/O. It passes the raw
// request and response, keeps a handler going when its client leaves, and
// writes what the sidecar hands back.
//
//   - A stream is opened with the raw request and head (resume on unless
//     NoResume): when the sidecar files it as a run, every event it gives back
//     carries an `id:` line and is logged, and the head it gives carries the
//     announcement.
//   - Detach: the handler runs under a context that the client's disconnect
//     does not cancel (appContext). When the client leaves mid-run, the stream
//     is detached: the handler's writes still go through fixStream, their output
//     to the log only, until the handler returns, or the sidecar says the grace
//     passed with nobody reading (cancel): then the handler's context is
//     cancelled and its writes fail.
//   - Rejoin: a request the sidecar classifies as a rejoin or a reload is
//     answered from the log with rejoinStream and readRejoin, or with the
//     refusal the sidecar decided; the handler is never called for it.

// errRunCancelled is what the handler's writes return once its client left
// and nobody rejoined the run within the grace (its context is cancelled too).
var errRunCancelled = errors.New("agui-state: the client left and the run was cancelled")

// appContext is the handler's context when resume is on: the request's
// values, but cancelled only by stop (a cancelled run, or the handler's
// return), not by the client's disconnect. (context.WithoutCancel is Go
// 1.21; this module supports older Go.)
type appContext struct {
	parent context.Context
	done   chan struct{}
	once   sync.Once
}

func (c *appContext) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *appContext) Done() <-chan struct{}       { return c.done }
func (c *appContext) Value(key any) any           { return c.parent.Value(key) }
func (c *appContext) Err() error {
	select {
	case <-c.done:
		return context.Canceled
	default:
		return nil
	}
}
func (c *appContext) stop() { c.once.Do(func() { close(c.done) }) }

// detachable gives the handler a request whose context outlives its client,
// and watches for the client leaving.
func (s *streamWriter) detachable(r *http.Request) *http.Request {
	app := &appContext{parent: r.Context(), done: make(chan struct{})}
	s.ctx, s.stop = app, app.stop
	go func() {
		select {
		case <-app.done:
		case <-r.Context().Done():
			s.mu.Lock()
			defer s.mu.Unlock()
			if errors.Is(r.Context().Err(), context.DeadlineExceeded) {
				s.cancelRun("") // a deadline an outer handler set is not a client leaving
				return
			}
			s.clientLeft()
		}
	}()
	return r.WithContext(app)
}

// clientLeft: the request's context ended while the handler runs. Called with
// mu held.
func (s *streamWriter) clientLeft() {
	switch s.life.at {
	case repairing:
		s.leave()
	case detached, ended:
	default: // no stream, or one no longer repaired: cancel as before resume
		s.stop()
	}
}

// leave: the client of a repaired stream is gone (its connection closed, or a
// write to it failed). A resumable stream is detached at once (nothing more
// is written to the client, and the handler's writes see no error), and
// drain, which holds the turn to call the sidecar, files it so (detach); any
// other is closed, and its handler cancelled. Called with mu held.
func (s *streamWriter) leave() {
	if s.life.at != repairing {
		return
	}
	if s.run == "" {
		s.abandon()
		if s.stop != nil {
			s.stop()
		}
		return
	}
	s.life.to(detached)
	s.kick(false)
}

// detach files the stream's run as detached (detachStream), for drain, with
// mu released during the call: the handler's writes go on into buf, for
// fixStream once it is detached. No grace (0, or the call failed) ends the run.
func (s *streamWriter) detach() {
	c, p, id := s.c, s.p, s.id
	s.mu.Unlock()
	var r *DetachStreamResult
	err := bounded(context.Background(), p, "detachStream", func(ctx context.Context) (err error) {
		r, err = c.detachStreamOn(ctx, p, id)
		return err
	})
	s.mu.Lock()
	if s.life.at != detached {
		return // cancelled meanwhile
	}
	if err != nil || r.GraceMs <= 0 {
		s.cancelRun("")
		return
	}
	s.grace = r.GraceMs
	s.m.log.Printf("agui-state: %s: the client left mid-run; the run goes on for %v for it to rejoin", s.req.URL.Path, time.Duration(r.GraceMs)*time.Millisecond)
	// The sidecar answers a cancel only in a fixStream reply: ask at least
	// twice per grace, with text "" when the handler wrote nothing.
	every := time.Duration(r.GraceMs) * time.Millisecond / 2
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	go s.heartbeat(every, s.done)
}

// heartbeat has drain call fixStream every so often while the stream is
// detached, until it ends.
func (s *streamWriter) heartbeat(every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			s.mu.Lock()
			if s.life.at == detached {
				s.kick(true)
			}
			s.mu.Unlock()
		}
	}
}

// cancelRun ends a run whose client left: the stream is closed as broken off
// (a rejoin breaks off too), the handler's context is cancelled, and its
// writes fail from now on. Called with mu held, which it releases during
// closeStream, once the stream is gone.
func (s *streamWriter) cancelRun(why string) {
	if why != "" {
		s.m.log.Printf("agui-state: %s: the client left and %s: the handler is cancelled", s.req.URL.Path, why)
	}
	open := s.life.feeding()
	s.end(ended)
	s.buf = nil
	if s.werr == nil {
		s.werr = errRunCancelled
	}
	if s.stop != nil {
		s.stop()
	}
	if open {
		_, _ = s.closeUnlocked(true)
	}
}

// classify asks the sidecar what r is, with the middleware's paths and
// resume; nil when it cannot say (the sidecar cannot be reached, even
// restarted): the request goes to the handler untouched (fail open).
func (m *middleware) classify(r *http.Request) *ClassifyRequestResult {
	if r.URL.Path == "" || r.URL.Path[0] != '/' { // `OPTIONS *`: no path, none the protocol takes
		return nil
	}
	ctx := r.Context()
	p := ClassifyRequestParams{Method: r.Method, Path: r.URL.RequestURI(), Headers: HeaderPairs(r.Header), Paths: m.opts.Paths}
	if m.opts.NoResume {
		p.Resume = new(bool)
	}
	var res *ClassifyRequestResult
	_, _, err := m.onSidecar(ctx, func(c *Client, on *proc) error {
		return bounded(ctx, on, "classifyRequest", func(ctx context.Context) (err error) {
			res, err = c.classifyRequestOn(ctx, on, p)
			return err
		})
	})
	var hung *hungError
	switch {
	case err == nil:
		return res
	case errors.As(err, &hung):
		m.logHung(r.URL.Path, hung, "and the request goes to the handler")
	case errors.Is(err, ErrMethodNotFound) || unknownParam(err): // a sidecar older than protocol 1.2
		if atomic.CompareAndSwapInt32(&m.old, 0, 1) {
			m.log.Printf("agui-state: the sidecar cannot classify requests (%v): it is older than this middleware, and every request goes to the handler untouched", err)
		}
	case r.Context().Err() == nil:
		m.log.Printf("agui-state: %s: the request could not be classified (%v); it goes to the handler", r.URL.Path, err)
	}
	return nil
}

// unknownParam: err is a -32602 for a param the sidecar does not know.
func unknownParam(err error) bool {
	var e *Error
	return errors.As(err, &e) && errors.Is(err, ErrInvalidParams) && e.Reason() == "UNKNOWN_PARAM"
}

// rejoin answers a rejoin or a reload from the sidecar's run log, never
// calling the handler: the status and headers rejoinStream gives, then the
// text of each readRejoin, each page taken by the client before the next is
// asked for; or exactly the refusal the sidecar decided. When the sidecar
// cannot be reached, even restarted, the answer is 410 (204 for a reload)
// with no body, and one line in the log: the client starts a new run. A run that ended as its handler
// ended it ends the response; any other end breaks it off
// (http.ErrAbortHandler), so that the client never takes a cut run for a
// whole one.
func (m *middleware) rejoin(w http.ResponseWriter, r *http.Request, cl *ClassifyRequestResult) {
	ctx, path, kind := r.Context(), r.URL.Path, cl.Kind
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(cl.BodyBytes)))
	var c *Client
	var on *proc
	var res *RejoinStreamResult
	if err == nil {
		cctx, cancel := context.WithTimeout(ctx, rejoinCallLimit)
		p := RejoinStreamParams{Request: &HTTPRequest{Method: r.Method, Path: r.URL.RequestURI(), Headers: HeaderPairs(r.Header), Body: string(body)}}
		c, on, err = m.onSidecar(cctx, func(c *Client, on *proc) (err error) {
			res, err = c.rejoinStreamOn(cctx, on, p)
			return err
		})
		cancel()
	}
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			if a, ok := e.Refusal(); ok {
				answer(w, a.Status, a.Headers, a.Body)
				return
			}
		}
		status := http.StatusGone
		if kind == "reload" {
			status = http.StatusNoContent
		}
		if ctx.Err() == nil {
			m.log.Printf("agui-state: %s: the %s could not be served (%v); answered %d", path, kind, err, status)
		}
		w.WriteHeader(status)
		return
	}
	answer(w, res.Status, res.Headers, "")
	flush(w)
	for {
		cctx, cancel := context.WithTimeout(ctx, rejoinCallLimit)
		rr, err := c.readRejoinOn(cctx, on, ReadRejoinParams{ReadID: res.ReadID})
		cancel()
		if err != nil {
			m.closeRejoin(c, on, res.ReadID)
			if ctx.Err() != nil {
				m.endedEarly(path, "the client left")
				return
			}
			m.endedEarly(path, fmt.Sprintf("readRejoin failed (%v)", err))
			panic(http.ErrAbortHandler)
		}
		if rr.Text != "" {
			if _, err := io.WriteString(w, rr.Text); err != nil {
				if !rr.Done {
					m.closeRejoin(c, on, res.ReadID)
				}
				m.endedEarly(path, "the client left")
				return
			}
			flush(w)
		}
		if rr.Done {
			if rr.End == "finished" {
				return
			}
			m.endedEarly(path, "the run ended "+rr.End)
			// net/http breaks the response off and, for this value, logs no stack trace.
			panic(http.ErrAbortHandler)
		}
	}
}

// endedEarly says, in one line, why a rejoin's answer ended before its run
// did: the run did not finish, the sidecar failed, or the client left.
func (m *middleware) endedEarly(path, why string) {
	m.log.Printf("agui-state: %s: the rejoin's answer ended early: %s", path, why)
}

// closeRejoin forgets a read whose client left, so that it no longer keeps
// the run going past its grace.
func (m *middleware) closeRejoin(c *Client, on *proc, readID string) {
	ctx, cancel := context.WithTimeout(context.Background(), repairCallLimit)
	defer cancel()
	_ = c.closeRejoinOn(ctx, on, readID)
}

// answer writes the head (and body) the sidecar decided, as they are.
func answer(w http.ResponseWriter, status int, headers map[string]string, body string) {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
