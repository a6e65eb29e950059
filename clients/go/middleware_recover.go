package aguistate

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A stream's life across a crash of the sidecar, and the report of what the
// sidecar did to it.
//
// The sidecar's view of a stream (the mirror of the client's state, its
// activities and messages, the run it is in) is lost with the process. The
// stream methods are deterministic: the text fixStream and closeStream
// return, for the same baseline and flags, is the same however the input was
// cut (protocol/README.md §14). So a new sidecar fed every part the old one
// took, from the same baseline, holds the same view again, and its output for
// that text is exactly what was already sent: it is dropped, and the repair
// goes on where it stopped, as if nothing had happened. That needs the parts
// kept (openStream's replayBytes, or ReplayLimit). Past it, the stream is
// opened again from the request's state and fed its RUN_STARTED alone
// (fixStream's head), then the tail the old one had not answered for, as new
// text: the repair goes on as far as it can without what was lost, and under
// Own a STATE_SNAPSHOT is still an add of each owned member, whole (the first
// owned write the new stream sees, §13), which holds whatever the client
// holds, so the client's own keys are kept.

// outcomes counts findings by what the repair did with them (§13).
type outcomes struct{ passed, mended, discarded, kept int }

func (o outcomes) String() string {
	var parts []string
	for _, c := range []struct {
		n    int
		word string
	}{{o.passed, "passed"}, {o.mended, "mended"}, {o.discarded, "discarded"}, {o.kept, "kept"}} {
		if c.n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.word))
		}
	}
	return strings.Join(parts, ", ")
}

// took keeps a part the sidecar has taken: in the replay while it stays
// within the limit, and in the tail, cut to the reply's pending (§14,
// fixStream), and until the first event is answered, to keep the head from
// (with or without the replay: a stream opened again must start with its
// RUN_STARTED, or the new sidecar's lifecycle repair would send one of its
// own, issue 40); and reports its findings.
func (s *streamWriter) took(part string, r *FixStreamResult) {
	if s.replay != nil {
		s.replay = append(s.replay, part...)
	}
	if s.first != nil {
		s.first = append(s.first, part...)
		if r.Head > 0 {
			s.head = append([]byte(nil), s.first[:rawLen(s.first, r.Head)]...)
		}
		if r.Head > 0 || r.Text != "" {
			s.first = nil // the first event is answered: its head, or none
		}
	}
	if len(s.replay) > s.limit {
		s.replay = nil
	}
	s.keepTail([]byte(part), r.Pending)
	o := outcomes{r.Passed, r.Mended, r.Discarded, r.Kept}
	s.counted = outcomes{s.counted.passed + o.passed, s.counted.mended + o.mended, s.counted.discarded + o.discarded, s.counted.kept + o.kept}
	s.report(o)
	s.each(r.Findings)
}

// keepTail adds part to the tail and cuts it to its last pending bytes as
// the sidecar counts them: UTF-8 bytes of the text it was sent, where each
// byte that is not UTF-8 came as U+FFFD (3 bytes, as encoding/json sends it).
// tailSent is the tail's length so counted, so each byte is read once as it
// comes in and once as it goes.
func (s *streamWriter) keepTail(part []byte, pending int) {
	s.tail = append(s.tail, part...)
	for i := 0; i < len(part); {
		r, n := utf8.DecodeRune(part[i:])
		s.tailSent += sentLen(r, n)
		i += n
	}
	cut := 0
	for cut < len(s.tail) && s.tailSent > pending {
		r, n := utf8.DecodeRune(s.tail[cut:])
		if s.tailSent-sentLen(r, n) < pending {
			break // a character the count starts inside: keep it whole
		}
		s.tailSent -= sentLen(r, n)
		cut += n
	}
	s.tail = s.tail[cut:]
}

// takeTail is the tail, which the stream no longer holds.
func (s *streamWriter) takeTail() []byte {
	t := s.tail
	s.tail, s.tailSent = nil, 0
	return t
}

// rawLen is how many bytes of b the sidecar counts as sent bytes (the
// length of b's start that keepTail's count gives sent).
func rawLen(b []byte, sent int) int {
	i := 0
	for i < len(b) && sent > 0 {
		r, n := utf8.DecodeRune(b[i:])
		sent -= sentLen(r, n)
		i += n
	}
	return i
}

