package aguistate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Resume in the middleware (protocol/README.md §16, issue 34): the sidecar
// keeps the runs (one implementation, shared by the proxy and every
// middleware); the middleware stamps ids through it, keeps a handler going
// when its client leaves, recognises a rejoin and streams what the sidecar
// hands back.
//
// - A stream is opened with `resume` (the request's threadId, path and
//   credentials): every event the sidecar gives back carries an `id:` line and
//   is logged.
// - Detach: the handler runs under a context that the client's disconnect
//   does not cancel (appContext). When the client leaves mid-run, the stream
//   is detached: the handler's writes still go through fixStream, their output
//   to the log only, until the handler returns, or the sidecar says the grace
//   passed with nobody reading (cancel): then the handler's context is
//   cancelled and its writes fail.
// - Rejoin: a POST with Last-Event-ID, or a POST to <path>/connect (a
//   reload), is answered from the log with rejoinStream and readRejoin; the
//   handler is never called for it.

// rejoinWait is readRejoin's waitMs: how long one call waits for an event. A
// client that leaves is seen at once regardless (the call's context).
const rejoinWait = 10_000

// errRunCancelled is what the handler's writes return once its client left
// and nobody rejoined the run within the grace (its context is cancelled too).
var errRunCancelled = errors.New("agui-state: the client left and the run was cancelled")

// gone410 is the body of a refused rejoin, the proxy's (src/proxy/resume.ts):
// a refusal and an unknown run get the same answer.
const gone410 = `{"error":{"code":"resume_unknown","message":"no run to resume from this Last-Event-ID: it is unknown, expired, or not yours; start a new run"}}`

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
	switch s.mode {
	case repairing:
		s.leave()
	case detached, gone:
	default: // no stream, or one no longer repaired: cancel as before resume
		s.stop()
	}
}

// leave: the client of a repaired stream is gone (its connection closed, or a
// write to it failed). A resumable stream is detached; any other is closed,
// and its handler cancelled. Called with mu held.
func (s *streamWriter) leave() {
	if s.mode != repairing {
		return
	}
	if s.run == "" {
		s.abandon()
		if s.stop != nil {
			s.stop()
		}
		return
	}
	s.left = true
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	r, err := s.c.detachStreamOn(ctx, s.p, s.id)
	cancel()
	if err != nil || r.GraceMs <= 0 {
		s.cancelRun("")
		return
	}
	s.mode = detached
	s.m.log.Printf("agui-state: %s: the client left mid-run; the run goes on for %v for it to rejoin", s.req.URL.Path, time.Duration(r.GraceMs)*time.Millisecond)
	// The sidecar answers a cancel only in a fixStream reply: ask at least
	// twice per grace, with text "" when the handler wrote nothing.
	every := time.Duration(r.GraceMs) * time.Millisecond / 2
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	go s.heartbeat(every, s.done)
	s.kick()
}

// heartbeat makes drain call fixStream every so often while the stream is
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
			if s.mode == detached && !s.sending {
				s.poll = true
				s.kick()
			}
			s.mu.Unlock()
		}
	}
}

// cancelRun ends a run whose client left: the stream is closed as broken off
// (a rejoin breaks off too), the handler's context is cancelled, and its
// writes fail from now on. Called with mu held.
func (s *streamWriter) cancelRun(why string) {
	if why != "" {
		s.m.log.Printf("agui-state: %s: the client left and %s: the handler is cancelled", s.req.URL.Path, why)
	}
	if s.feeding() {
		s.end()
		_, _ = s.closeAs(true)
	}
	s.mode, s.left, s.buf = gone, true, nil
	if s.werr == nil {
		s.werr = errRunCancelled
	}
	if s.stop != nil {
		s.stop()
	}
}

