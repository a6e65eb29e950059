package aguistate

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// kill -9 of the sidecar in the middle of streams (issue 32, case 8): the
// sidecar is restarted once for all of them, each stream is opened again on
// the new one, and each is repaired to its end. The handlers stop at a point
// the test names and go on when it says (never sleep-and-hope).

// paused is a handler that writes head, stops until the test resumes it
// (under the name its request's ?pause= gives), then writes tail.
type paused struct {
	head, tail string
	resume     map[string]chan struct{}
}

func (p *paused) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	writeSliced(w, p.head, 5, true)
	if ch := p.resume[r.URL.Query().Get("pause")]; ch != nil {
		<-ch
	}
	writeSliced(w, p.tail, 5, true)
}

// readHead reads exactly want from a response, or fails the test.
func readHead(t *testing.T, body io.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(body, got); err != nil || string(got) != want {
		t.Fatalf("before the kill: %q %v, want %q", got, err, want)
	}
}

var ownArgs = []string{"--own", "/toolState", "--join-keys"}

// Two responses open on one sidecar, one of them stopped inside an event:
// after the kill each is exactly what fix writes for its whole body, though
// the second to go on finds its stream's id (s1) taken on the new sidecar by
// the first's reopened stream. The next request is repaired too.
func TestMiddlewareRecoversFromACrash(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stream := sse(sloppy)
	cut := strings.Index(stream, "raster-ops/dataset\":\"era5") // inside the fourth event
	h := &paused{head: stream[:cut], tail: stream[cut:], resume: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}}
	s, logs := serve(t, c, ownToolState, h.ServeHTTP)
	want := fixed(t, "{}", stream, ownArgs...)
	head := fixedSoFar(t, "{}", sse(sloppy[:3]), ownArgs...)

	pid := c.Process().Pid
	a := post(t, ctx, s.URL+"?pause=a", `{}`) // s1
	readHead(t, a.Body, head)
	b := post(t, ctx, s.URL+"?pause=b", `{}`) // s2
	readHead(t, b.Body, head)
	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	h.resume["b"] <- struct{}{} // b restarts the sidecar and opens its stream again, as s1
	if rest := readAll(t, b.Body); head+rest != want {
		t.Errorf("b after the kill:\n got %q\nwant %q", head+rest, want)
	}
	h.resume["a"] <- struct{}{} // a's s1 is the old process's: a opens its stream again too
	if rest := readAll(t, a.Body); head+rest != want {
		t.Errorf("a after the kill:\n got %q\nwant %q", head+rest, want)
	}
	if c.Process().Pid == pid {
		t.Error("the sidecar was not restarted")
	}
	log := logs.String()
	if n := strings.Count(log, "agui-state: the sidecar exited (agui-state exited: signal: killed); restarted it (pid "+strconv.Itoa(c.Process().Pid)+")"); n != 1 {
		t.Errorf("%d restarts logged, want 1: %s", n, log)
	}
	// Fed again: every byte the old sidecar took, the unfinished fourth event's start too.
	if n := strings.Count(log, "/: the stream was opened again on the new sidecar, and the "+strconv.Itoa(cut)+" bytes it had repaired fed to it again: the repair goes on"); n != 2 {
		t.Errorf("%d reopens logged, want 2: %s", n, log)
	}
	if strings.Contains(log, "unrepaired") {
		t.Errorf("log %s", log)
	}
	// What the middleware changed, reported: per response, the findings of
	// the whole stream, once each (none from the replay).
	if got, want := loggedOutcomes(t, log), 2*sidecarOutcomes(t, c, stream).mended; got.mended != want || got.mended == 0 {
		t.Errorf("logged %v, want %d mended", got, want)
	}

	if out := readAll(t, post(t, ctx, s.URL, `{}`).Body); out != want {
		t.Errorf("the next request:\n got %q\nwant %q", out, want)
	}
}

