package aguistate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch"
)

// These tests spawn the real sidecar named by AGUI_STATE_BIN and check every
// event it returns with an independent RFC 6902 implementation
// (github.com/evanphx/json-patch): a replay of the events from the state the
// client held at openRun must apply without error and equal getState.

func TestMain(m *testing.M) {
	if mode := os.Getenv("AGUI_STATE_FAKE"); mode != "" {
		fakeSidecar(mode)
		return
	}
	// Be strict: a negative index is not RFC 6902, and the client's library refuses it.
	jsonpatch.SupportNegativeIndices = false
	os.Exit(m.Run())
}

// fakeSidecar is this test binary run as a stand-in sidecar. "reverse": read
// requests in groups of 10 and answer each group last first, echoing params
// as the result. "garbage": write a line that is not a response.
func fakeSidecar(mode string) {
	if mode == "garbage" {
		fmt.Println("this is not JSON-RPC")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return
	}
	in := bufio.NewScanner(os.Stdin)
	var group []map[string]json.RawMessage
	for in.Scan() {
		var req map[string]json.RawMessage
		if json.Unmarshal(in.Bytes(), &req) != nil {
			os.Exit(3)
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

func startFake(t *testing.T, mode string) *Client {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Options{Path: exe, Env: append(os.Environ(), "AGUI_STATE_FAKE="+mode)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestOutOfOrderReplies(t *testing.T) {
	c, ctx := startFake(t, "reverse"), testCtx(t)
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
	c, ctx := startFake(t, "garbage"), testCtx(t)
	err := c.Call(ctx, "stats", nil, nil)
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "unreadable response") {
		t.Fatalf("garbage on stdout: %v", err)
	}
}

func startClient(t *testing.T, args ...string) *Client {
	t.Helper()
	bin := os.Getenv("AGUI_STATE_BIN")
	if bin == "" {
		t.Skip("AGUI_STATE_BIN is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Start(ctx, Options{Path: bin, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	return reflect.DeepEqual(decode(t, a), decode(t, b))
}

// witness is the browser's copy of one thread's state.
type witness struct {
	t      *testing.T
	c      *Client
	thread string
	doc    []byte
}

// open starts a replay at openRun: the client's state, then openRun's events.
func open(t *testing.T, c *Client, thread string, clientState []byte, r *OpenRunResult) *witness {
	w := &witness{t: t, c: c, thread: thread, doc: clientState}
	w.apply(r.Events)
	return w
}

// apply plays events as the client does; a delta that does not apply fails the test.
func (w *witness) apply(events []json.RawMessage) {
	w.t.Helper()
	for _, raw := range events {
		var ev struct {
			Type     string          `json:"type"`
			Snapshot json.RawMessage `json:"snapshot"`
			Delta    json.RawMessage `json:"delta"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			w.t.Fatalf("event %s: %v", raw, err)
		}
		switch ev.Type {
		case "STATE_SNAPSHOT":
			w.doc = ev.Snapshot
		case "STATE_DELTA":
			if strings.Contains(string(ev.Delta), `"op":"test"`) {
				w.t.Fatalf("a test op in an event: %s", ev.Delta)
			}
			patch, err := jsonpatch.DecodePatch(ev.Delta)
			if err != nil {
				w.t.Fatalf("decode delta %s: %v", ev.Delta, err)
			}
			doc, err := patch.Apply(w.doc)
			if err != nil {
				w.t.Fatalf("delta %.500s does not apply to %.500s: %v", ev.Delta, w.doc, err)
			}
			w.doc = doc
		default:
			w.t.Fatalf("unexpected event %s", raw)
		}
	}
}

// check asserts that the replay equals getState, and returns the version.
func (w *witness) check(ctx context.Context) int {
	w.t.Helper()
	g, err := w.c.GetState(ctx, GetStateParams{ThreadID: w.thread})
	if err != nil {
		w.t.Fatal(err)
	}
	// Compared decoded (jsonpatch.Equal panics on a null array element in 5.2.0).
	if !sameJSON(w.t, w.doc, g.State) {
		w.t.Fatalf("replay %.500s != getState %.500s", w.doc, g.State)
	}
	return g.Version
}

func (w *witness) member(name string) any {
	return decode(w.t, w.doc).(map[string]any)[name]
}

func paths(d []Op) string {
	s := make([]string, len(d))
	for i, op := range d {
		s[i] = op.Op + " " + op.Path
	}
	return strings.Join(s, ", ")
}

const clientOwn = `{"selectedLayer":"era5","ui":{"panel":"open"}}`

func TestNamespaceTwoRuns(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{} // the agent server's own store for the thread

	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "ns", RunID: "run-1", State: json.RawMessage(clientOwn), ToolState: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ThreadID != "ns" || r.RunID != "run-1" || paths(r.Delta) != "add /toolState" || string(r.Delta[0].Value) != "{}" || len(r.Events) != 1 {
		t.Fatalf("openRun: %+v", r)
	}
	w := open(t, c, "ns", []byte(clientOwn), r)
	w.check(ctx)

	set := map[string]any{"raster-ops/dataset": "era5", "a~b": 1, "~/x": map[string]any{"k": []int{1, 2}}, "a/b~c": "x"}
	d, err := c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "ns", Set: set})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		stored[k] = v
	}
	// sorted by key in UTF-16 code units: "/" (0x2F) < "r" < "~" (0x7E)
	want := "add /toolState/a~1b~0c, add /toolState/a~0b, add /toolState/raster-ops~1dataset, add /toolState/~0~1x"
	if paths(d.Delta) != want {
		t.Fatalf("delta %q, want %q", paths(d.Delta), want)
	}
	w.apply(d.Events)
	v := w.check(ctx)

	// An equal rewrite (2.0 is 2 in JSON) moves nothing and sends nothing.
	d, err = c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "ns", Set: map[string]any{
		"raster-ops/dataset": "era5", "~/x": json.RawMessage(`{"k":[1,2.0]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Delta) != 0 || len(d.Events) != 0 || d.Version != v {
		t.Fatalf("equal rewrite: %+v (version was %d)", d, v)
	}
	w.check(ctx)

	d, err = c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "ns", Remove: []string{"a~b", "never-there"}})
	if err != nil {
		t.Fatal(err)
	}
	delete(stored, "a~b")
	if paths(d.Delta) != "remove /toolState/a~0b" || d.Version != v+1 {
		t.Fatalf("remove: %+v", d)
	}
	w.apply(d.Events)
	w.check(ctx)

	full := map[string]any{"raster-ops/dataset": "gfs", "a/b~c": "x", "new": true}
	d, err = c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "ns", ToolState: full})
	if err != nil {
		t.Fatal(err)
	}
	stored = full
	if want := "add /toolState/new, add /toolState/raster-ops~1dataset, remove /toolState/~0~1x"; paths(d.Delta) != want {
		t.Fatalf("full map: %q, want %q", paths(d.Delta), want)
	}
	w.apply(d.Events)
	w.check(ctx)

	// Run 2: the client sends the state it holds; the server sends its stored map.
	r, err = c.OpenRun(ctx, OpenRunParams{ThreadID: "ns", RunID: "run-2", State: json.RawMessage(w.doc), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	if paths(r.Delta) != "add /toolState" || len(r.Events) != 1 || !sameJSON(t, r.Delta[0].Value, mustJSON(t, stored)) {
		t.Fatalf("run 2 must open with one add of the whole map: %+v", r)
	}
	w = open(t, c, "ns", w.doc, r)
	w.check(ctx)
	if !reflect.DeepEqual(w.member("toolState"), decode(t, mustJSON(t, stored))) {
		t.Fatalf("client toolState %v != stored %v", w.member("toolState"), stored)
	}
	own := decode(t, []byte(clientOwn)).(map[string]any)
	if !reflect.DeepEqual(w.member("selectedLayer"), own["selectedLayer"]) || !reflect.DeepEqual(w.member("ui"), own["ui"]) {
		t.Fatalf("the client's own keys moved: %s", w.doc)
	}
}

func TestApplyOpsModelStyle(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	const initial = `{"title":"plan"}`
	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "ops", State: json.RawMessage(initial), IfVersion: IfVersion(0)})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "ops", []byte(initial), r)
	w.check(ctx)

	a, err := c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "ops", Ops: []any{
		json.RawMessage(`{"op":"add","path":"/todos/-","value":"milk"}`),
		json.RawMessage(`{"op":"replace","path":"/owner","value":"ana"}`),
		json.RawMessage(`{"op":"remove","path":"/gone"}`),
		Op{Op: "add", Path: "/todos/-", Value: json.RawMessage(`null`)},
		map[string]any{"op": "add", "path": []any{"k/v"}, "value": 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "add /todos, add /todos/-, add /owner, add /todos/-, add /k~1v"; paths(a.Delta) != want {
		t.Fatalf("delta %q, want %q", paths(a.Delta), want)
	}
	if string(a.Delta[0].Value) != "[]" || string(a.Delta[3].Value) != "null" {
		t.Fatalf("delta values: %+v", a.Delta)
	}
	if len(a.Skipped) != 1 || a.Skipped[0].Index != 2 || a.Skipped[0].Code != "PATH_NOT_FOUND" {
		t.Fatalf("skipped: %+v", a.Skipped)
	}
	w.apply(a.Events)
	v := w.check(ctx)

	_, err = c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "ops", Atomic: true, Ops: []any{
		Op{Op: "add", Path: "/x", Value: json.RawMessage(`1`)}, Op{Op: "remove", Path: "/gone"}}})
	var e *Error
	if !errors.Is(err, ErrPatchFailed) || errors.Is(err, ErrUnknownThread) || !errors.As(err, &e) {
		t.Fatalf("atomic: %v", err)
	}
	var data struct {
		Code  string `json:"code"`
		Index int    `json:"index"`
	}
	if json.Unmarshal(e.Data, &data) != nil || data.Code != "PATH_NOT_FOUND" || data.Index != 1 {
		t.Fatalf("atomic data: %s", e.Data)
	}
	if w.check(ctx) != v {
		t.Fatal("a failed atomic call changed the version")
	}

	_, err = c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "ops", IfVersion: IfVersion(0), Ops: []any{Op{Op: "add", Path: "/y", Value: json.RawMessage(`1`)}}})
	if !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("ifVersion 0 on version %d: %v", v, err)
	}
	a, err = c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "ops", IfVersion: IfVersion(v), Ops: []any{Op{Op: "add", Path: "/y", Value: json.RawMessage(`1`)}}})
	if err != nil || a.Version != v+1 {
		t.Fatalf("ifVersion %d: %v %+v", v, err, a)
	}
	w.apply(a.Events)
	w.check(ctx)

	if _, err = c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "ops", Set: map[string]any{"k": 1}}); !errors.Is(err, ErrInvalidParams) {
		t.Fatalf("diffToolState outside namespace mode: %v", err)
	}
	if _, err = c.GetState(ctx, GetStateParams{ThreadID: "never-opened"}); !errors.Is(err, ErrUnknownThread) {
		t.Fatalf("unknown thread: %v", err)
	}
	n, err := c.Normalize(ctx, NormalizeParams{Ops: []any{json.RawMessage(`{"op":"add","path":"/a/-","value":1}`)}})
	if err != nil || paths(n.Delta) != "add /a, add /a/-" || !sameJSON(t, n.State, []byte(`{"a":[1]}`)) {
		t.Fatalf("normalize: %v %+v", err, n)
	}
	if closed, err := c.CloseThread(ctx, "ops"); err != nil || !closed {
		t.Fatalf("closeThread: %v %v", closed, err)
	}
	if _, err = c.GetState(ctx, GetStateParams{ThreadID: "ops"}); !errors.Is(err, ErrUnknownThread) {
		t.Fatalf("closed thread: %v", err)
	}
}

