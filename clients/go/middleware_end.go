package aguistate

import (
	"context"
	"errors"
	"fmt"
)

// How a repaired stream ends (protocol/README.md §14, the lifecycle): the
// handler returns (finish: ended), the repair fails (fail: passing, fail
// open) or the client goes (abandon: ended). Each is called with mu held,
// and releases it during its sidecar calls.

// finish ends the response when the handler returns: what drain has not sent
// goes to the sidecar, then closeStream gives the rest of the output, which
// is written. A handler that panicked (broken) breaks its resumable run off:
// a rejoin then breaks off too, rather than end as if the run were whole. It
// holds the turn from drain's last call to its own last, and makes each call
// without mu. It says whether closeStream ended the run itself (ended, issue
// 40): then the response is a whole, failed run, to be ended cleanly even
// after a panic.
func (s *streamWriter) finish(broken bool) (runEnded bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		defer s.stop() // the handler has returned: nothing waits on its context
	}
	defer s.life.to(ended) // from waiting (no head: net/http writes one) or passing
	if s.cond == nil {     // never opened
		return false
	}
	for s.turn {
		s.cond.Wait()
	}
	if !s.life.feeding() {
		return false
	}
	s.turn = true
	defer func() {
		s.turn = false
		s.cond.Broadcast()
	}()
	for s.life.feeding() {
		if n := s.ready(true); n > 0 {
			part := string(s.buf[:n])
			s.buf = s.buf[n:]
			p, id := s.p, s.id
			s.mu.Unlock()
			r, err := s.fix(p, id, part)
			s.mu.Lock()
			if !s.life.feeding() {
				return false // the client went away meanwhile (watch): nothing is worth sending
			}
			if err != nil {
				s.buf = append([]byte(part), s.buf...)
				if err = s.recover(err); err != nil {
					s.fail(err)
					return false
				}
				continue
			}
			s.took(part, r)
			if s.outFlushed(r.Text) != nil {
				s.abandon()
				return false
			}
			continue
		}
		r, err := s.closeUnlocked(broken)
		if !s.life.feeding() {
			return false
		}
		if err != nil {
			// A new sidecar is fed the replay, or the head and the unanswered
			// tail again (recover), and closed in turn.
			if err = s.recover(err); err != nil {
				s.fail(err)
				return false
			}
			continue
		}
		s.takeTail()
		s.replay = nil
		s.closed(r)
		_ = s.outFlushed(r.Text)
		s.end(ended)
		return r.Ended
	}
	return false
}

// outFlushed writes repaired text and flushes it. finish runs as the handler
// returns or panics; after a panic net/http closes the connection without
// flushing the response's buffer, so text left there (closeStream's: a
// RUN_FINISHED that lifecycle repair held back, say) would never reach the
// client, which gets what the handler wrote before it panicked (§14).
func (s *streamWriter) outFlushed(text string) error {
	if err := s.out(text); err != nil || text == "" || s.life.at != repairing {
		return err
	}
	return s.flush()
}

// fail gives the stream up: what the sidecar has not answered goes on as the
// handler wrote it (the tail of its last `pending` bytes, then what was not
// sent), and so does everything after it. A request whose client has gone is
// not a failure of the repair, and is not logged.
func (s *streamWriter) fail(err error) {
	var exited *ExitError
	var hung *hungError
	// gone: the stream is not the sidecar's any more, and there is nothing to close.
	gone := errors.As(err, &exited) || errors.As(err, &hung) || errors.Is(err, ErrUnknownStream)
	if s.life.at == detached { // the run cannot go on into the log, and nobody reads the output
		s.m.log.Printf("agui-state: %s: the stream repair failed while its client was away (%v); the run is cancelled", s.req.URL.Path, err)
		if gone {
			s.end(ended)
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
	s.end(passing)
	s.passHeld() // before the close below lets the handler's writes through: they come after it
	if !gone {
		_, _ = s.closeUnlocked(true)
	}
}

// passHeld writes what is held, the unanswered tail and what was not sent,
// as the handler wrote it, once the repair has stopped.
func (s *streamWriter) passHeld() {
	raw := append(s.takeTail(), s.buf...)
	s.buf, s.replay = nil, nil
	if s.werr == nil && len(raw) > 0 {
		if _, s.werr = s.w.Write(raw); s.werr == nil {
			_ = s.flush()
		}
	}
}

// abandon closes the stream in the sidecar, its output unwanted: a response
// that did not reach its end, so its run (if resumable) ends as broken off.
// Called with mu held, which it releases during the call.
func (s *streamWriter) abandon() {
	s.end(ended)
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

// end stops the repair, to next: passing (later writes go through as they
// are) or ended; the watch and the heartbeat stop.
func (s *streamWriter) end(next phase) {
	s.life.to(next)
	if s.done != nil {
		close(s.done)
		s.done = nil
	}
}