// Without the replay (ReplayLimit < 0), the stream is opened again from the
// request's state: under Own the next snapshot is an add of /toolState, whole,
// which applies whatever the client holds, and the client's own keys are not
// touched; a snapshot passed as it came would wipe them.
//
// Under Lifecycle "repair" too: the new stream is fed the run's RUN_STARTED
// first (fixStream's head, kept without the replay), so its repair does not
// send one of its own.
func TestMiddlewareRecoversWithoutTheReplay(t *testing.T) {
	for _, lifecycle := range []string{"", "repair"} {
		t.Run("lifecycle "+lifecycle, func(t *testing.T) { recoversWithoutTheReplay(t, lifecycle) })
	}
}

func recoversWithoutTheReplay(t *testing.T, lifecycle string) {
	c, ctx := startClient(t), testCtx(t)
	events := []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"step":1}}}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"step":2,"rows":[1,2]}}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
	}
	h := &paused{head: sse(events[:2]), tail: sse(events[2:]), resume: map[string]chan struct{}{"a": make(chan struct{})}}
	opts := ownToolState
	opts.ReplayLimit = -1
	opts.Lifecycle = lifecycle
	s, logs := serve(t, c, opts, h.ServeHTTP)
	state := `{"selectedLayer":"era5","toolState":{"step":0}}`
	resp := post(t, ctx, s.URL+"?pause=a", `{"state":`+state+`}`)
	readHead(t, resp.Body, fixedSoFar(t, state, h.head, ownArgs...))
	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	h.resume["a"] <- struct{}{}
	rest := readAll(t, resp.Body)
	if want := "data: " + `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{"step":2,"rows":[1,2]}}]}` + "\n\n" + sse(events[3:]); rest != want {
		t.Errorf("after the kill:\n got %q\nwant %q", rest, want)
	}
	if !strings.Contains(logs.String(), "the stream was opened again on the new sidecar, from the request's state") {
		t.Errorf("log %s", logs)
	}
}

// A sidecar that dies again at each restart is restarted maxReopens times for
// a response, then left: the rest goes through as the handler wrote it, with
// one line saying so.
func TestMiddlewareGivesUpOnASidecarThatKeepsDying(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(t.TempDir(), "starts")
	ctx := testCtx(t)
	c, err := Start(ctx, Options{Path: exe, Env: append(os.Environ(), "AGUI_STATE_FAKE=first-only:"+count)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	stream := sse(sloppy)
	cut := strings.Index(stream, "raster-ops/dataset\":\"era5")
	h := &paused{head: stream[:cut], tail: stream[cut:], resume: map[string]chan struct{}{"a": make(chan struct{})}}
	s, logs := serve(t, c, ownToolState, h.ServeHTTP)
	resp := post(t, ctx, s.URL+"?pause=a", `{}`)
	head := fixedSoFar(t, "{}", sse(sloppy[:3]), ownArgs...)
	readHead(t, resp.Body, head)
	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	h.resume["a"] <- struct{}{}
	if got, want := readAll(t, resp.Body), stream[len(sse(sloppy[:3])):]; got != want {
		t.Errorf("after the kill:\n got %q\nwant the rest as written %q", got, want)
	}
	log := logs.String()
	if n := strings.Count(log, "; restarted it"); n != maxReopens {
		t.Errorf("%d restarts, want %d: %s", n, maxReopens, log)
	}
	if n := strings.Count(log, "agui-state exited: exit status 3, after 2 restarts); the rest of this response goes through unrepaired"); n != 1 {
		t.Errorf("log %s", log)
	}
	if b, _ := os.ReadFile(count); string(b) != strings.Repeat("x", 1+maxReopens) {
		t.Errorf("%q starts", b)
	}
}

// firstOnly is the fake sidecar "first-only:FILE": the real one the first
// time (exec'd, so the pid is the one to kill), a process that exits at once
// every later time. FILE counts the starts.
func firstOnly(file string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(4)
	}
	st, _ := f.Stat()
	_, _ = f.WriteString("x")
	_ = f.Close()
	if st.Size() > 0 {
		os.Exit(3)
	}
	bin := os.Getenv("AGUI_STATE_BIN")
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AGUI_STATE_FAKE=") {
			env = append(env, e)
		}
	}
	_ = syscall.Exec(bin, []string{bin}, env)
	os.Exit(5)
}

