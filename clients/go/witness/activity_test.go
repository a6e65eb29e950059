package witness

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// Activities (protocol/README.md §10) replayed as a client replays them: each
// ACTIVITY_SNAPSHOT sets the client's copy (unless replace: false finds one),
// and each ACTIVITY_DELTA's patch is applied with evanphx/json-patch to the
// content before it. After every call the replay must equal getActivity for
// every activity, and the state must equal getState (witness.check).

// actor drives one thread's activities and state, replaying every event.
type actor struct {
	t   *testing.T
	ctx context.Context
	c   *aguistate.Client
	w   *witness
}

func (a *actor) forward(events []json.RawMessage) {
	a.t.Helper()
	a.w.apply(events)
	a.w.check(a.ctx)
}

// eventTypes lists the events' types, for assertions on what a call returned.
func eventTypes(t *testing.T, events []json.RawMessage) string {
	t.Helper()
	s := make([]string, len(events))
	for i, e := range events {
		var ev struct{ Type string }
		if err := json.Unmarshal(e, &ev); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		s[i] = ev.Type
	}
	return strings.Join(s, ", ")
}

func (a *actor) diff(id, typ string, content any) *aguistate.Change {
	a.t.Helper()
	d, err := a.c.DiffActivity(a.ctx, aguistate.DiffActivityParams{ThreadID: a.w.thread, MessageID: id, ActivityType: typ, Content: content})
	if err != nil {
		a.t.Fatalf("diffActivity %s: %v", id, err)
	}
	a.forward(d.Events)
	return d
}

func (a *actor) snapshot(id, typ string, content any, replace *bool) *aguistate.ActivitySnapshotResult {
	a.t.Helper()
	s, err := a.c.ActivitySnapshot(a.ctx, aguistate.ActivitySnapshotParams{ThreadID: a.w.thread, MessageID: id, ActivityType: typ, Content: content, Replace: replace})
	if err != nil {
		a.t.Fatalf("activitySnapshot %s: %v", id, err)
	}
	if eventTypes(a.t, s.Events) != "ACTIVITY_SNAPSHOT" {
		a.t.Fatalf("activitySnapshot %s: want one ACTIVITY_SNAPSHOT, got %s", id, s.Events)
	}
	a.forward(s.Events)
	return s
}

func (a *actor) ops(id, typ string, ops ...any) *aguistate.ApplyOpsResult {
	a.t.Helper()
	retyped := typ != "" && a.w.activities[id] != nil && a.w.activities[id].typ != typ
	r, err := a.c.ApplyActivityOps(a.ctx, aguistate.ApplyActivityOpsParams{ThreadID: a.w.thread, MessageID: id, ActivityType: typ, Ops: ops})
	if err != nil {
		a.t.Fatalf("applyActivityOps %s: %v", id, err)
	}
	// One ACTIVITY_DELTA if anything moved or the type changed, else no event.
	want := ""
	if len(r.Delta) > 0 || retyped {
		want = "ACTIVITY_DELTA"
	}
	if got := eventTypes(a.t, r.Events); got != want {
		a.t.Fatalf("applyActivityOps %s: events %s, want %q", id, r.Events, want)
	}
	a.forward(r.Events)
	return r
}

func (a *actor) content(id string) any {
	a.t.Helper()
	act, ok := a.w.activities[id]
	if !ok {
		a.t.Fatalf("the client holds no activity %s", id)
	}
	return decode(a.t, act.content)
}

