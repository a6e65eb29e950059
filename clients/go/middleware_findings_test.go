package aguistate

import (
	"context"
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
		switch f.Outcome {
		case "passed":
			o.passed++
		case "mended":
			o.mended++
		case "discarded":
			o.discarded++
		case "kept":
			o.kept++
		default:
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

// sidecarFindings is every finding of a whole stream fed at once (with the
// middleware's options, from {}), on a stream of its own.
func sidecarFindings(t *testing.T, c *Client, stream string) []StreamFinding {
	t.Helper()
	ctx := context.Background()
	id, err := c.OpenStream(ctx, OpenStreamParams{Own: ownToolState.Own, JoinKeys: true, Framing: "sse"})
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := c.FixStream(ctx, id, stream)
	if err != nil {
		t.Fatal(err)
	}
	closed, err := c.CloseStream(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]StreamFinding{}, fixed.Findings...), closed.Findings...)
}
