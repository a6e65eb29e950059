package aguistate

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A sidecar that stops answering without exiting (SIGSTOP) mid-stream: the
// call it does not answer gives up after repairCallLimit, the sidecar is
// ended, and the response goes on unrepaired, every event the app wrote in
// order; the next request is repaired by a new sidecar. No wall-clock
// figure is asserted: the log line's limit is, and the test's own timeout
// bounds the wait.

// ticking writes the n events of tickEvents, one every 20 ms, each flushed.
func ticking(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range tickEvents(n) {
			_, _ = fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// tickEvents is a run of one message in n-3 parts, each part's delta a
// marker (e007) the test finds in the response, repaired or not.
func tickEvents(n int) []string {
	events := []string{`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`}
	for i := 0; i < n-4; i++ {
		events = append(events, fmt.Sprintf(`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"e%03d"}`, i))
	}
	return append(events, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`)
}

// tickMarkers is a text that marks each of tickEvents(n) alone: its delta, or its type.
func tickMarkers(n int) []string {
	markers := []string{`"RUN_STARTED"`, `"TEXT_MESSAGE_START"`}
	for i := 0; i < n-4; i++ {
		markers = append(markers, fmt.Sprintf(`"e%03d"`, i))
	}
	return append(markers, `"TEXT_MESSAGE_END"`, `"RUN_FINISHED"`)
}

func TestMiddlewareEndsAHungSidecar(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	const n = 100
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sloppy") != "" {
			w.Header().Set("Content-Type", "text/event-stream")
			writeSliced(w, sse(sloppy), 7, true)
			return
		}
		ticking(n)(w, r)
	})

	resp := post(t, ctx, s.URL, `{}`)
	stopped := c.Process()
	t.Cleanup(func() { _ = stopped.Kill() })  // should the test fail before the middleware ends it
	head := readUntil(t, resp.Body, `"e010"`) // ten parts through the repair, then the stop
	if err := stopped.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	everyEvent(t, head+readAll(t, resp.Body), n) // repaired up to the stop, as written after it

	log := logs.String()
	if want := "agui-state: /: the sidecar did not answer fixStream within 5000 ms; it was ended, and the rest of this response goes through unrepaired; the next stream starts a new sidecar"; strings.Count(log, want) != 1 {
		t.Errorf("log %s\nwant once: %s", log, want)
	}

	// The next request: a new sidecar, and the repair as fix writes it.
	if got, want := readAll(t, post(t, ctx, s.URL+"?sloppy=1", `{}`).Body), fixed(t, "{}", sse(sloppy), ownArgs...); got != want {
		t.Errorf("the next request:\n got %q\nwant %q", got, want)
	}
	if c.Process().Pid == stopped.Pid {
		t.Error("the hung sidecar was not replaced")
	}
	if !strings.Contains(logs.String(), "it did not answer fixStream within 5000 ms; killed)); restarted it (pid ") {
		t.Errorf("log %s", logs)
	}
}

// With the sidecar stopped, a call out for one stream holds up no handler's
// writes: neither those of the stream whose client left (its closeStream is
// out, or its detachStream with resume), nor a second stream's. Both handlers
// write every event while the sidecar is still stopped, before the call's
// limit ends it, and the second stream's client gets them all.
func TestMiddlewareWritesGoOnWhileACallHangs(t *testing.T) {
	for _, resume := range []bool{false, true} {
		name, opts, want := "without resume", ownToolState, "closeStream"
		if resume {
			name, opts, want = "with resume", ownResumable, "detachStream"
		}
		t.Run(name, func(t *testing.T) {
			c, ctx := startClient(t), testCtx(t)
			const n = 30
			goOn, written, sent := make(chan struct{}), make(chan string, 2), make(chan struct{}, 1)
			callSent.Store(func(method string) {
				if method == want {
					select {
					case sent <- struct{}{}:
					default:
					}
				}
			})
			t.Cleanup(func() { callSent.Store(func(string) {}) })
			s, logs := serve(t, c, opts, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for i, e := range tickEvents(n) {
					if i == 3 {
						<-goOn
					}
					_, _ = fmt.Fprintf(w, "data: %s\n\n", e)
					w.(http.Flusher).Flush()
				}
				written <- r.URL.Query().Get("name")
			})
			leftCtx, leave := context.WithCancel(ctx)
			a := post(t, leftCtx, s.URL+"?name=a", runBody)
			b := post(t, ctx, s.URL+"?name=b", runBody)
			readUntil(t, a.Body, `"e000"`)
			head := readUntil(t, b.Body, `"e000"`)
			stopped, hung := c.Process(), c.current()
			t.Cleanup(func() { _ = stopped.Kill() }) // should the test fail before the middleware ends it
			if err := stopped.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			leave()
			<-sent // a's call is out to the stopped sidecar
			close(goOn)
			<-written
			<-written
			hung.mu.Lock()
			cause := hung.cause
			hung.mu.Unlock()
			if cause != nil {
				t.Fatalf("the handlers' writes waited for the hung sidecar to be ended (%v): %s", cause, logs)
			}
			everyEvent(t, head+readAll(t, b.Body), n)
		})
	}
}

// everyEvent checks that out holds every event of tickEvents(n), once each, in order.
func everyEvent(t *testing.T, out string, n int) {
	t.Helper()
	at := 0
	for _, marker := range tickMarkers(n) {
		k := strings.Index(out[at:], marker)
		if k < 0 || strings.Count(out, marker) != 1 {
			t.Fatalf("%s missing, out of order or sent twice in %q", marker, out)
		}
		at += k + len(marker)
	}
}

// readUntil reads r until what it read holds marker, and returns it.
func readUntil(t *testing.T, r io.Reader, marker string) string {
	t.Helper()
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), marker) {
		k, err := r.Read(buf)
		if err != nil {
			t.Fatalf("%v before %s, read %q", err, marker, got)
		}
		got = append(got, buf[:k]...)
	}
	return string(got)
}
