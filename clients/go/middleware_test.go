package aguistate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The middleware in front of real net/http handlers (httptest servers), with
// the real sidecar. What it sends is held to `agui-state fix` run on what the
// handler wrote, with the same baseline and flags (protocol/README.md §14:
// the two are the same text however the input is cut).

// sloppy is an event stream with the mistakes of issue 24 §6, and UTF-8
// beyond ASCII: an unescaped key, an append to a missing array, a snapshot
// on every write.
var sloppy = []string{
	`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
	`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{}}}`,
	`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState/raster-ops/dataset","value":"era5 é"}]}`,
	`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"raster-ops/dataset":"era5 é"}}}`,
	`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":"milk ☕ 🗺"}]}`,
	`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
}

func sse(events []string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}

// ownToolState is the repair alone: with resume, every event would carry an
// id, which fix does not write (middleware_resume_test.go tests resume, with
// ownResumable).
var ownToolState = MiddlewareOptions{Own: []string{"/toolState"}, JoinKeys: true, NoResume: true}

// fixed is what `agui-state fix --state <state> args...` writes for stream.
func fixed(t *testing.T, state, stream string, args ...string) string {
	t.Helper()
	bin := os.Getenv("AGUI_STATE_BIN")
	if bin == "" {
		bin = "agui-state"
	}
	if state == "" {
		state = "{}"
	}
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"fix", "--state", file}, args...)...)
	cmd.Stdin = strings.NewReader(stream)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: findings fix could not mend
		t.Fatalf("agui-state fix: %v", err)
	}
	return string(out)
}

// fixedSoFar is what the middleware has sent for the first part of a stream
// while the stream goes on: fix's output for that part, with its lifecycle
// passed whatever AGUI_STATE_LIFECYCLE says (under repair fix ends a run the
// part stops inside, issue 40, which the middleware does only at the
// response's end). The parts these tests cut have no other lifecycle fault.
func fixedSoFar(t *testing.T, state, part string, args ...string) string {
	t.Helper()
	return fixed(t, state, part, append(append([]string(nil), args...), "--lifecycle", "pass")...)
}

// writeSliced writes s in writes of n bytes, flushing after each when flush is set.
func writeSliced(w http.ResponseWriter, s string, n int, flush bool) {
	for len(s) > 0 {
		k := n
		if k > len(s) {
			k = len(s)
		}
		_, _ = io.WriteString(w, s[:k])
		if flush {
			w.(http.Flusher).Flush()
		}
		s = s[k:]
	}
}

// serve starts h behind the middleware on a real server; the log goes to logs.
func serve(t *testing.T, c *Client, opts MiddlewareOptions, h http.HandlerFunc) (*httptest.Server, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	opts.Logger = log.New(logs, "", 0)
	s := httptest.NewServer(Middleware(c, opts)(h))
	t.Cleanup(s.Close)
	return s, logs
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The body reaches the handler byte for byte, and its RunAgentInput.state is
// the baseline: with /todos in it the append passes as it is, without it the
// array is added first.
func TestMiddlewareRepairsFromTheRequestState(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	var got []byte
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Content-Length", "1") // the handler's idea of the length: not the repaired body's
		writeSliced(w, sse(sloppy), 7, true)
	})
	for _, tc := range []struct{ body, state string }{
		{`{"threadId":"t","state":{"selectedLayer":"era5","todos":["tea"]},"messages":[]}`, `{"selectedLayer":"era5","todos":["tea"]}`},
		{`{"threadId":"t","messages":[]}`, `{}`},
		{`{"threadId":"t","state":null}`, `{}`},
		{`{"threadId":"t","state":[1]}`, `{}`},
		{`not json`, `{}`},
	} {
		resp := post(t, ctx, s.URL, tc.body)
		out := readAll(t, resp.Body)
		if string(got) != tc.body {
			t.Errorf("the handler read %q, not the body sent, %q", got, tc.body)
		}
		if resp.Header.Get("Content-Length") != "" || resp.ContentLength != -1 {
			t.Errorf("Content-Length %q went out with a rewritten body", resp.Header.Get("Content-Length"))
		}
		if want := fixed(t, tc.state, sse(sloppy), "--own", "/toolState", "--join-keys"); withoutIDs(out) != want {
			t.Errorf("body %s:\n got %q\nwant %q", tc.body, out, want)
		}
	}
	if strings.Contains(fixed(t, `{"todos":["tea"]}`, sse(sloppy), "--own", "/toolState"), `"path":"/todos","value":[]`) ||
		!strings.Contains(fixed(t, `{}`, sse(sloppy), "--own", "/toolState"), `"path":"/todos","value":[]`) {
		t.Error("the baseline decides the repair: this stream cannot tell the states apart")
	}
	if strings.Contains(logs.String(), "unrepaired") {
		t.Errorf("log: %s", logs)
	}
}

// Event streams (SSE, NDJSON) are repaired; any other response, one already
// encoded, and one on a path not named pass as the handler wrote them.
func TestMiddlewareContentTypes(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	ndjson := strings.Join(sloppy, "\n") + "\n"
	for _, tc := range []struct {
		name, path, contentType, encoding, body string
		repaired                                bool
	}{
		{"sse", "/agent", "text/event-stream", "", sse(sloppy), true},
		{"ndjson", "/agent", "application/x-ndjson", "", ndjson, true},
		{"jsonl", "/agent", "application/jsonl", "", ndjson, true},
		{"json", "/agent", "application/json", "", sse(sloppy), false},
		{"sniffed", "/agent", "", "", sse(sloppy), false},
		{"gzip", "/agent", "text/event-stream", "gzip", sse(sloppy), false},
		{"other path", "/other", "text/event-stream", "", sse(sloppy), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := ownToolState
			opts.Paths = []string{"/agent"}
			s, logs := serve(t, c, opts, func(w http.ResponseWriter, r *http.Request) {
				if tc.contentType != "" {
					w.Header().Set("Content-Type", tc.contentType)
				}
				if tc.encoding != "" {
					w.Header().Set("Content-Encoding", tc.encoding) // a stand-in: its bytes are never decoded here
				}
				if !tc.repaired {
					w.Header().Set("Content-Length", itoa(len(tc.body)))
				}
				writeSliced(w, tc.body, 3, false)
			})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+tc.path, strings.NewReader(`{}`))
			req.Header.Set("Accept-Encoding", "identity")
			resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out := readAll(t, resp.Body)
			want := tc.body
			if tc.repaired {
				want = fixed(t, "{}", tc.body, "--own", "/toolState", "--join-keys")
				if want == tc.body {
					t.Fatal("the stream needs no repair: the case proves nothing")
				}
			} else if got := resp.Header.Get("Content-Length"); got != itoa(len(tc.body)) {
				t.Errorf("Content-Length %q, want the handler's %d", got, len(tc.body))
			}
			if out != want {
				t.Errorf("\n got %q\nwant %q", out, want)
			}
			if tc.encoding != "" && !strings.Contains(logs.String(), "(CONTENT_ENCODED); the response goes through unrepaired") {
				t.Errorf("an encoded event stream went unrepaired without a word: log %q", logs)
			}
		})
	}
}

// Flush sends the events written so far, repaired, while the handler runs.
func TestMiddlewareFlushes(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	want := fixed(t, "{}", sse(sloppy), "--own", "/toolState", "--join-keys")
	first := want[:strings.Index(want, "\n\n")+2]
	next := make(chan struct{})
	var unwrapped bool
	s, _ := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		unwrapped = ok && u.Unwrap() != w
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, sse(sloppy[:1]), 4, false)
		w.(http.Flusher).Flush()
		select {
		case <-next: // the client has read the first event: it was flushed
		case <-ctx.Done():
			return
		}
		writeSliced(w, sse(sloppy[1:]), 4, false)
	})
	resp := post(t, ctx, s.URL, `{}`)
	br := bufio.NewReader(resp.Body)
	var got []byte
	for !bytes.HasSuffix(got, []byte("\n\n")) {
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%v after %q", err, got)
		}
		got = append(got, line...)
	}
	if string(got) != first {
		t.Errorf("first event %q, want %q", got, first)
	}
	close(next)
	if rest := readAll(t, br); string(got)+rest != want {
		t.Errorf("\n got %q\nwant %q", string(got)+rest, want)
	}
	if !unwrapped {
		t.Error("the writer does not Unwrap to the one underneath (http.ResponseController)")
	}
}

// Writes that cut UTF-8 characters, byte by byte and inside a long event
// flushed before its end, reach the sidecar as whole characters; the tail
// kept for failing open is cut where the sidecar's pending count starts,
// bytes that are not UTF-8 counted as the U+FFFD they are sent as.
func TestMiddlewareUTF8Splits(t *testing.T) {
	// At every byte of a text with 1- to 4-byte characters, and bytes that
	// are not UTF-8: what is ready to send ends between characters.
	text := "a é ☕ 🗺 z \xff\xe2\x98 \x80!"
	for cut := 0; cut <= len(text); cut++ {
		sw := &streamWriter{buf: []byte(text[:cut])}
		n := sw.ready(false)
		if cut-n >= utf8.UTFMax || (utf8.ValidString(text[:cut]) && n != cut) || !utf8.ValidString(strings.ToValidUTF8(text[:n], "")) {
			t.Errorf("cut at %d: %d ready", cut, n)
		}
		if n < cut && (utf8.FullRune([]byte(text[n:cut])) || !utf8.RuneStart(text[n])) {
			t.Errorf("cut at %d: %d ready, holding back %q", cut, n, text[n:cut])
		}
		if sw.ready(true) != cut {
			t.Errorf("cut at %d: not all of it ready at the end", cut)
		}
	}
	for _, tc := range []struct {
		sent    string
		pending int
		tail    string
	}{
		{"data: 1\n\ndata: é", 8, "data: é"},
		{"a\xffé", 5, "\xffé"}, // the bad byte went as U+FFFD, 3 bytes
		{"a\xffé", 4, "\xffé"}, // inside the U+FFFD: never less than the count
		{"abc", 0, ""},
		{"abc", 7, "abc"},
	} {
		sw := &streamWriter{}
		sw.keepTail([]byte(tc.sent[:1]), 1)
		sw.keepTail([]byte(tc.sent[1:]), tc.pending)
		if string(sw.tail) != tc.tail {
			t.Errorf("%q, pending %d: tail %q, want %q", tc.sent, tc.pending, sw.tail, tc.tail)
		}
	}

	// The same, end to end: however drain groups what was written, fix's text.
	c, ctx := startClient(t), testCtx(t)
	long := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat("é☕🗺", 64<<10/5) + `"}`
	events := append(append([]string{}, sloppy[:5]...),
		`{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}`, long,
		`{"type":"TEXT_MESSAGE_END","messageId":"m"}`, sloppy[5])
	stream := sse(events)
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		cut := strings.Index(stream, "milk") + 6 // inside ☕
		writeSliced(w, stream[:cut], 1, true)
		// Then all but the end of the long event, cut inside a 🗺 (its text is
		// é☕🗺 over and over, 9 bytes), and flushed.
		content := strings.Index(stream, long) + strings.Index(long, "é")
		at := content + 64<<10 + 8
		if utf8.RuneStart(stream[at]) {
			panic("the cut is not inside a character")
		}
		_, _ = io.WriteString(w, stream[cut:at])
		w.(http.Flusher).Flush()
		writeSliced(w, stream[at:], 4099, false)
	})
	out := readAll(t, post(t, ctx, s.URL, `{}`).Body)
	if want := fixed(t, "{}", stream, "--own", "/toolState", "--join-keys"); out != want {
		t.Errorf("the repaired stream differs from fix's (%d bytes, want %d); U+FFFD in it: %v", len(out), len(want), strings.Contains(out, "\uFFFD"))
	}
	if got, want := loggedOutcomes(t, logs.String()), sidecarOutcomes(t, c, stream); got != want || strings.Count(logs.String(), "\n") != strings.Count(logs.String(), ": findings: ") {
		t.Errorf("log: %s, want only the findings, %v", logs, want)
	}
}

