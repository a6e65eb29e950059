package aguistate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"
)

// These tests drive the real sidecar through the typed API (see client_test.go
// for how the binary is found).

func TestPointers(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	if p, err := c.EscapePointer(ctx, []any{"a/b", "m~n", 0, ""}); err != nil || p != "/a~1b/m~0n/0/" {
		t.Fatalf("escapePointer: %q %v", p, err)
	}
	if p, err := c.EscapePointer(ctx, nil); err != nil || p != "" {
		t.Fatalf("escapePointer of no segments: %q %v", p, err)
	}
	if s, err := c.ParsePointer(ctx, "/a~1b/m~0n/0/"); err != nil || !reflect.DeepEqual(s, []string{"a/b", "m~n", "0", ""}) {
		t.Fatalf("parsePointer: %q %v", s, err)
	}
	if s, err := c.ParsePointer(ctx, ""); err != nil || s == nil || len(s) != 0 {
		t.Fatalf("parsePointer of the root: %#v %v", s, err)
	}
	_, err := c.ParsePointer(ctx, "a/b")
	wantInvalid(t, err, "INVALID_POINTER", "/pointer")
	_, err = c.EscapePointer(ctx, []any{"a", -1})
	wantInvalid(t, err, "INVALID_VALUE", "/path/1")
}

// wantInvalid asserts a -32602 with the given data.reason and data.field.
func wantInvalid(t *testing.T, err error, reason, field string) {
	t.Helper()
	var e *Error
	if !errors.Is(err, ErrInvalidParams) || !errors.As(err, &e) {
		t.Fatalf("want invalid params %s at %q, got %v", reason, field, err)
	}
	if f, ok := e.Field(); e.Reason() != reason || f != field || !ok || e.SkipCode() != "" || e.OpIndex() != -1 {
		t.Fatalf("want reason %s field %q, got reason %q field %q (%v) skip %q index %d; data %s",
			reason, field, e.Reason(), f, ok, e.SkipCode(), e.OpIndex(), e.Data)
	}
}

func TestErrorAccessors(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	var e *Error
	unknown := func(thread, reason string) {
		t.Helper()
		_, err := c.GetState(ctx, GetStateParams{ThreadID: thread})
		if !errors.Is(err, ErrUnknownThread) || !errors.As(err, &e) || e.Reason() != reason {
			t.Fatalf("getState %s: want unknown thread, %q: %v", thread, reason, err)
		}
		if _, ok := e.Field(); ok || e.SkipCode() != "" || e.OpIndex() != -1 {
			t.Fatalf("unknown thread has no field, skip code or index: %s", e.Data)
		}
	}
	unknown("t", "never opened")

	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "t", State: map[string]any{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "t", Atomic: true, Ops: []any{
		Op{Op: "add", Path: "/x", Value: json.RawMessage(`1`)}, Op{Op: "remove", Path: "/gone"}}})
	if !errors.Is(err, ErrPatchFailed) || !errors.As(err, &e) || e.SkipCode() != "PATH_NOT_FOUND" || e.OpIndex() != 1 {
		t.Fatalf("atomic applyOps: want PATH_NOT_FOUND at op 1: %v", err)
	}
	if _, ok := e.Field(); ok || e.Reason() != "" {
		t.Fatalf("patch failed has no field or reason: %s", e.Data)
	}
	_, err = c.DiffState(ctx, DiffStateParams{ThreadID: "t", Path: "/a", Value: 2, IfVersion: IfVersion(7)})
	if !errors.Is(err, ErrVersionConflict) || !errors.As(err, &e) || e.SkipCode() != "" || e.OpIndex() != -1 {
		t.Fatalf("version conflict: %v", err)
	}

	// Field "" names the params object itself, which ok tells apart from no field.
	wantInvalid(t, c.Call(ctx, "getState", []any{"t"}, nil), "POSITIONAL_PARAMS", "")
	wantInvalid(t, c.Call(ctx, "getState", map[string]any{"threadId": "t", "a~b": 1}, nil), "UNKNOWN_PARAM", "/a~0b")
	_, err = c.GetState(ctx, GetStateParams{ThreadID: "t", Path: "/nope/x"})
	wantInvalid(t, err, "PATH_NOT_FOUND", "/path")

	if closed, err := c.CloseThread(ctx, "t"); err != nil || !closed {
		t.Fatalf("closeThread: %v %v", closed, err)
	}
	unknown("t", "closed")

	// Data missing or not an object: the accessors answer "no", never panic.
	for _, bad := range []*Error{{Code: -32002}, {Code: -32002, Data: json.RawMessage(`"x"`)}} {
		if _, ok := bad.Field(); ok || bad.Reason() != "" || bad.SkipCode() != "" || bad.OpIndex() != -1 {
			t.Fatalf("data %q: accessors must answer empty", bad.Data)
		}
	}
}

