package aguistate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// Resume through the middleware (protocol/README.md §16), with the real
// sidecar keeping the runs: ids on every event, a handler that outlives its
// client, rejoins and reloads served from the log without the handler.

// ownResumable is ownToolState with resume on, as by default.
var ownResumable = MiddlewareOptions{Own: ownToolState.Own, JoinKeys: ownToolState.JoinKeys}

var idLine = regexp.MustCompile(`(?m)^id: [^\n]*\n`)

// opening is a resumable answer's first block (protocol/README.md §16): the
// run's id number 0 alone.
var opening = regexp.MustCompile(`^id: [\w-]+\.0\.[\w-]+\n\n`)

// withoutIDs is a stream with its opening block and id lines taken out: what fix writes.
func withoutIDs(s string) string { return idLine.ReplaceAllString(opening.ReplaceAllString(s, ""), "") }

// stopped is a handler that writes head, waits for goOn, writes tail and
// reports nil on after; or, if its context ends first, tries one more write
// and reports that, with the write's error; calls counts its requests.
type stopped struct {
	head, tail string
	goOn       chan struct{}
	after      chan error
	calls      int32
}

func newStopped(head, tail string) *stopped {
	return &stopped{head: head, tail: tail, goOn: make(chan struct{}), after: make(chan error, 8)}
}

func (h *stopped) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	atomic.AddInt32(&h.calls, 1)
	_, _ = io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	if h.head == "" { // its head at once, before any event
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
	}
	writeSliced(w, h.head, 5, true)
	select {
	case <-h.goOn:
		writeSliced(w, h.tail, 5, true)
		h.after <- nil
	case <-r.Context().Done():
		_, err := io.WriteString(w, "data: {}\n\n")
		h.after <- fmt.Errorf("the handler's context ended (%v); a write after it: %w", r.Context().Err(), err)
	}
}

func postWith(t *testing.T, ctx context.Context, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readEvents reads n SSE events (blocks up to a blank line) from r.
func readEvents(t *testing.T, r *bufio.Reader, n int) string {
	t.Helper()
	var b strings.Builder
	for n > 0 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", b.String(), err)
		}
		b.WriteString(line)
		if line == "\n" {
			n--
		}
	}
	return b.String()
}

const runBody = `{"threadId":"t1","runId":"r1","state":{"selectedLayer":"era5"},"messages":[]}`