// loggedOutcomes adds up the middleware's "findings:" lines.
func loggedOutcomes(t *testing.T, log string) outcomes {
	t.Helper()
	var o outcomes
	for _, line := range strings.Split(log, "\n") {
		_, counts, ok := strings.Cut(line, ": findings: ")
		if !ok {
			continue
		}
		for _, c := range strings.Split(counts, ", ") {
			n, word, _ := strings.Cut(c, " ")
			k, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("%q", line)
			}
			if !o.add(word, k) {
				t.Fatalf("%q", line)
			}
		}
	}
	return o
}

// add counts n findings of outcome word; false when word is not one of the four.
func (o *outcomes) add(word string, n int) bool {
	switch word {
	case "passed":
		o.passed += n
	case "mended":
		o.mended += n
	case "discarded":
		o.discarded += n
	case "kept":
		o.kept += n
	default:
		return false
	}
	return true
}

// sidecarOutcomes is the sidecar's own count of a whole stream's findings, fed
// at once, on a stream of its own (sidecarStream).
func sidecarOutcomes(t *testing.T, c *Client, stream string) outcomes {
	t.Helper()
	_, r := sidecarStream(t, c, stream)
	return outcomes{r.Summary.Passed, r.Summary.Mended, r.Summary.Discarded, r.Summary.Kept}
}

// sidecarStream feeds a whole stream at once (with the middleware's options,
// from {}) to a stream of its own, and returns FixStream's and CloseStream's
// results.
func sidecarStream(t *testing.T, c *Client, stream string) (*FixStreamResult, *CloseStreamResult) {
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
	return fixed, closed
}

// Past the replay's limit, the stream is opened again from the request's
// state and fed its RUN_STARTED alone (fixStream's head), then the tail the
// old sidecar had not answered for, as new text: an event the kill cut in two
// is repaired whole, and the client's keys are kept.
func TestMiddlewareRecoversPastTheReplayLimit(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	events := []string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"step":1}}}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"step":2,"rows":[1,2]}}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
	}
	stream := sse(events)
	cut := strings.Index(stream, `"rows"`) // inside the third event
	h := &paused{head: stream[:cut], tail: stream[cut:], resume: map[string]chan struct{}{"a": make(chan struct{})}}
	opts := ownToolState
	opts.ReplayLimit = len(sse(events[:1])) + 8 // past it at the second event
	s, logs := serve(t, c, opts, h.ServeHTTP)
	state := `{"selectedLayer":"era5","toolState":{"step":0}}`
	resp := post(t, ctx, s.URL+"?pause=a", `{"state":`+state+`}`)
	readHead(t, resp.Body, fixedSoFar(t, state, sse(events[:2]), ownArgs...))
	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	h.resume["a"] <- struct{}{}
	rest := readAll(t, resp.Body)
	if want := "data: " + `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{"step":2,"rows":[1,2]}}]}` + "\n\n" + sse(events[3:]); rest != want {
		t.Errorf("after the kill:\n got %q\nwant %q", rest, want)
	}
	// The new stream was fed the run's RUN_STARTED (head): its RUN_FINISHED
	// ends a run it knows, no finding passed.
	if o := loggedOutcomes(t, logs.String()); o.passed != 0 {
		t.Errorf("findings %v: the new stream did not know the run: log %s", o, logs)
	}
	if !strings.Contains(logs.String(), "the stream was opened again on the new sidecar, from the request's state") || strings.Contains(logs.String(), "unrepaired") {
		t.Errorf("log %s", logs)
	}
}