// A client that goes away closes the stream in the sidecar at once, while the
// handler is still blocked.
func TestMiddlewareClosesTheStreamOnDisconnect(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	release, returned := make(chan struct{}), make(chan struct{})
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, sse(sloppy[:2]), 5, true)
		<-release // a handler that does not watch its context
		writeSliced(w, sse(sloppy[2:]), 5, true)
	})
	reqCtx, cancel := context.WithCancel(ctx)
	resp := post(t, reqCtx, s.URL, `{}`)
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("%q %v", line, err)
	}
	if st, err := c.Stats(ctx); err != nil || st.Streams != 1 {
		t.Fatalf("open streams %+v %v, want 1", st, err)
	}
	cancel()
	for { // until the watch has closed it; the test's deadline is the hang guard
		st, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Streams == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the stream is still open after the client went away")
		case <-time.After(5 * time.Millisecond):
		}
	}
	_, err := c.FixStream(ctx, "s1", "")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrUnknownStream) || e.Reason() != "closed" {
		t.Errorf("the stream after the disconnect: %v, want ErrUnknownStream, closed", err)
	}
	close(release)
	<-returned
	if logs.String() != "" {
		t.Errorf("a client that went away is not a failure of the repair: log %s", logs)
	}
}

// clientLimit is how much text of one event @ag-ui/client holds, in UTF-16
// code units, before it fails the run for want of the event's end
// (protocol/README.md §13, SSE_BUFFER_LIMIT).
const clientLimit = 10 << 20

