package aguistate

import "bytes"

// Where the handler's text may be cut for the sidecar: at an event's end,
// so the sidecar never holds a part of an event that only it has.

// ready is how much of buf can go to the sidecar now: its whole events.
func (s *streamWriter) ready() int { return s.cut }

// scan reads what was written since it last ran: where the last whole event
// ends, and how long the unfinished event after it has grown. Each byte is
// read once (one twice: a blank line's two line ends may fall on both sides
// of a write), so an event costs its length however it is written, never a
// new reading of all that is held.
func (s *streamWriter) scan() {
	from := s.cut
	if s.seen-1 > from {
		from = s.seen - 1
	}
	if n := boundary(s.buf[from:], s.framing); n > 0 {
		s.cut, s.seen, s.held = from+n, from+n, 0
	}
	// SSE: a line end right after an event's end is a blank line of its own,
	// or the LF of a CRLF whose CR ended the event; the sidecar reads it as
	// the end of an item too, so it is not counted in the next event.
	for s.framing == "sse" && s.seen == s.cut && s.cut < len(s.buf) && isLineEnd(s.buf[s.cut]) {
		s.cut++
		s.seen++
	}
	s.held += utf16AtLeast(s.buf[s.seen:])
	s.seen = len(s.buf)
}

// boundary is the length of the longest prefix of b that ends where an event
// ends: after a blank line in SSE (the HTML Standard's event stream: a line
// ends at CRLF, LF or CR, so two line ends in a row, other than CR LF, end a
// blank line), after a line end in NDJSON. 0 when none does. A blank line at
// the start of b, after a line end before it, is scan's to find.
func boundary(b []byte, framing string) int {
	if framing == "ndjson" {
		return bytes.LastIndexByte(b, '\n') + 1
	}
	for i := len(b) - 1; i > 0; i-- {
		if isLineEnd(b[i]) && isLineEnd(b[i-1]) && !(b[i-1] == '\r' && b[i] == '\n') {
			return i + 1
		}
	}
	return 0
}

func isLineEnd(c byte) bool { return c == '\n' || c == '\r' }

// utf16AtLeast is a lower bound of b's length in UTF-16 code units, however
// its bytes that are not UTF-8 are read: each byte that is not a
// continuation byte starts a character of its own, whether a whole one, or
// a U+FFFD for a bad sequence (one per byte, as encoding/json sends them to
// the sidecar, or one per sequence, as the client's TextDecoder reads them).
// So it is the rune count for UTF-8, and counts over the parts of a text
// add up to the count of the whole, wherever a write cut a character.
func utf16AtLeast(b []byte) int {
	n := len(b)
	for _, c := range b {
		if c&0xC0 == 0x80 {
			n--
		}
	}
	return n
}