func TestStats(t *testing.T) {
	c, ctx := startClient(t, "--max-ops", "7", "--max-threads", "2"), testCtx(t)
	s, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Threads != 0 || s.StateBytes != 0 || s.Requests != 1 || s.Evicted != 0 || s.Activities != 0 || s.Version == "" ||
		s.Limits.MaxOps != 7 || s.Limits.MaxThreads != 2 || s.Limits.MaxDepth <= 0 ||
		s.Limits.MaxMessageBytes <= 0 || s.Limits.MaxStateBytes <= 0 || s.Limits.MaxHeapBytes <= 0 {
		t.Fatalf("fresh stats: %+v", s)
	}
	// StatsResult and Limits have a field for every member the sidecar reports.
	var raw json.RawMessage
	if err := c.Call(ctx, "stats", nil, &raw); err != nil {
		t.Fatal(err)
	}
	strict := json.NewDecoder(bytes.NewReader(raw))
	strict.DisallowUnknownFields()
	if err := strict.Decode(&StatsResult{}); err != nil {
		t.Fatalf("stats %s: %v", raw, err)
	}

	for i := 0; i < 3; i++ { // the third evicts the first (--max-threads 2)
		if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: fmt.Sprint("s", i), State: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
	if s, err = c.Stats(ctx); err != nil || s.Threads != 2 || s.Evicted != 1 || s.StateBytes <= 0 || s.Requests != 6 {
		t.Fatalf("stats after 3 threads under --max-threads 2: %+v %v", s, err)
	}
}

// A nil Value sets the key to JSON null: the sidecar holds null, the key stays.
func TestNullValue(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "n", State: json.RawMessage(`{"a":1,"list":[1,2]}`)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		path  string
		value any
		op    string
	}{{"/a", nil, "replace"}, {"/list/1", json.RawMessage("null"), "replace"}, {"/b", nil, "add"}} {
		d, err := c.DiffState(ctx, DiffStateParams{ThreadID: "n", Path: step.path, Value: step.value})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Delta) != 1 || d.Delta[0].Op != step.op || d.Delta[0].Path != step.path || string(d.Delta[0].Value) != "null" {
			t.Fatalf("diffState %s to null: %+v", step.path, d.Delta)
		}
		g, err := c.GetState(ctx, GetStateParams{ThreadID: "n", Path: step.path})
		if err != nil || string(g.State) != "null" {
			t.Fatalf("getState %s after null: %s %v", step.path, g.State, err)
		}
	}
	g, err := c.GetState(ctx, GetStateParams{ThreadID: "n"})
	var state map[string]any
	if err != nil || json.Unmarshal(g.State, &state) != nil ||
		!reflect.DeepEqual(state, map[string]any{"a": nil, "b": nil, "list": []any{1.0, nil}}) {
		t.Fatalf("getState: %s %v", g.State, err)
	}
}

func TestLimitExceeded(t *testing.T) {
	c, ctx := startClient(t, "--max-ops", "2"), testCtx(t)
	_, err := c.Normalize(ctx, NormalizeParams{Ops: []any{
		Op{Op: "remove", Path: "/a"}, Op{Op: "remove", Path: "/b"}, Op{Op: "remove", Path: "/c"}}})
	var e *Error
	if !errors.Is(err, ErrLimitExceeded) || !errors.As(err, &e) || e.SkipCode() != "" {
		t.Fatalf("3 ops with --max-ops 2: %v", err)
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
			if p, err := c.EscapePointer(ctx, []any{"g", fmt.Sprintf("%d/x", i)}); err != nil || p != fmt.Sprintf("/g/%d~1x", i) {
				t.Errorf("%d: escapePointer %v %q", i, err, p)
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

// The README's first Go block is example_test.go, byte for byte, so the code a
// reader copies is the code that compiles and runs (with its output checked).
func TestReadmeIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Each file is a Go block of its own, in this order.
	const fence = "```go\n"
	for _, file := range []string{"example_test.go", "example_middleware_test.go"} {
		example, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		start := bytes.Index(readme, []byte(fence+"package "))
		if start < 0 {
			t.Fatalf("README.md has no Go block for %s", file)
		}
		block := readme[start+len(fence):]
		if end := bytes.Index(block, []byte("```")); end >= 0 {
			block = block[:end]
		}
		if !bytes.Equal(block, example) {
			t.Fatalf("README.md's Go block differs from %s:\n%s", file, block)
		}
		readme = readme[start+len(fence)+len(block):]
	}
}