// An event that grows past the client's limit without its end is not held:
// the middleware counts nothing, the sidecar passes the event on itself
// (its pending drops to 0), so what came before it is repaired, and its text
// and the rest go through as the handler wrote them, while the handler is
// still writing, which is what fix writes for the body.
func TestMiddlewarePassesAnEventPastTheClientLimit(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	head := sse([]string{
		`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":"milk"}]}`,
	})
	chunk := strings.Repeat("x", 64<<10)
	chunks := clientLimit/len(chunk) + 4 // past the limit, and on for a few writes
	tail := "\n\n" + sse(sloppy[5:])
	raw := head + "data: " + strings.Repeat(chunk, chunks) + tail
	release := make(chan struct{})
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, head, 16, true)
		_, _ = io.WriteString(w, "data: ")
		for i := 0; i < chunks; i++ {
			_, _ = io.WriteString(w, chunk)
			w.(http.Flusher).Flush()
		}
		select {
		case <-release: // the client has read past the limit: nothing was held for the event's end
		case <-ctx.Done():
			return
		}
		_, _ = io.WriteString(w, tail)
	})
	resp := post(t, ctx, s.URL, `{}`)

	// While the handler waits: the repaired head, then more of the event than
	// the client's limit. A middleware that held the event would leave this
	// read waiting until the test's deadline.
	fixedHead := fixedSoFar(t, "{}", head, "--own", "/toolState", "--join-keys")
	got := make([]byte, len(fixedHead)+len("data: ")+clientLimit+1)
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatalf("while the handler waits: %v", err)
	}
	if mend := strings.Index(string(got), `{"op":"add","path":"/todos","value":[]}`); mend < 0 || mend > strings.Index(string(got), `"path":"/todos/-"`) {
		t.Errorf("the head was not repaired: %q", got[:len(fixedHead)])
	}
	if string(got[:len(fixedHead)]) != fixedHead || strings.Trim(string(got[len(fixedHead)+len("data: "):]), "x") != "" {
		t.Errorf("while the handler waits: %q...", got[:len(fixedHead)+16])
	}

	close(release)
	out := string(got) + readAll(t, resp.Body)
	if want := fixed(t, "{}", raw, "--own", "/toolState", "--join-keys"); out != want {
		t.Errorf("the body differs from fix's: %d bytes, want %d; its end %q, want %q", len(out), len(want), out[len(out)-80:], want[len(want)-80:])
	}
	if strings.Contains(logs.String(), "repair failed") {
		t.Errorf("log %q", logs)
	}
}