// sentLen is a character's length in the text sent: 3 for a byte that is not UTF-8.
func sentLen(r rune, n int) int {
	if r == utf8.RuneError && n == 1 {
		return 3
	}
	return n
}

// each hands every finding to MiddlewareOptions.Findings, when set.
func (s *streamWriter) each(findings []StreamFinding) {
	if f := s.m.opts.Findings; f != nil {
		for _, finding := range findings {
			f(s.req, finding)
		}
	}
}

// closed reports the findings of the text closeStream answered: the stream's
// counts less those fixStream has reported.
func (s *streamWriter) closed(r *CloseStreamResult) {
	t := r.Summary
	s.report(outcomes{t.Passed - s.counted.passed, t.Mended - s.counted.mended, t.Discarded - s.counted.discarded, t.Kept - s.counted.kept})
	s.each(r.Findings)
}

func (s *streamWriter) report(o outcomes) {
	if o != (outcomes{}) {
		s.m.log.Printf("agui-state: %s: findings: %s", s.req.URL.Path, o)
	}
}

// recover opens the stream again on a new sidecar when err says the one it
// lived on has exited, restarting it unless another response already has,
// and feeds it the replay. When it cannot (another error, a client that has
// gone, maxReopens reached, or the new sidecar failing too) it returns the
// last error, for the caller to fail open with; nil once the stream is open
// again. Called with mu held: the handler's writes wait for it, as they wait
// for the back-pressure of any slow call.
func (s *streamWriter) recover(err error) error {
	var exited *ExitError
	for errors.As(err, &exited) && s.req.Context().Err() == nil && s.reopens < maxReopens {
		s.reopens++
		if err = s.reopen(err); err == nil {
			return nil
		}
	}
	return err
}

// reopen is one try of recover: the error of the new sidecar, if it failed too.
func (s *streamWriter) reopen(why error) error {
	p, err := s.m.restart(s.ctx, s.p, why)
	if err != nil {
		return err
	}
	params := s.params
	// Without the replay the new mirror starts at the request's state, which the
	// client has moved past: its owned members are sent whole again (§13, §14).
	params.Resync = s.replay == nil
	o, err := s.m.openOn(s.ctx, s.c, p, params)
	if err == nil && o.Pass != nil {
		err = fmt.Errorf("the new sidecar passed the stream (%s)", o.Pass.Code)
	}
	if err != nil {
		s.p = p // a process that failed here is the one to restart next
		return err
	}
	// A resumable stream is filed as a new run: the replay below logs what the
	// old one had, so the ids the client gets from here on rejoin this one.
	s.p, s.id, s.counted, s.run = p, o.StreamID, outcomes{}, o.Run
	if s.replay == nil {
		// The run's RUN_STARTED alone, so that the rest is read as the same run
		// (a new stream's first event must open a run, §13), its output dropped:
		// the client has it. Then the tail the old sidecar held, as new text.
		if len(s.head) > 0 {
			if _, err := s.fix(p, s.id, string(s.head)); err != nil {
				return err
			}
		}
		s.buf = append(s.takeTail(), s.buf...)
		s.m.log.Printf("agui-state: %s: the stream was opened again on the new sidecar, from the request's state: what the old one had seen of it was not kept (ReplayLimit), so the rest is repaired without it", s.req.URL.Path)
		return nil
	}
	// Each stream opened again is a line in the log (protocol §14), one that had taken nothing yet too.
	if len(s.replay) > 0 {
		r, err := s.fix(p, s.id, string(s.replay))
		if err != nil {
			return err
		}
		// Its findings were reported as the parts first went through; it holds the tail again.
		s.counted = outcomes{r.Passed, r.Mended, r.Discarded, r.Kept}
		s.keepTail(nil, r.Pending)
	}
	s.m.log.Printf("agui-state: %s: the stream was opened again on the new sidecar, and the %d bytes it had repaired fed to it again: the repair goes on", s.req.URL.Path, len(s.replay))
	return nil
}