func skipCodes(s []aguistate.Skip) string {
	out := make([]string, len(s))
	for i, k := range s {
		out[i] = k.Code
	}
	return strings.Join(out, ", ")
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// Several activities on one namespace-mode thread, mixed with state calls and
// a second run: every event the sidecar returns applies with evanphx, and the
// replay lands on getState and getActivity after every call.
func TestActivityReplay(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{}
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "acts", RunID: "run-1", State: json.RawMessage(clientOwn), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	a := &actor{t: t, ctx: ctx, c: c, w: open(t, c, "acts", []byte(clientOwn), r)}
	a.w.check(ctx)
	setTool := func(key string, value any) {
		t.Helper()
		stored[key] = value
		d, err := c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "acts", Set: map[string]any{key: value}})
		if err != nil {
			t.Fatal(err)
		}
		a.forward(d.Events)
	}

	// Two activities, created the two ways.
	if d := a.diff("plan-1", "plan", raw(`{"steps":[{"title":"search","done":false}]}`)); eventTypes(t, d.Events) != "ACTIVITY_SNAPSHOT" || len(d.Delta) != 0 {
		t.Fatalf("diffActivity that creates: %+v", d)
	}
	a.snapshot("search-1", "search", raw(`{"query":"raster ops","results":[]}`), nil)
	setTool("raster-ops/dataset", "era5")

	// Model-style ops on the content: what fits is normalized, the rest skipped.
	o := a.ops("plan-1", "",
		raw(`{"op":"add","path":"/notes/-","value":"started"}`),    // the array is created first
		raw(`{"op":"replace","path":"/status","value":"running"}`), // a replace that sets: an add
		raw(`{"op":"replace","path":"","value":[]}`),               // ROOT_NOT_OBJECT
		raw(`{"op":"remove","path":"/gone"}`),                      // PATH_NOT_FOUND
		map[string]any{"op": "replace", "path": []any{"steps", 0, "done"}, "value": true},
		map[string]any{"op": "add", "path": []any{"by/key"}, "value": map[string]any{}},
		map[string]any{"op": "add", "path": []any{"by/key", "x~y"}, "value": nil},
		raw(`{"op":"add","path":"/steps/-","value":{"title":"rank","done":false}}`),
	)
	if want := "add /notes, add /notes/-, add /status, replace /steps/0/done, add /by~1key, add /by~1key/x~0y, add /steps/-"; paths(o.Delta) != want {
		t.Fatalf("applyActivityOps delta %q, want %q", paths(o.Delta), want)
	}
	if skipCodes(o.Skipped) != "ROOT_NOT_OBJECT, PATH_NOT_FOUND" || o.Skipped[0].Index != 2 || o.Skipped[1].Index != 3 {
		t.Fatalf("applyActivityOps skipped: %+v", o.Skipped)
	}

	// State calls in between move the shared version, not the activities.
	ao, err := c.ApplyOps(ctx, aguistate.ApplyOpsParams{ThreadID: "acts", Ops: []any{raw(`{"op":"add","path":"/progress","value":0.5}`)}})
	if err != nil {
		t.Fatal(err)
	}
	a.forward(ao.Events)

	// The root of the content replaced by an object (emitted as a per-member
	// diff), a copy of the root, a move, and a retype, in one call.
	o = a.ops("search-1", "search-running",
		raw(`{"op":"replace","path":"","value":{"query":"raster ops","results":["era5","gfs"],"page":1}}`),
		raw(`{"op":"copy","from":"","path":"/first"}`),
		raw(`{"op":"move","from":"/page","path":"/cursor"}`),
	)
	for _, op := range o.Delta {
		if op.Path == "" || (op.From == "" && (op.Op == "move" || op.Op == "copy")) {
			t.Fatalf("an op names the root: %+v", o.Delta)
		}
	}
	if want := map[string]any{"query": "raster ops", "results": []any{"era5", "gfs"}, "cursor": 1.0,
		"first": map[string]any{"query": "raster ops", "results": []any{"era5", "gfs"}, "page": 1.0}}; !reflect.DeepEqual(a.content("search-1"), want) {
		t.Fatalf("search-1 replayed %v, want %v", a.content("search-1"), want)
	}
	d, err := c.DiffState(ctx, aguistate.DiffStateParams{ThreadID: "acts", Path: "/progress", Value: 1})
	if err != nil {
		t.Fatal(err)
	}
	a.forward(d.Events)

	// diffActivity: a prepend is a minimal delta; a retype with equal content
	// is an empty patch under the new type; equal content and type, no event.
	steps := decode(t, mustJSON(t, a.content("plan-1"))).(map[string]any)
	steps["steps"] = append([]any{map[string]any{"title": "plan", "done": true}}, steps["steps"].([]any)...)
	if d := a.diff("plan-1", "", steps); paths(d.Delta) != "add /steps/0" {
		t.Fatalf("prepend a step: %q", paths(d.Delta))
	}
	if d := a.diff("plan-1", "plan-done", steps); eventTypes(t, d.Events) != "ACTIVITY_DELTA" || len(d.Delta) != 0 || a.w.activities["plan-1"].typ != "plan-done" {
		t.Fatalf("retype with equal content: %+v", d)
	}
	v := a.w.check(ctx)
	if d := a.diff("plan-1", "plan-done", steps); len(d.Events) != 0 || d.Version != v {
		t.Fatalf("equal content, same type: %+v", d)
	}
	// A retype alone through applyActivityOps: an empty patch.
	if o := a.ops("search-1", "search-done"); len(o.Delta) != 0 || a.w.activities["search-1"].typ != "search-done" {
		t.Fatalf("retype without ops: %+v", o)
	}
	setTool("bounds", []int{0, 0, 10, 10})

	// replace: false leaves an existing activity as it is, and creates a new one.
	before := a.content("plan-1")
	v = a.w.check(ctx)
	if s := a.snapshot("plan-1", "other", map[string]any{}, aguistate.Bool(false)); s.Version != v || !reflect.DeepEqual(a.content("plan-1"), before) {
		t.Fatalf("replace: false on an existing activity: %+v", s)
	}
	a.snapshot("note-1", "note", map[string]any{"text": "hi"}, aguistate.Bool(false))
	a.snapshot("note-1", "note", map[string]any{"text": "bye", "at": []int{1, 2}}, nil)

	// A failed atomic call changes nothing, on the client or the sidecar.
	v = a.w.check(ctx)
	_, err = c.ApplyActivityOps(ctx, aguistate.ApplyActivityOpsParams{ThreadID: "acts", MessageID: "note-1", Atomic: true, Ops: []any{
		raw(`{"op":"add","path":"/x","value":1}`), raw(`{"op":"remove","path":""}`)}})
	var e *aguistate.Error
	if !errors.Is(err, aguistate.ErrPatchFailed) || !errors.As(err, &e) || e.SkipCode() != "ROOT_NOT_OBJECT" || e.OpIndex() != 1 {
		t.Fatalf("atomic: %v", err)
	}
	if a.w.check(ctx) != v {
		t.Fatal("a failed atomic call changed the version")
	}

	// Run 2: the client sends the state it holds and keeps its activity
	// messages; the sidecar keeps the thread's activities through openRun.
	r, err = c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "acts", RunID: "run-2", State: json.RawMessage(a.w.doc), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	a.forward(r.Events)
	if len(a.w.activities) != 3 {
		t.Fatalf("the client holds %d activities, want 3", len(a.w.activities))
	}
	a.ops("note-1", "", raw(`{"op":"add","path":"/at/-","value":3}`), raw(`{"op":"remove","path":"/text"}`))
	a.diff("search-1", "", map[string]any{})
	setTool("raster-ops/dataset", "gfs")
	a.ops("plan-1", "", raw(`{"op":"move","from":"/steps/0","path":"/steps/2"}`), raw(`{"op":"copy","from":"/notes","path":"/log"}`))

	if !reflect.DeepEqual(a.w.member("toolState"), decode(t, mustJSON(t, stored))) {
		t.Fatalf("client toolState %v != stored %v", a.w.member("toolState"), stored)
	}
	if !reflect.DeepEqual(a.content("note-1"), map[string]any{"at": []any{1.0, 2.0, 3.0}}) || !reflect.DeepEqual(a.content("search-1"), map[string]any{}) {
		t.Fatalf("replayed note-1 %v, search-1 %v", a.content("note-1"), a.content("search-1"))
	}

	// closeThread drops the activities with the thread.
	if closed, err := c.CloseThread(ctx, "acts"); err != nil || !closed {
		t.Fatalf("closeThread: %v %v", closed, err)
	}
	if s, err := c.Stats(ctx); err != nil || s.Activities != 0 || s.Threads != 0 {
		t.Fatalf("stats after closeThread: %+v %v", s, err)
	}
}

