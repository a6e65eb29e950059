package aguistate

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// repairCallLimit bounds each call a response waits on: openStream,
// fixStream, closeStream and detachStream, and classifyRequest, which every
// request waits on. Each normally answers in well under a millisecond; 5 s
// leaves a loaded machine room, and keeps what a client waits for a hung
// sidecar under 10 s. readRejoin and rejoinStream, which wait by design
// (protocol/README.md §3, §16), are bounded by rejoinCallLimit instead.
const repairCallLimit = 5 * time.Second

// rejoinCallLimit bounds rejoinStream (which may ask Redis) and readRejoin
// (which waits for the run's next event up to the sidecar's default waitMs).
const rejoinCallLimit = 30 * time.Second

// hungError is a call the sidecar did not answer within repairCallLimit.
type hungError struct{ method string }

func (e *hungError) Error() string {
	return fmt.Sprintf("the sidecar did not answer %s within %d ms", e.method, repairCallLimit.Milliseconds())
}

// bounded makes call, a call on p, within repairCallLimit. Past it the
// sidecar is hung (stopped, or stuck in a loop): it is ended, which fails
// every call pending on it, each other stream's too (they open again on a new
// sidecar, middleware_recover.go), and this call returns a *hungError: its
// response goes on unrepaired (fail open), and the next stream starts a new
// sidecar. A timer, not a deadline on ctx: a call blocked writing its
// request to a sidecar that no longer reads its stdin is not bounded by ctx.
func bounded(ctx context.Context, p *proc, method string, call func(context.Context) error) error {
	if sent, _ := callSent.Load().(func(string)); sent != nil {
		sent(method)
	}
	t := time.AfterFunc(repairCallLimit, func() {
		p.kill(fmt.Errorf("it did not answer %s within %d ms; %s", method, repairCallLimit.Milliseconds(), p.ending()))
	})
	err := call(ctx)
	if !t.Stop() && err != nil {
		return &hungError{method}
	}
	return err
}

// sharedAddress is the shared sidecar's address, "" for a sidecar of the middleware's own.
func (m *middleware) sharedAddress() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		return ""
	}
	return m.c.Address()
}

// callSent, set by a test, is told the method of each bounded call as it is
// made: the test then knows a call is out to a sidecar it has stopped.
var callSent atomic.Value // func(method string)

// logHung is the one line that says a sidecar was ended for not answering,
// and what became of the request (then).
func (m *middleware) logHung(path string, hung *hungError, then string) {
	next := "the next stream starts a new sidecar"
	if m.sharedAddress() != "" {
		next = "the next stream connects to it again"
	}
	m.log.Printf("agui-state: %s: %v; it was ended, %s; %s", path, hung, then, next)
}
