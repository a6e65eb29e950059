package aguistate

import (
	"context"
	"errors"
	"fmt"
)

// How a repaired stream ends: the handler returns (finish), an event outgrows
// the client's limit (passOn), the repair fails (fail, fail open) or the
// client goes (abandon). Each is called with mu held, and releases it during
// its sidecar calls.

// passOn gives the repair up at an event that has grown past the client's
// limit without its end: the client fails the run there whatever is sent,
// and the sidecar would pass that text and the rest on as they came. The
// events before it are repaired first; then the stream is closed, on a
// goroutine of its own (passRest), and the event's text and every later
// write go through as the handler wrote them.
func (s *streamWriter) passOn() {
	s.kick()
	for s.sending {
		s.cond.Wait()
	}
	if !s.feeding() {
		return // the repair failed, or the client went away, meanwhile: the held text went with it
	}
	s.m.log.Printf("agui-state: %s: an event passed %d MiB without its end (the client's SSE limit); the rest of this response goes through unrepaired", s.req.URL.Path, clientLimit>>20)
	s.mode, s.sending = closing, true
	go s.passRest()
}

// passRest closes a stream passOn gave up, writes closeStream's text, then
// what the handler wrote, as it wrote it.
func (s *streamWriter) passRest() {
	s.mu.Lock()
	defer func() {
		s.sending = false
		s.cond.Broadcast()
		s.mu.Unlock()
	}()
	if r, err := s.closeUnlocked(false); err == nil {
		s.closed(r)
		_ = s.out(r.Text) // nothing, as it was given only whole events; but its text comes first if any
	}
	s.end()
	s.passHeld()
}

// finish ends the stream when the handler returns: what drain has not sent
// goes to the sidecar, then closeStream gives the rest of the output. A
// handler that panicked (broken) breaks its resumable run off: a rejoin then
// breaks off too, rather than end as if the run were whole. It holds the
// turn (sending) from drain's last call to its own last, and makes each
// call without mu.
func (s *streamWriter) finish(broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		defer s.stop() // the handler has returned: nothing waits on its context
	}
	if s.cond == nil { // never opened
		return
	}
	for s.sending {
		s.cond.Wait()
	}
	if !s.feeding() {
		return
	}
	s.sending, s.leaving = true, false // a client that left now leaves a whole run: nothing to detach
	defer func() {
		s.sending = false
		s.cond.Broadcast()
	}()
	var held []byte // the text of an event the input's end cut off: only closeStream answers it
	for _, whole := range []bool{true, false} {
		n := len(s.buf)
		if whole {
			n = s.ready()
		}
		if n == 0 {
			continue
		}
		part := string(s.buf[:n])
		p, id := s.p, s.id
		s.mu.Unlock()
		r, err := s.fix(p, id, part)
		s.mu.Lock()
		if !s.feeding() {
			return // the client went away meanwhile (watch): nothing is worth sending
		}
		for err != nil {
			if err = s.recover(err); err != nil {
				break
			}
			r, err = s.fix(s.p, s.id, part)
		}
		if err != nil {
			s.fail(err)
			return
		}
		s.took(part, r)
		s.buf = s.buf[n:]
		if r.Text == "" && len(s.buf) == 0 {
			held = []byte(part)
		}
		if s.out(r.Text) != nil {
			s.abandon()
			return
		}
	}
	s.end()
	r, err := s.closeUnlocked(broken && s.run != "")
	// A new sidecar fed the replay holds the held text too; without the
	// replay, it is sent as it came.
	for err != nil && s.replay != nil {
		if err = s.recover(err); err != nil {
			break
		}
		r, err = s.closeUnlocked(false)
	}
	s.replay = nil
	if err != nil {
		s.buf = held
		s.fail(err)
		return
	}
	s.closed(r)
	_ = s.out(r.Text)
}

// fail gives the stream up: what the sidecar has not answered goes on as the
// handler wrote it, and so does everything after it. A request whose client
// has gone is not a failure of the repair, and is not logged.
func (s *streamWriter) fail(err error) {
	var exited *ExitError
	var hung *hungError
	// gone: the stream is not the sidecar's any more, and there is nothing to close.
	gone := errors.As(err, &exited) || errors.As(err, &hung) || errors.Is(err, ErrUnknownStream)
	if s.left { // detached: the run cannot go on into the log, and nobody reads the output
		s.m.log.Printf("agui-state: %s: the stream repair failed while its client was away (%v); the run is cancelled", s.req.URL.Path, err)
		if gone {
			s.end()
		}
		s.cancelRun("")
		return
	}
	switch {
	case hung != nil:
		s.m.logHung(s.req.URL.Path, hung, "and the rest of this response goes through unrepaired")
	case s.req.Context().Err() == nil:
		again := ""
		if s.reopens > 0 {
			again = fmt.Sprintf(", after %d restarts", s.reopens)
		}
		s.m.log.Printf("agui-state: %s: the stream repair failed (%v%s); the rest of this response goes through unrepaired", s.req.URL.Path, err, again)
	}
	s.end()
	s.passHeld() // before the close below lets the handler's writes through: they come after it
	if !gone {
		_, _ = s.closeUnlocked(true)
	}
}

// passHeld writes what is held as the handler wrote it, once the repair has
// stopped.
func (s *streamWriter) passHeld() {
	raw := s.buf
	s.buf = nil
	if s.werr == nil && !s.left {
		if _, s.werr = s.w.Write(raw); s.werr == nil {
			_ = s.flush()
		}
	}
}

// abandon closes the stream in the sidecar, its output unwanted: a response
// that did not reach its end, so its run (if resumable) ends as broken off.
// Called with mu held, which it releases during the call.
func (s *streamWriter) abandon() {
	s.end()
	_, _ = s.closeUnlocked(true)
}

// closeUnlocked closes the stream, broken off or not (for a resumable run),
// with mu released during the call: called with mu held, it returns with mu
// held, and the caller reads the stream's state again. It runs when the
// handler has returned or its client has gone, so no request context bounds
// it: repairCallLimit does.
func (s *streamWriter) closeUnlocked(broken bool) (r *CloseStreamResult, err error) {
	c, p, id, broken := s.c, s.p, s.id, broken && s.run != ""
	s.mu.Unlock()
	defer s.mu.Lock()
	err = bounded(context.Background(), p, "closeStream", func(ctx context.Context) (err error) {
		r, err = c.closeStreamOn(ctx, p, id, broken)
		return err
	})
	return r, err
}

// fix hands part to the stream id on p, within repairCallLimit.
func (s *streamWriter) fix(p *proc, id, part string) (r *FixStreamResult, err error) {
	err = bounded(s.ctx, p, "fixStream", func(ctx context.Context) (err error) {
		r, err = s.c.fixStreamOn(ctx, p, id, part)
		return err
	})
	return r, err
}

// end stops the repair: later writes go through as they are.
func (s *streamWriter) end() {
	if s.mode == repairing || s.mode == detached || s.mode == closing {
		s.mode = passing
	}
	if s.done != nil {
		close(s.done)
		s.done = nil
	}
}