// The sidecar is killed while a thread holds activities. After Restart and
// openRun the thread is back and its activities are not: applyActivityOps and
// getActivity fail with -32005, and the server resynchronizes the client from
// its own copy, with diffActivity or activitySnapshot, each of which returns an
// ACTIVITY_SNAPSHOT. Later deltas apply to the client's copy again.
func TestActivityCrashRecovery(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{"raster-ops/dataset": "era5"}
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "crash-acts", State: json.RawMessage(clientOwn), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	a := &actor{t: t, ctx: ctx, c: c, w: open(t, c, "crash-acts", []byte(clientOwn), r)}
	a.w.check(ctx)
	a.diff("plan-1", "plan", map[string]any{"steps": []string{"search"}})
	a.snapshot("search-1", "search", map[string]any{"query": "q"}, nil)
	a.ops("plan-1", "plan-running", raw(`{"op":"add","path":"/steps/-","value":"rank"}`))

	// The server's own copy of each activity: what it sent last, which the replay holds.
	truth := map[string]activity{}
	for id, act := range a.w.activities {
		truth[id] = *act
	}

	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	var ee *aguistate.ExitError
	if _, err := c.ApplyActivityOps(ctx, aguistate.ApplyActivityOpsParams{ThreadID: "crash-acts", MessageID: "plan-1", Ops: []any{}}); !errors.As(err, &ee) {
		t.Fatalf("a call on the killed sidecar: %v", err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	r, err = c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "crash-acts", State: json.RawMessage(a.w.doc), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	a.w.apply(r.Events) // not checked yet: the sidecar holds none of the client's activities

	for id := range truth {
		_, err := c.GetActivity(ctx, aguistate.GetActivityParams{ThreadID: "crash-acts", MessageID: id})
		if !errors.Is(err, aguistate.ErrUnknownActivity) {
			t.Fatalf("getActivity %s after a restart: %v", id, err)
		}
		_, err = c.ApplyActivityOps(ctx, aguistate.ApplyActivityOpsParams{ThreadID: "crash-acts", MessageID: id, Ops: []any{raw(`{"op":"add","path":"/x","value":1}`)}})
		if !errors.Is(err, aguistate.ErrUnknownActivity) {
			t.Fatalf("applyActivityOps %s after a restart: %v", id, err)
		}
	}

	// Resynchronize: plan-1 with diffActivity, search-1 with activitySnapshot.
	// Each snapshot replaces the client's copy (equal to the server's here).
	// (Checked once both are done: until then the sidecar lacks one of them.)
	p := truth["plan-1"]
	d, err := c.DiffActivity(ctx, aguistate.DiffActivityParams{ThreadID: "crash-acts", MessageID: "plan-1", ActivityType: p.typ, Content: json.RawMessage(p.content)})
	if err != nil || eventTypes(t, d.Events) != "ACTIVITY_SNAPSHOT" || len(d.Delta) != 0 {
		t.Fatalf("diffActivity after a restart: want an ACTIVITY_SNAPSHOT: %v %+v", err, d)
	}
	a.w.apply(d.Events)
	s := truth["search-1"]
	sn, err := c.ActivitySnapshot(ctx, aguistate.ActivitySnapshotParams{ThreadID: "crash-acts", MessageID: "search-1", ActivityType: s.typ, Content: json.RawMessage(s.content)})
	if err != nil || eventTypes(t, sn.Events) != "ACTIVITY_SNAPSHOT" {
		t.Fatalf("activitySnapshot after a restart: %v %+v", err, sn)
	}
	a.w.apply(sn.Events)
	a.w.check(ctx)

	a.ops("plan-1", "", raw(`{"op":"add","path":"/steps/-","value":"plot"}`))
	a.diff("search-1", "search-done", map[string]any{"query": "q", "results": []string{"era5"}})
	if !reflect.DeepEqual(a.content("plan-1"), map[string]any{"steps": []any{"search", "rank", "plot"}}) || a.w.activities["plan-1"].typ != "plan-running" {
		t.Fatalf("plan-1 after the recovery: %q %v", a.w.activities["plan-1"].typ, a.content("plan-1"))
	}
}
