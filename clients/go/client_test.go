package aguistate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests of this module need only the standard library. Most spawn the real
// sidecar, found as the client finds it: $AGUI_STATE_BIN, else agui-state on
// PATH. Without it they fail rather than skip: the example (example_test.go)
// cannot skip, and a skipped test would read as a pass. The tests that replay
// every event with an independent RFC 6902 library are in ./witness, a module
// of their own so that this one requires nothing.
//
// The tests below use a stand-in sidecar instead (this test binary, run with
// AGUI_STATE_FAKE set): they check how the client copes with replies that a
// correct sidecar never sends, and exactly what it writes on the wire.

func TestMain(m *testing.M) {
	if mode := os.Getenv("AGUI_STATE_FAKE"); strings.HasPrefix(mode, "first-only:") {
		firstOnly(strings.TrimPrefix(mode, "first-only:")) // middleware_recover_test.go
		return
	} else if strings.HasPrefix(mode, "count-starts:") {
		countStarts(strings.TrimPrefix(mode, "count-starts:")) // shared_helpers_test.go
		return
	} else if strings.HasPrefix(mode, "shared-worker:") {
		thread, starts, _ := strings.Cut(strings.TrimPrefix(mode, "shared-worker:"), ":")
		sharedWorker(thread, starts) // shared_helpers_test.go
		return
	} else if mode != "" {
		fakeSidecar(mode)
		return
	}
	os.Exit(m.Run())
}

// fakeSidecar is this test binary run as a stand-in sidecar.
//   - "reverse": read requests in groups of 10 and answer each group last
//     first, echoing params as the result.
//   - "garbage": write a line that is not a response.
//   - "record": copy each request line to stderr and answer it with {}, which
//     every wrapper's result decodes from (as zero values).
//   - "hang": read stdin to its end, then never exit (until killed).
//   - "hold": hold every reply back until "release" (transport_test.go).
//   - "classifier": answer classifyRequest "reload" for a path ending in
//     /connect and "rejoin" for any other, and every other call with an
//     internal error: a sidecar that fails every rejoin it was asked to serve.
func fakeSidecar(mode string) {
	switch mode {
	case "garbage":
		fmt.Println("this is not JSON-RPC")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	case "hang":
		_, _ = io.Copy(io.Discard, os.Stdin)
		time.Sleep(time.Hour)
		return
	case "hold":
		holdSidecar() // transport_test.go
		return
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	var group []map[string]json.RawMessage
	for in.Scan() {
		var req map[string]json.RawMessage
		if json.Unmarshal(in.Bytes(), &req) != nil {
			os.Exit(3)
		}
		if mode == "classifier" {
			classifier(req)
			continue
		}
		if mode == "record" {
			fmt.Fprintf(os.Stderr, "%s\n", in.Bytes())
			fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{}}\n", req["id"])
			continue
		}
		if group = append(group, req); len(group) < 10 {
			continue
		}
		for i := len(group) - 1; i >= 0; i-- {
			fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", group[i]["id"], group[i]["params"])
		}
		group = group[:0]
	}
}

func classifier(req map[string]json.RawMessage) {
	if string(req["method"]) != `"classifyRequest"` {
		fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32603,\"message\":\"internal error\"}}\n", req["id"])
		return
	}
	var p struct{ Path string }
	_ = json.Unmarshal(req["params"], &p)
	kind := "rejoin"
	if strings.HasSuffix(p.Path, "/connect") {
		kind = "reload"
	}
	fmt.Printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"kind\":%q,\"handled\":true,\"bodyBytes\":65536}}\n", req["id"], kind)
}

func startFake(t *testing.T, mode string, opts Options) *Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.Path, opts.Env = exe, append(os.Environ(), "AGUI_STATE_FAKE="+mode)
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// startClient spawns the real sidecar, found as Options{} finds it.
func startClient(t *testing.T, args ...string) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Args: args})
	if err != nil {
		t.Fatalf("%v (set AGUI_STATE_BIN to the agui-state binary)", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestOutOfOrderReplies(t *testing.T) {
	c, ctx := startFake(t, "reverse", Options{}), testCtx(t)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var r struct{ N int }
			if err := c.Call(ctx, "echo", map[string]int{"n": i}, &r); err != nil || r.N != i {
				t.Errorf("call %d got %d, %v", i, r.N, err)
			}
		}(i)
	}
	wg.Wait()
}

func TestGarbageOnStdout(t *testing.T) {
	c, ctx := startFake(t, "garbage", Options{}), testCtx(t)
	_, err := c.Stats(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "unreadable response") {
		t.Fatalf("garbage on stdout: %v", err)
	}
}

// Options.CloseTimeout bounds how long Close waits for a process that does not
// exit when its stdin closes: far less than the 5 s default here.
func TestCloseTimeout(t *testing.T) {
	c := startFake(t, "hang", Options{CloseTimeout: 100 * time.Millisecond})
	err := c.Close()
	var ee *ExitError
	// The error names the wait it gave up after: the option's, not DefaultCloseTimeout.
	if !errors.As(err, &ee) || err.Error() != "agui-state exited: signal: killed (still running 100ms after its input closed; killed)" {
		t.Fatalf("close of a process that does not exit: %v", err)
	}
}

// lockedBuffer is an io.Writer for Options.Stderr that the test can read
// while os/exec's copying goroutine writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A nil Value, a JSON null, is sent as "value": null, never left out: for
// diffState that would be a missing param, and null is a value a key can hold.
// TestNullValue checks that the real sidecar then holds null.
func TestNullOnTheWire(t *testing.T) {
	var requests lockedBuffer
	c, ctx := startFake(t, "record", Options{Stderr: &requests}), testCtx(t)
	for _, v := range []any{nil, json.RawMessage(nil), json.RawMessage("null")} {
		if _, err := c.DiffState(ctx, DiffStateParams{ThreadID: "t", Path: "/a", Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil { // Close waits for the process, and so for its stderr
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(requests.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 requests, got %q", requests.String())
	}
	for i, line := range lines {
		var req struct {
			Method string                     `json:"method"`
			Params map[string]json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("request %d %s: %v", i, line, err)
		}
		if v, ok := req.Params["value"]; req.Method != "diffState" || !ok || string(v) != "null" {
			t.Fatalf("request %d: want diffState with \"value\":null, got %s", i, line)
		}
	}
}