func TestLimitExceeded(t *testing.T) {
	c, ctx := startClient(t, "--max-ops", "2"), testCtx(t)
	_, err := c.Normalize(ctx, NormalizeParams{Ops: []any{
		Op{Op: "remove", Path: "/a"}, Op{Op: "remove", Path: "/b"}, Op{Op: "remove", Path: "/c"}}})
	if !errors.Is(err, ErrLimitExceeded) {
		t.Fatalf("3 ops with --max-ops 2: %v", err)
	}
}

func TestDiffStatePrepend(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	list := make([]int, 1000)
	for i := range list {
		list[i] = i
	}
	initial := mustJSON(t, map[string]any{"list": list})
	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "list", State: json.RawMessage(initial)})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "list", initial, r)
	d, err := c.DiffState(ctx, DiffStateParams{ThreadID: "list", Path: "/list", Value: append([]int{-1}, list...)})
	if err != nil {
		t.Fatal(err)
	}
	if paths(d.Delta) != "add /list/0" || string(d.Delta[0].Value) != "-1" {
		t.Fatalf("prepend to 1000 elements: %d ops (%.200s)", len(d.Delta), paths(d.Delta))
	}
	w.apply(d.Events)
	w.check(ctx)
	d, err = c.DiffState(ctx, DiffStateParams{ThreadID: "list", Path: []any{"list"}, Value: append([]int{-1}, list...)})
	if err != nil || len(d.Events) != 0 {
		t.Fatalf("equal diffState: %v %+v", err, d)
	}
}

