package aguistate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// Issue 40: the lifecycle option, and a handler that stops inside its run.
// The repair itself is the sidecar's (test/fixtures/lifecycle/cases.json goes
// through this middleware in test/middleware/go-lifecycle.test.ts); here, what
// the middleware does with it: the option reaches openStream, and when
// closeStream ended the run (its `ended`), the response ends cleanly, a panic
// or not.

// contentAfterEnd is pydantic-ai #3108: content after its message's end.
var contentAfterEnd = []string{
	`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"}`,
	`{"type":"TEXT_MESSAGE_END","messageId":"m1"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"lo"}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
}

// cut is a run the handler stops inside: a message open, no end.
var cut = []string{
	`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
	`{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"}`,
	`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"half an ans"}`,
}

func TestLifecycleOptionIsChecked(t *testing.T) {
	for _, v := range []string{"", "repair", "pass"} {
		if err := (MiddlewareOptions{Lifecycle: v}).Check(nil); err != nil {
			t.Errorf("Lifecycle %q: %v", v, err)
		}
	}
	o := MiddlewareOptions{Lifecycle: "mend"}
	err := o.Check(nil)
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "INVALID_OPTION") || !strings.Contains(err.Error(), `Lifecycle "mend"`) {
		t.Errorf("Check: %v, want INVALID_OPTION naming Lifecycle", err)
	}
	if p := panics(func() { Middleware(nil, o) }); p == nil || !errors.Is(p.(error), ErrInvalidOption) {
		t.Errorf("Middleware: panicked with %v, want ErrInvalidOption", p)
	}
	// Before any process starts: a sidecar that does not exist is not looked for.
	o.Sidecar = Options{Path: "/nonexistent/agui-state"}
	if _, err := NewMiddleware(context.Background(), o); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewMiddleware: %v, want ErrInvalidOption", err)
	}
}

// openStream gets `lifecycle` when it is set, and nothing when it is not.
func TestLifecycleIsSentWhenSet(t *testing.T) {
	for v, want := range map[string]string{"": "", "repair": `"lifecycle":"repair"`, "pass": `"lifecycle":"pass"`} {
		b, err := json.Marshal(OpenStreamParams{Lifecycle: v, NoResume: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := regexp.MustCompile(`"lifecycle":"[a-z]*"`).FindString(string(b)); got != want {
			t.Errorf("Lifecycle %q: %s, want %q in it", v, b, want)
		}
	}
	c := startClient(t)
	stream := sse(contentAfterEnd)
	for _, v := range []string{"", "repair", "pass"} {
		ctx := testCtx(t)
		s, logs := serve(t, c, MiddlewareOptions{NoResume: true, Lifecycle: v}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			writeSliced(w, stream, 7, true)
		})
		want := fixed(t, "{}", stream, "--lifecycle", "pass") // "" leaves it out: the sidecar's default, pass
		if v == "repair" {
			want = fixed(t, "{}", stream, "--lifecycle", "repair")
		}
		if got := readAll(t, post(t, ctx, s.URL, `{"state":{}}`).Body); got != want {
			t.Errorf("Lifecycle %q:\n got %q\nwant %q\n%s", v, got, want, logs)
		}
	}
	if fixed(t, "{}", stream, "--lifecycle", "repair") == stream || fixed(t, "{}", stream, "--lifecycle", "pass") != stream {
		t.Error("fix does not mend this stream under repair alone: the test above shows nothing")
	}
}

// A handler that returns, or panics, inside its run: the response is the run
// ended by the sidecar (what fix writes for the stream that stopped there:
// the closes, then RUN_ERROR INCOMPLETE_STREAM), and it ends cleanly.
func TestARunStoppedInsideEndsCleanly(t *testing.T) {
	c := startClient(t)
	stream := sse(cut)
	want := fixed(t, "{}", stream, "--lifecycle", "repair")
	if !strings.Contains(want, `"code":"INCOMPLETE_STREAM"`) || !strings.HasSuffix(want, "\n\n") {
		t.Fatalf("fix does not end the run: %q", want)
	}
	for _, tc := range []struct {
		name  string
		stop  func()
		log   *regexp.Regexp // the one line of the middleware's
		stack bool
	}{
		{"returns", func() {}, nil, false},
		{"panics", func() { panic("the agent failed") }, regexp.MustCompile(`(?m)^agui-state: /: the handler panicked: the agent failed; the sidecar ended its run \(RUN_ERROR INCOMPLETE_STREAM\), and the response ends cleanly$`), true},
		{"aborts", func() { panic(http.ErrAbortHandler) }, regexp.MustCompile(`(?m)^agui-state: /: the handler aborted \(net/http: abort Handler\); the sidecar ended its run`), false},
	} {
		for _, resume := range []bool{false, true} { // with resume, closeStream is told the stream broke off
			t.Run(fmt.Sprintf("%s, resume %v", tc.name, resume), func(t *testing.T) {
				s, logs := serve(t, c, MiddlewareOptions{NoResume: !resume, Lifecycle: "repair"}, func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					writeSliced(w, stream, 7, true)
					tc.stop()
				})
				body, err := io.ReadAll(post(t, testCtx(t), s.URL, `{"state":{}}`).Body)
				if err != nil {
					t.Fatalf("the response broke off: %v (%q)\n%s", err, body, logs)
				}
				// With resume, the ids out: the opening id block leaves its blank line.
				if got := strings.TrimPrefix(streamEdgeIDLines.ReplaceAllString(string(body), ""), "\n"); got != want {
					t.Errorf("body\n got %q\nwant %q", got, want)
				}
				log := logs.String()
				if tc.log != nil && len(tc.log.FindAllString(log, -1)) != 1 {
					t.Errorf("the log, not one line matching %s: %s", tc.log, log)
				}
				if tc.log == nil && strings.Contains(log, "the handler") {
					t.Errorf("the log: %s", log)
				}
				if strings.Contains(log, "goroutine ") != tc.stack {
					t.Errorf("the log has a stack: %v, want %v: %s", !tc.stack, tc.stack, log)
				}
			})
		}
	}
}

// Without closeStream's ended (pass, the default, or a run that had ended
// before the panic) a panicked handler's response breaks off, as net/http
// does, once everything the handler wrote has gone out repaired: what fix
// writes for it, the RUN_FINISHED repair held back to the answer's end too.
func TestAPanicWithoutEndedBreaksOff(t *testing.T) {
	c := startClient(t)
	for _, tc := range []struct {
		name      string
		lifecycle string
		events    []string
	}{
		{"pass, inside the run", "pass", cut},
		{"the default, inside the run", "", cut},
		{"repair, after the run's end", "repair", contentAfterEnd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := serve(t, c, MiddlewareOptions{NoResume: true, Lifecycle: tc.lifecycle}, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				writeSliced(w, sse(tc.events), 7, true)
				panic(http.ErrAbortHandler)
			})
			body, err := io.ReadAll(post(t, testCtx(t), s.URL, `{"state":{}}`).Body)
			if err == nil {
				t.Errorf("the response ended cleanly: %q", body)
			}
			lifecycle := tc.lifecycle
			if lifecycle == "" {
				lifecycle = "pass"
			}
			if want := fixed(t, "{}", sse(tc.events), "--lifecycle", lifecycle); string(body) != want {
				t.Errorf("body before the break\n got %q\nwant %q", body, want)
			}
			if strings.Contains(string(body), "INCOMPLETE_STREAM") || strings.Contains(logs.String(), "the handler") {
				t.Errorf("the run was ended: %q\n%s", body, logs)
			}
		})
	}
}
