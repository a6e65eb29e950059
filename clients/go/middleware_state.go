package aguistate

// The life of a handled response (protocol/README.md §14, the lifecycle):
// one state machine, the same in every middleware, in place of a mode and
// flags. Every move the streamWriter makes is one of its transitions; a move
// that is not one (a second end, a failure after the end) changes nothing.
//
//	waiting   ─head, a stream─▶ repairing ─client left, resumable─▶ detached
//	    │                          │  │                                 │
//	    └─head, pass or no call─▶ passing ◀─the repair failed (fail open)
//	                               │  └────────────end────────────▶ ended ◀┘
//
// waiting also ends without a head (the app returned having written
// nothing: net/http writes its head), and passing is where a hijacked
// connection goes.

// phase is where a handled response is.
type phase int

const (
	waiting   phase = iota // handled, no response head yet: openStream at the head
	repairing              // an open stream: the app's bytes go through fixStream
	passing                // not repaired (pass, no stream, or failed open): bytes go through as written
	detached               // the client of a resumable stream left: its text still goes through fixStream, the output to the run log only
	ended                  // closed: nothing more is written, and the app's writes fail
)

// moves are the transitions of §14's lifecycle.
var moves = map[phase][]phase{
	waiting:   {repairing, passing, ended},
	repairing: {detached, passing, ended},
	detached:  {ended},
	passing:   {ended},
}

// lifecycle is a response's phase; guarded by the streamWriter's mu.
type lifecycle struct{ at phase }

// to moves to next when that is a transition from here, and says whether it did.
func (l *lifecycle) to(next phase) bool {
	for _, p := range moves[l.at] {
		if p == next {
			l.at = next
			return true
		}
	}
	return false
}

// feeding: the app's text goes to the sidecar, whether or not its client is
// still there.
func (l *lifecycle) feeding() bool { return l.at == repairing || l.at == detached }