func TestConcurrentCalls(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			thread, run := fmt.Sprintf("c-%d", i), fmt.Sprintf("r-%d", i)
			r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: thread, RunID: run, State: map[string]any{"n": i}})
			if err != nil || r.ThreadID != thread || r.RunID != run {
				t.Errorf("%d: openRun %v %+v", i, err, r)
				return
			}
			var p struct{ Pointer string }
			if err := c.Call(ctx, "escapePointer", map[string]any{"path": []any{"g", fmt.Sprintf("%d/x", i)}}, &p); err != nil || p.Pointer != fmt.Sprintf("/g/%d~1x", i) {
				t.Errorf("%d: escapePointer %v %q", i, err, p.Pointer)
			}
			g, err := c.GetState(ctx, GetStateParams{ThreadID: thread, Path: "/n"})
			if err != nil || string(g.State) != fmt.Sprint(i) {
				t.Errorf("%d: getState %v %+v", i, err, g)
			}
		}(i)
	}
	wg.Wait()

	// An expired context returns its error and leaves the client usable.
	expired, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-expired.Done()
	if _, err := c.GetState(expired, GetStateParams{ThreadID: "c-1"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("expired context: %v", err)
	}
	if _, err := c.GetState(ctx, GetStateParams{ThreadID: "c-1"}); err != nil {
		t.Fatal(err)
	}
}