// resumeRun is openStream's `resume` for this request and response.
func (s *streamWriter) resumeRun() *ResumeRun {
	if !strings.HasPrefix(s.req.URL.Path, "/") {
		return nil
	}
	headers := map[string]string{}
	for k, v := range s.w.Header() {
		switch k = strings.ToLower(k); k {
		case "set-cookie", "content-length", "content-encoding", "connection", "keep-alive", "transfer-encoding":
		default:
			headers[k] = strings.Join(v, ", ")
		}
	}
	return &ResumeRun{
		ThreadID:      s.input.threadID,
		Path:          s.req.URL.Path,
		Authorization: s.req.Header.Get("Authorization"),
		Cookie:        strings.Join(s.req.Header.Values("Cookie"), "; "),
		Messages:      s.input.messages,
		Headers:       headers,
	}
}

// rejoinOf tells a rejoin from a run: a POST with Last-Event-ID to a path
// the middleware repairs (a dropped stream), or a POST to <path>/connect for
// such a path (a reloaded page). Only POST: AG-UI runs are posted, and an
// EventSource endpoint of the app's own (a GET that reconnects with
// Last-Event-ID) is left to the app.
func (m *middleware) rejoinOf(r *http.Request) (path, lastID string, ok bool) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/") {
		return "", "", false
	}
	if id := r.Header.Get("Last-Event-ID"); id != "" && m.wants(r.URL.Path) {
		return r.URL.Path, id, true
	}
	if p := strings.TrimSuffix(r.URL.Path, "/connect"); p != r.URL.Path {
		if p == "" {
			p = "/"
		}
		if m.wants(p) {
			return p, "", true
		}
	}
	return "", "", false
}

// rejoin answers a rejoin or a reload from the sidecar's run log, never
// calling the handler. Nothing to rejoin is 410 (204 for a reload), as from
// the proxy; so is a sidecar that cannot be reached (fail open: the client
// starts a new run). A run that ended as its handler ended it ends the
// response; any other end breaks it off (http.ErrAbortHandler), so that the
// client never takes a cut run for a whole one.
func (m *middleware) rejoin(w http.ResponseWriter, r *http.Request, path, lastID string) {
	refused := http.StatusGone
	if lastID == "" {
		refused = http.StatusNoContent
	}
	in := baseline(r)
	if in.threadID == "" {
		refuse(w, refused)
		return
	}
	ctx := r.Context()
	p := RejoinStreamParams{
		ThreadID: in.threadID, Path: path, LastEventID: lastID,
		Authorization: r.Header.Get("Authorization"), Cookie: strings.Join(r.Header.Values("Cookie"), "; "),
	}
	c, on, res, err := m.openRejoin(ctx, p)
	if err != nil {
		var e *Error
		status := refused
		if errors.As(err, &e) && e.Status() != 0 {
			status = e.Status()
		} else if ctx.Err() == nil {
			m.log.Printf("agui-state: %s: the rejoin could not be served (%v); answered %d", path, err, refused)
		}
		refuse(w, status)
		return
	}
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(res.Status)
	flush(w)
	wait := rejoinWait
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout+rejoinWait*time.Millisecond)
		rr, err := c.readRejoinOn(cctx, on, ReadRejoinParams{ReadID: res.ReadID, WaitMs: &wait})
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

// openRejoin is rejoinStream on the sidecar, restarting one that has exited
// (with Redis, a new sidecar serves what the old one logged).
func (m *middleware) openRejoin(ctx context.Context, p RejoinStreamParams) (*Client, *proc, *RejoinStreamResult, error) {
	ctx, cancel := withCallTimeout(ctx)
	defer cancel()
	c, on, err := m.client(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := c.rejoinStreamOn(ctx, on, p)
	var exited *ExitError
	if errors.As(err, &exited) {
		if on, err = m.restart(ctx, on, err); err != nil {
			return nil, nil, nil, err
		}
		res, err = c.rejoinStreamOn(ctx, on, p)
	}
	return c, on, res, err
}

// closeRejoin forgets a read whose client left, so that it no longer keeps
// the run going past its grace.
func (m *middleware) closeRejoin(c *Client, on *proc, readID string) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.closeRejoinOn(ctx, on, readID)
}

func refuse(w http.ResponseWriter, status int) {
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, gone410)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
