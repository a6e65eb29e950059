package aguistate

import (
	"net/http"
	"reflect"
	"sync"
	"testing"
)

// Issue 32: every op the repair sends rewritten or leaves out is reported,
// each with its outcome. The middleware hands each finding to
// MiddlewareOptions.Findings, in order: the very findings the sidecar gives
// for the same response fed at once on a stream of its own (FixStream's and
// CloseStream's, which the client now returns too).
func TestMiddlewareHandsOverEveryFinding(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stream := sse(sloppy)
	var mu sync.Mutex
	var got []StreamFinding
	opts := ownToolState
	opts.Findings = func(r *http.Request, f StreamFinding) {
		if r.URL.Path != "/agent" {
			t.Errorf("finding for %q", r.URL.Path)
		}
		mu.Lock()
		got = append(got, f)
		mu.Unlock()
	}
	s, logs := serve(t, c, opts, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, stream, 7, true)
	})
	readAll(t, post(t, ctx, s.URL+"/agent", `{}`).Body)

	want := sidecarFindings(t, c, stream)
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("findings handed over:\n got %+v\nwant %+v", got, want)
	}
	var o outcomes
	for _, f := range want {
		if !o.add(f.Outcome, 1) {
			t.Errorf("outcome %q is not one of the four", f.Outcome)
		}
		if f.Code == "" || f.Message == "" || f.Event < 1 || f.Line < 1 {
			t.Errorf("finding without its code, message or place: %+v", f)
		}
	}
	if o.mended == 0 {
		t.Errorf("the stream should have mended ops: %+v", want)
	}
	if logged := loggedOutcomes(t, logs.String()); logged != o {
		t.Errorf("the log counts %v, the findings %v", logged, o)
	}
}

// sidecarFindings is every finding of a whole stream fed at once, on a stream
// of its own (sidecarStream).
func sidecarFindings(t *testing.T, c *Client, stream string) []StreamFinding {
	t.Helper()
	fixed, closed := sidecarStream(t, c, stream)
	return append(append([]StreamFinding{}, fixed.Findings...), closed.Findings...)
}