func TestCrashRecovery(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{}
	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "crash", State: json.RawMessage(clientOwn), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "crash", []byte(clientOwn), r)
	step := func(key string, value any) {
		t.Helper()
		stored[key] = value // the server's store is written first: it is the truth
		d, err := c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "crash", Set: map[string]any{key: value}})
		if err != nil {
			t.Fatal(err)
		}
		w.apply(d.Events)
		w.check(ctx)
	}
	step("raster-ops/dataset", "era5")
	step("bounds", []int{0, 0, 10, 10})

	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	stored["raster-ops/dataset"] = "gfs"
	for i := 0; i < 2; i++ { // the call that meets the dead process, and a later one
		_, err = c.DiffToolState(ctx, DiffToolStateParams{ThreadID: "crash", Set: map[string]any{"raster-ops/dataset": "gfs"}})
		var ee *ExitError
		if !errors.As(err, &ee) || err.Error() != "agui-state exited: signal: killed" {
			t.Fatalf("call %d after kill: %v", i, err)
		}
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetState(ctx, GetStateParams{ThreadID: "crash"}); !errors.Is(err, ErrUnknownThread) {
		t.Fatalf("a fresh process must not know the thread: %v", err)
	}
	r, err = c.OpenRun(ctx, OpenRunParams{ThreadID: "crash", State: json.RawMessage(w.doc), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	w = open(t, c, "crash", w.doc, r)
	w.check(ctx)
	step("raster-ops/dataset", "icon")
	step("layers", []string{"t2m", "tp"})
	if !reflect.DeepEqual(w.member("toolState"), decode(t, mustJSON(t, stored))) {
		t.Fatalf("client toolState %v != stored %v", w.member("toolState"), stored)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after restart: %v", err)
	}
	var ee *ExitError
	if _, err := c.GetState(ctx, GetStateParams{ThreadID: "crash"}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "exit status 0") {
		t.Fatalf("call after Close: %v", err)
	}
}
