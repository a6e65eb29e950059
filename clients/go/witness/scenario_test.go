package witness

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

func TestNamespaceTwoRuns(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{} // the agent server's own store for the thread

	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "ns", RunID: "run-1", State: json.RawMessage(clientOwn), ToolState: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ThreadID != "ns" || r.RunID != "run-1" || paths(r.Delta) != "add /toolState" || string(r.Delta[0].Value) != "{}" || len(r.Events) != 1 {
		t.Fatalf("openRun: %+v", r)
	}
	w := open(t, c, "ns", []byte(clientOwn), r)
	w.check(ctx)

	set := map[string]any{"raster-ops/dataset": "era5", "a~b": 1, "~/x": map[string]any{"k": []int{1, 2}}, "a/b~c": "x"}
	d, err := c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ns", Set: set})
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
	d, err = c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ns", Set: map[string]any{
		"raster-ops/dataset": "era5", "~/x": json.RawMessage(`{"k":[1,2.0]}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Delta) != 0 || len(d.Events) != 0 || d.Version != v {
		t.Fatalf("equal rewrite: %+v (version was %d)", d, v)
	}
	w.check(ctx)

	d, err = c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ns", Remove: []string{"a~b", "never-there"}})
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
	d, err = c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ns", ToolState: full})
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
	r, err = c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "ns", RunID: "run-2", State: json.RawMessage(w.doc), ToolState: stored})
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
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "ops", State: json.RawMessage(initial), IfVersion: aguistate.IfVersion(0)})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "ops", []byte(initial), r)
	w.check(ctx)

	a, err := c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "ops", Ops: []any{
		json.RawMessage(`{"op":"add","path":"/todos/-","value":"milk"}`),
		json.RawMessage(`{"op":"replace","path":"/owner","value":"ana"}`),
		json.RawMessage(`{"op":"remove","path":"/gone"}`),
		aguistate.Op{Op: "add", Path: "/todos/-", Value: json.RawMessage(`null`)},
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

	_, err = c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "ops", Atomic: true, Ops: []any{
		aguistate.Op{Op: "add", Path: "/x", Value: json.RawMessage(`1`)}, aguistate.Op{Op: "remove", Path: "/gone"}}})
	var e *aguistate.Error
	if !errors.Is(err, aguistate.ErrPatchFailed) || errors.Is(err, aguistate.ErrUnknownThread) || !errors.As(err, &e) {
		t.Fatalf("atomic: %v", err)
	}
	if e.SkipCode() != "PATH_NOT_FOUND" || e.OpIndex() != 1 {
		t.Fatalf("atomic data: %s", e.Data)
	}
	if w.check(ctx) != v {
		t.Fatal("a failed atomic call changed the version")
	}

	_, err = c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "ops", IfVersion: aguistate.IfVersion(0), Ops: []any{aguistate.Op{Op: "add", Path: "/y", Value: json.RawMessage(`1`)}}})
	if !errors.Is(err, aguistate.ErrVersionConflict) {
		t.Fatalf("ifVersion 0 on version %d: %v", v, err)
	}
	a, err = c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "ops", IfVersion: aguistate.IfVersion(v), Ops: []any{aguistate.Op{Op: "add", Path: "/y", Value: json.RawMessage(`1`)}}})
	if err != nil || a.Version != v+1 {
		t.Fatalf("ifVersion %d: %v %+v", v, err, a)
	}
	w.apply(a.Events)
	w.check(ctx)

	if _, err = c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ops", Set: map[string]any{"k": 1}}); !errors.Is(err, aguistate.ErrInvalidParams) {
		t.Fatalf("diffToolState outside namespace mode: %v", err)
	}
	if _, err = c.GetState(ctx, aguistate.GetStateParams{ThreadID: "never-opened"}); !errors.Is(err, aguistate.ErrUnknownThread) {
		t.Fatalf("unknown thread: %v", err)
	}
	n, err := c.Normalize(ctx, aguistate.NormalizeParams{Ops: []any{json.RawMessage(`{"op":"add","path":"/a/-","value":1}`)}})
	if err != nil || paths(n.Delta) != "add /a, add /a/-" || !sameJSON(t, n.State, []byte(`{"a":[1]}`)) {
		t.Fatalf("normalize: %v %+v", err, n)
	}
	if closed, err := c.CloseThread(ctx, "ops"); err != nil || !closed {
		t.Fatalf("closeThread: %v %v", closed, err)
	}
	if _, err = c.GetState(ctx, aguistate.GetStateParams{ThreadID: "ops"}); !errors.Is(err, aguistate.ErrUnknownThread) {
		t.Fatalf("closed thread: %v", err)
	}
}

func TestDiffStatePrepend(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	list := make([]int, 1000)
	for i := range list {
		list[i] = i
	}
	initial := mustJSON(t, map[string]any{"list": list})
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "list", State: json.RawMessage(initial)})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "list", initial, r)
	d, err := c.DiffState(ctx, aguistate.DiffStateParams{ThreadID: "list", Path: "/list", Value: append([]int{-1}, list...)})
	if err != nil {
		t.Fatal(err)
	}
	if paths(d.Delta) != "add /list/0" || string(d.Delta[0].Value) != "-1" {
		t.Fatalf("prepend to 1000 elements: %d ops (%.200s)", len(d.Delta), paths(d.Delta))
	}
	w.apply(d.Events)
	w.check(ctx)
	d, err = c.DiffState(ctx, aguistate.DiffStateParams{ThreadID: "list", Path: []any{"list"}, Value: append([]int{-1}, list...)})
	if err != nil || len(d.Events) != 0 {
		t.Fatalf("equal diffState: %v %+v", err, d)
	}
}

// Values set to JSON null (a nil Value, json.RawMessage("null"), an op's
// "value": null) travel as null, the replayed deltas apply, and the sidecar
// holds null where the client does.
func TestNullReplay(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	const initial = `{"a":1,"list":[1,2],"o":{"k":"v"}}`
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "null", State: json.RawMessage(initial)})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "null", []byte(initial), r)
	for _, step := range []struct {
		path  string
		value any
	}{{"/a", nil}, {"/list/0", json.RawMessage("null")}, {"/o/k", nil}, {"/n", nil}} {
		d, err := c.DiffState(ctx, aguistate.DiffStateParams{ThreadID: "null", Path: step.path, Value: step.value})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Events) != 1 || len(d.Delta) != 1 || string(d.Delta[0].Value) != "null" {
			t.Fatalf("diffState %s to null: %+v", step.path, d)
		}
		w.apply(d.Events)
		w.check(ctx)
	}
	a, err := c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "null", Ops: []any{
		aguistate.Op{Op: "replace", Path: "/list/1", Value: json.RawMessage("null")},
		json.RawMessage(`{"op":"add","path":"/m","value":null}`)}})
	if err != nil || len(a.Skipped) != 0 {
		t.Fatalf("applyOps with null values: %v %+v", err, a)
	}
	w.apply(a.Events)
	w.check(ctx)
	want := map[string]any{"a": nil, "list": []any{nil, nil}, "o": map[string]any{"k": nil}, "n": nil, "m": nil}
	if got := decode(t, w.doc); !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %s, want %v", w.doc, want)
	}
}