// A client that drops mid-run and sends the request again with Last-Event-ID
// gets exactly the events after that id, the handler's tail included, which
// the handler wrote after its client had gone; the handler ran once, and
// what the client got in all is fix's text for the whole body, with an id on
// every event.
func TestMiddlewareResumesADroppedStream(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stream := sse(sloppy)
	cut := strings.Index(stream, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos`) // after the fourth event
	h := newStopped(stream[:cut], stream[cut:])
	s, logs := serve(t, c, ownResumable, h.ServeHTTP)

	reqCtx, leave := context.WithCancel(ctx)
	resp := postWith(t, reqCtx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice"})
	head := readEvents(t, bufio.NewReader(resp.Body), 3) // the opening block, then two events
	if !opening.MatchString(head) {
		t.Fatalf("the answer does not start with its opening block: %q", head)
	}
	ids := regexp.MustCompile(`(?m)^id: (.+)$`).FindAllStringSubmatch(opening.ReplaceAllString(head, ""), -1)
	if len(ids) != 2 || ids[0][1] == ids[1][1] {
		t.Fatalf("ids %q in %q", ids, head)
	}
	leave()
	resp.Body.Close()
	// The rejoin is answered from the log while the handler is still stopped:
	// its first events are the ones the client missed, written before it left.
	again := postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": ids[1][1]})
	if again.StatusCode != http.StatusOK || again.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("rejoin: %d %v", again.StatusCode, again.Header)
	}
	close(h.goOn) // the handler's context was not cancelled: it goes on and ends the run
	rest := readAll(t, again.Body)
	if err := <-h.after; err != nil {
		t.Errorf("the handler did not go on after its client left: %v", err)
	}
	if got, want := withoutIDs(head+rest), fixed(t, `{"selectedLayer":"era5"}`, stream, ownArgs...); got != want {
		t.Errorf("head and rejoin:\n got %q\nwant %q", got, want)
	}
	if events := opening.ReplaceAllString(head, "") + rest; strings.Count(events, "\nid: ")+1 != strings.Count(events, "\n\n") || !strings.HasPrefix(events, "id: ") {
		t.Errorf("an event without its id: %q", head+rest)
	}
	if n := atomic.LoadInt32(&h.calls); n != 1 {
		t.Errorf("the handler ran %d times", n)
	}
	if strings.Contains(logs.String(), "unrepaired") || strings.Contains(logs.String(), "cancel") {
		t.Errorf("log: %s", logs)
	}
}

// A client cut right after the opening block, before the handler's first
// event, holds that block's id alone (number 0): a rejoin from it gets every
// event of the run; the opening went out behind the head, not with the first
// event, and the handler ran once.
func TestMiddlewareRejoinsFromTheOpeningBlock(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stream := sse(sloppy)
	h := newStopped("", stream) // its head, then nothing until goOn
	s, _ := serve(t, c, ownResumable, h.ServeHTTP)

	reqCtx, leave := context.WithCancel(ctx)
	resp := postWith(t, reqCtx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice"})
	head := readEvents(t, bufio.NewReader(resp.Body), 1)
	if !opening.MatchString(head) || len(head) != len(opening.FindString(head)) {
		t.Fatalf("the first block is not the opening block alone: %q", head)
	}
	leave()
	resp.Body.Close()
	id := strings.TrimSuffix(strings.TrimPrefix(head, "id: "), "\n\n")
	forged := postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": forge(id)})
	if forged.StatusCode != http.StatusGone {
		t.Errorf("a number-0 id with another nonce: %d, want 410", forged.StatusCode)
	}
	again := postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": id})
	if again.StatusCode != http.StatusOK {
		t.Fatalf("rejoin from the opening id: %d", again.StatusCode)
	}
	close(h.goOn)
	rest := readAll(t, again.Body)
	if err := <-h.after; err != nil {
		t.Errorf("the handler did not go on after its client left: %v", err)
	}
	if opening.MatchString(rest) {
		t.Errorf("the rejoin's answer has an opening block of its own: %q", rest)
	}
	if got, want := withoutIDs(head+rest), fixed(t, `{"selectedLayer":"era5"}`, stream, ownArgs...); got != want {
		t.Errorf("opening and rejoin:\n got %q\nwant %q", got, want)
	}
	if n := atomic.LoadInt32(&h.calls); n != 1 {
		t.Errorf("the handler ran %d times", n)
	}
}

// forge is id with its last character changed: the same run and number, another nonce.
func forge(id string) string {
	if strings.HasSuffix(id, "A") {
		return id[:len(id)-1] + "B"
	}
	return id[:len(id)-1] + "A"
}

// A reload (POST <path>/connect) with the run's credential gets the thread's
// run from its start, with the request's state and messages as snapshots
// after RUN_STARTED; a thread with no run gets 204, and the handler is called
// for neither. (The table of middleware_edge_test.go holds who may reload.)
func TestMiddlewareServesAReload(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	h := newStopped(sse(sloppy), "")
	close(h.goOn)
	s, _ := serve(t, c, ownResumable, h.ServeHTTP)
	alice := map[string]string{"Authorization": "Bearer alice"}
	run := readAll(t, postWith(t, ctx, s.URL+"/agent", runBody, alice).Body)
	<-h.after
	if !opening.MatchString(run) {
		t.Fatalf("the run does not start with its opening block: %q", run)
	}
	run = opening.ReplaceAllString(run, "") // a reload starts at RUN_STARTED: no opening block (§16)

	reload := postWith(t, ctx, s.URL+"/agent/connect", `{"threadId":"t1","runId":"r2"}`, alice)
	got := readAll(t, reload.Body)
	if reload.StatusCode != http.StatusOK || !strings.Contains(got, `"type":"STATE_SNAPSHOT","snapshot":{"selectedLayer":"era5"}`) || !strings.Contains(got, `"type":"MESSAGES_SNAPSHOT"`) {
		t.Fatalf("reload: %d %q", reload.StatusCode, got)
	}
	if !strings.HasSuffix(got, run[strings.Index(run, "\n\n")+2:]) { // after RUN_STARTED, the prelude, then the run's own events with their ids
		t.Errorf("reload %q does not end with the run's events %q", got, run)
	}
	none := postWith(t, ctx, s.URL+"/agent/connect", `{"threadId":"t2"}`, alice)
	if body := readAll(t, none.Body); none.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("a thread with no run: %d %q, want 204", none.StatusCode, body)
	}
	if n := atomic.LoadInt32(&h.calls); n != 1 {
		t.Errorf("the handler ran %d times", n)
	}
}

// A rejoin with another credential or none, for another thread, with an id
// the log does not hold or a body that is not JSON gets the sidecar's refusal,
// one answer for all, and never reaches the handler; the requester's rejoin
// gets the rest, with a cookie the operator did not name changed.
func TestMiddlewareRefusesARejoinThatIsNotTheRequesters(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	h := newStopped(sse(sloppy), "")
	close(h.goOn)
	s, _ := serve(t, c, ownResumable, h.ServeHTTP)
	run := readAll(t, postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice", "Cookie": "AWSALB=1"}).Body)
	id := regexp.MustCompile(`(?m)^id: (.+)$`).FindStringSubmatch(run)[1]
	answers := map[string]bool{}
	for _, tc := range []struct {
		body   string
		header map[string]string
	}{
		{runBody, map[string]string{"Authorization": "Bearer mallory", "Last-Event-ID": id}},
		{runBody, map[string]string{"Cookie": "AWSALB=1", "Last-Event-ID": id}},
		{strings.Replace(runBody, `"t1"`, `"t2"`, 1), map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": id}},
		{runBody, map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": id[:len(id)-4] + "AAAA"}},
		{`not json`, map[string]string{"Authorization": "Bearer alice", "Last-Event-ID": id}},
	} {
		resp := postWith(t, ctx, s.URL+"/agent", tc.body, tc.header)
		body := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusGone {
			t.Errorf("%v: %d %q, want 410", tc.header, resp.StatusCode, body)
		}
		answers[resp.Header.Get("Content-Type")+" "+body] = true
	}
	if len(answers) != 1 {
		t.Errorf("the refusals differ: %v", answers)
	}
	ok := postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Authorization": "Bearer alice", "Cookie": "AWSALB=2", "Last-Event-ID": id})
	if rest := readAll(t, ok.Body); ok.StatusCode != http.StatusOK || !strings.HasSuffix(run, rest) || rest == "" {
		t.Errorf("the requester's rejoin: %d %q", ok.StatusCode, rest)
	}
	if n := atomic.LoadInt32(&h.calls); n != 1 {
		t.Errorf("the handler ran %d times", n)
	}
}

// A client that leaves and nobody rejoining within the grace: the handler's
// context is cancelled then (not at the disconnect), and its writes fail
// with errRunCancelled; a rejoin after that is broken off or refused, never
// ended as if the run were whole.
func TestMiddlewareCancelsADetachedRunAfterTheGrace(t *testing.T) {
	c, ctx := startClient(t, "--detach-grace", "0.05"), testCtx(t)
	stream := sse(sloppy)
	h := newStopped(stream[:strings.Index(stream, `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos`)], "data: {}\n\n")
	s, logs := serve(t, c, ownResumable, h.ServeHTTP)
	reqCtx, leave := context.WithCancel(ctx)
	resp := postWith(t, reqCtx, s.URL+"/agent", runBody, nil)
	head := readEvents(t, bufio.NewReader(resp.Body), 1)
	leave()
	if err := <-h.after; !errors.Is(err, errRunCancelled) {
		t.Errorf("the handler's write after the grace: %v, want errRunCancelled", err)
	}
	if !strings.Contains(logs.String(), "the client left and nobody rejoined it within the grace: the handler is cancelled") {
		t.Errorf("log: %s", logs)
	}
	m := regexp.MustCompile(`(?m)^id: (.+)$`).FindStringSubmatch(head)
	if m == nil {
		t.Fatalf("no id in %q", head)
	}
	again, err := http.DefaultClient.Do(mustRequest(t, ctx, s.URL+"/agent", runBody, map[string]string{"Last-Event-ID": m[1]}))
	if err == nil {
		defer again.Body.Close()
		if again.StatusCode == http.StatusOK {
			if _, err = io.ReadAll(again.Body); err == nil {
				t.Error("the rejoin of a cancelled run ended as if the run were whole")
			}
		} else if again.StatusCode != http.StatusGone {
			t.Errorf("the rejoin of a cancelled run: %d", again.StatusCode)
		}
	}
}

func mustRequest(t *testing.T, ctx context.Context, url, body string, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

// With NoResume, nothing of the above: no ids, and a request with
// Last-Event-ID or to /connect reaches the handler like any other.
func TestMiddlewareNoResume(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	h := newStopped(sse(sloppy), "")
	close(h.goOn)
	opts := ownResumable
	opts.NoResume = true
	s, _ := serve(t, c, opts, h.ServeHTTP)
	out := readAll(t, postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Last-Event-ID": "x"}).Body)
	if out != fixed(t, `{"selectedLayer":"era5"}`, sse(sloppy), ownArgs...) {
		t.Errorf("got %q", out)
	}
	readAll(t, postWith(t, ctx, s.URL+"/agent/connect", runBody, nil).Body)
	if n := atomic.LoadInt32(&h.calls); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
}

// A sidecar that cannot be started: the run still streams (unrepaired, fail
// open), and so does a request with Last-Event-ID, which nothing can classify:
// both reach the handler, and the log says why.
func TestMiddlewareRejoinWithoutASidecar(t *testing.T) {
	ctx := testCtx(t)
	h := newStopped(sse(sloppy), "")
	close(h.goOn)
	logs := &lockedBuffer{}
	s := httptest.NewServer(Middleware(nil, MiddlewareOptions{Sidecar: Options{Path: "/nonexistent/agui-state"}, Logger: log.New(logs, "", 0)})(h))
	t.Cleanup(s.Close)
	if out := readAll(t, postWith(t, ctx, s.URL+"/agent", runBody, nil).Body); out != sse(sloppy) {
		t.Errorf("the run without its sidecar: %q", out)
	}
	resp := postWith(t, ctx, s.URL+"/agent", runBody, map[string]string{"Last-Event-ID": "a.1.b"})
	if body := readAll(t, resp.Body); resp.StatusCode != http.StatusOK || body != sse(sloppy) {
		t.Errorf("rejoin: %d %q", resp.StatusCode, body)
	}
	if n := atomic.LoadInt32(&h.calls); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
	if !strings.Contains(logs.String(), "agui-state: /agent: the request could not be classified (") {
		t.Errorf("log: %s", logs)
	}
}

// A sidecar that classifies a request as a rejoin or a reload but cannot
// serve it: 410 for the rejoin, 204 for the reload, both with no body and a
// line in the log each, and the handler is called for neither.
func TestMiddlewareRejoinTheSidecarCannotServe(t *testing.T) {
	ctx := testCtx(t)
	h := newStopped(sse(sloppy), "")
	close(h.goOn)
	s, logs := serve(t, startFake(t, "classifier", Options{}), MiddlewareOptions{}, h.ServeHTTP)
	for _, tc := range []struct {
		path   string
		status int
	}{{"/agent", http.StatusGone}, {"/agent/connect", http.StatusNoContent}} {
		resp := postWith(t, ctx, s.URL+tc.path, runBody, map[string]string{"Last-Event-ID": "a.1.b"})
		if body := readAll(t, resp.Body); resp.StatusCode != tc.status || body != "" {
			t.Errorf("%s: %d %q, want %d and no body", tc.path, resp.StatusCode, body, tc.status)
		}
	}
	if n := atomic.LoadInt32(&h.calls); n != 0 {
		t.Errorf("the handler ran %d times", n)
	}
	for _, line := range []string{"agui-state: /agent: the rejoin could not be served (", "agui-state: /agent/connect: the reload could not be served ("} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("log: %s", logs)
		}
	}
}

// The handler's context outlives its client, but keeps the request's values.
func TestMiddlewareHandlerContextKeepsValues(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	var srv any
	s, _ := serve(t, c, ownResumable, func(w http.ResponseWriter, r *http.Request) {
		srv = r.Context().Value(http.ServerContextKey)
	})
	readAll(t, postWith(t, ctx, s.URL, runBody, nil).Body)
	if srv == nil {
		t.Error("the request's context values were lost")
	}
}
