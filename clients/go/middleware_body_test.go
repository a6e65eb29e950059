package aguistate

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// The request body reaches the app as it arrives (protocol/README.md §14,
// classifyRequest's bodyBytes): the middleware reads it only as the app does,
// keeping a copy up to bodyBytes, and reads ahead of the app only at the
// response head, never past bodyBytes.

// countingBody is a request body of size bytes (a pattern that tells every
// offset apart) that counts how much of it the client has read.
type countingBody struct {
	size, read int64 // read: atomic
}

func (b *countingBody) Read(p []byte) (int, error) {
	at := atomic.LoadInt64(&b.read)
	if at >= b.size {
		return 0, io.EOF
	}
	if int64(len(p)) > b.size-at {
		p = p[:b.size-at]
	}
	for i := range p {
		p[i] = byte((at + int64(i)) % 251)
	}
	atomic.AddInt64(&b.read, int64(len(p)))
	return len(p), nil
}

// A 200 MiB upload on a path the middleware handles: the app's first Read
// returns before the client has given more than bodyBytes, and the app reads
// every byte, in order; its event stream is repaired.
func TestMiddlewareTeesABigUpload(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	cl, err := c.ClassifyRequest(ctx, ClassifyRequestParams{Method: "POST", Path: "/agent", Headers: [][2]string{}})
	if err != nil || !cl.Handled || cl.BodyBytes <= 0 {
		t.Fatalf("classifyRequest: %+v %v", cl, err)
	}
	const size = 200 << 20
	body := &countingBody{size: size}
	want := sha256.New()
	if _, err := io.Copy(want, &countingBody{size: size}); err != nil {
		t.Fatal(err)
	}
	var atFirst, n int64 = -1, 0
	sum := sha256.New()
	s, logs := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64<<10)
		for {
			k, err := r.Body.Read(b)
			if atFirst < 0 && k > 0 {
				atFirst = atomic.LoadInt64(&body.read)
			}
			n += int64(k)
			sum.Write(b[:k])
			if err != nil {
				break
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, sse(sloppy), 64, false)
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/agent", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := readAll(t, resp.Body)
	t.Logf("the app's first bytes came when the client had given %d bytes (bodyBytes %d)", atFirst, cl.BodyBytes)
	if atFirst < 0 || atFirst > int64(cl.BodyBytes) {
		t.Errorf("the app's first bytes came when the client had given %d bytes; bodyBytes is %d", atFirst, cl.BodyBytes)
	}
	if n != size || !bytes.Equal(sum.Sum(nil), want.Sum(nil)) {
		t.Errorf("the app read %d bytes (of %d), the same: %v", n, size, bytes.Equal(sum.Sum(nil), want.Sum(nil)))
	}
	if want := fixed(t, "{}", sse(sloppy), ownArgs...); out != want {
		t.Errorf("the stream after a body past bodyBytes:\n got %q\nwant %q", out, want)
	}
	if !strings.Contains(logs.String(), "BODY_TOO_LARGE") {
		t.Errorf("no word of the state the body's size kept from the repair: log %s", logs)
	}
}

// At the head, a body the app has not read to its end is read on, up to
// bodyBytes, for openStream's baseline; the app still reads it all, in order.
func TestMiddlewareReadsOnAtTheHead(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	input := `{"threadId":"t","state":{"todos":["tea"]},"messages":[],"pad":"` + strings.Repeat("é", 40<<10) + `"}`
	var got []byte
	s, _ := serve(t, c, ownToolState, func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 10)
		k, _ := io.ReadFull(r.Body, first)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK) // before the body's end: the middleware reads on
		rest, _ := io.ReadAll(r.Body)
		got = append(first[:k], rest...)
		writeSliced(w, sse(sloppy), 7, true)
	})
	out := readAll(t, post(t, ctx, s.URL+"/agent", input).Body)
	if string(got) != input {
		t.Errorf("the app read %d bytes, not the %d sent", len(got), len(input))
	}
	if want := fixed(t, `{"todos":["tea"]}`, sse(sloppy), ownArgs...); out != want {
		t.Errorf("the baseline is the state of the body read on at the head:\n got %q\nwant %q", out, want)
	}
}

// Options that start a sidecar, given with a Client: CONFLICTING_OPTIONS.
func TestMiddlewareConflictingOptions(t *testing.T) {
	c := startClient(t)
	for _, o := range []MiddlewareOptions{{Store: "memory"}, {DetachGrace: 1}, {Sidecar: Options{Args: []string{"--store", "none"}}}} {
		if err := o.Check(c); !errors.Is(err, ErrConflictingOptions) || !strings.Contains(err.Error(), "CONFLICTING_OPTIONS") {
			t.Errorf("%+v with a client: %v", o, err)
		}
		if p := panics(func() { Middleware(c, o) }); p != ErrConflictingOptions {
			t.Errorf("%+v with a client: Middleware panicked with %v", o, p)
		}
		if err := o.Check(nil); err != nil {
			t.Errorf("%+v without a client: %v", o, err)
		}
	}
	if err := (MiddlewareOptions{Own: []string{"/toolState"}}).Check(c); err != nil {
		t.Error(err)
	}
}
