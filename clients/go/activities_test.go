package aguistate

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// The activity methods (protocol/README.md §10) against the real sidecar. The
// sidecar implements them: an answer of -32601 (method not found) to any of
// them is a regression and fails these tests like any other wrong answer.
// The replay of every activity event with an independent RFC 6902 library is
// in ./witness (activity_test.go).

// jsonEq reports whether a and b are equal as JSON values (key order aside;
// [] and null differ).
func jsonEq(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// wantJSON asserts that got, marshaled, equals the JSON text want.
func wantJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	b, err := json.Marshal(got)
	if err != nil || !jsonEq(b, []byte(want)) {
		t.Fatalf("%s:\n got %s\nwant %s", what, b, want)
	}
}

// notMethodNotFound fails at once on -32601, with a message saying why it is wrong.
func notMethodNotFound(t *testing.T, method string, err error) {
	t.Helper()
	if errors.Is(err, ErrMethodNotFound) {
		t.Fatalf("%s answers -32601: the sidecar implements protocol/README.md §10, this is a regression: %v", method, err)
	}
}

// wantUnknownActivity asserts a -32005 whose data is exactly
// {code: "UNKNOWN_ACTIVITY", threadId, messageId} (protocol/README.md §8).
func wantUnknownActivity(t *testing.T, method string, err error, thread, message string) {
	t.Helper()
	notMethodNotFound(t, method, err)
	var e *Error
	if !errors.Is(err, ErrUnknownActivity) || !errors.As(err, &e) {
		t.Fatalf("%s of activity %q: want -32005 unknown activity, got %v", method, message, err)
	}
	want, _ := json.Marshal(map[string]string{"code": "UNKNOWN_ACTIVITY", "threadId": thread, "messageId": message})
	if !jsonEq(e.Data, want) {
		t.Fatalf("%s: -32005 data %s, want %s", method, e.Data, want)
	}
	if _, ok := e.Field(); ok || e.Reason() != "" || e.SkipCode() != "" || e.OpIndex() != -1 {
		t.Fatalf("%s: -32005 has no field, reason, skip code or index: %s", method, e.Data)
	}
}

// wantActivity asserts what getActivity returns: the type, the content (JSON
// text) and the thread's version.
func wantActivity(t *testing.T, c *Client, thread, message, typ, content string, version int) {
	t.Helper()
	g, err := c.GetActivity(testCtx(t), GetActivityParams{ThreadID: thread, MessageID: message})
	notMethodNotFound(t, "getActivity", err)
	if err != nil {
		t.Fatalf("getActivity %s/%s: %v", thread, message, err)
	}
	if g.ActivityType != typ || !jsonEq(g.Content, []byte(content)) || g.Version != version {
		t.Fatalf("getActivity %s/%s: type %q content %s version %d; want %q %s %d",
			thread, message, g.ActivityType, g.Content, g.Version, typ, content, version)
	}
}

func wantStats(t *testing.T, c *Client, threads, activities int) {
	t.Helper()
	s, err := c.Stats(testCtx(t))
	if err != nil || s.Threads != threads || s.Activities != activities {
		t.Fatalf("stats: %+v %v; want %d threads, %d activities", s, err, threads, activities)
	}
}

func TestActivities(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "act", State: map[string]any{"plan": "p"}})
	if err != nil {
		t.Fatal(err)
	}
	v := r.Version
	wantStats(t, c, 1, 0)

	// diffActivity creates an activity the thread does not hold: its event is a
	// snapshot (the client has nothing to patch), and the version moves.
	const search = `{"title":"search","done":false}`
	d, err := c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "plan",
		Content: json.RawMessage(`{"steps":[` + search + `]}`)})
	notMethodNotFound(t, "diffActivity", err)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version != v+1 {
		t.Fatalf("diffActivity that creates: version %d, want %d", d.Version, v+1)
	}
	wantJSON(t, "diffActivity that creates: delta", d.Delta, `[]`)
	wantJSON(t, "diffActivity that creates: events", d.Events,
		`[{"type":"ACTIVITY_SNAPSHOT","messageId":"plan-1","activityType":"plan","content":{"steps":[`+search+`]}}]`)
	wantActivity(t, c, "act", "plan-1", "plan", `{"steps":[`+search+`]}`, v+1)
	v++

	// Creating needs a type; a refused call creates nothing.
	_, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-2", Content: map[string]any{}})
	wantInvalid(t, err, "MISSING", "/activityType")
	_, err = c.GetActivity(ctx, GetActivityParams{ThreadID: "act", MessageID: "plan-2"})
	wantUnknownActivity(t, "getActivity", err, "act", "plan-2")

	// applyActivityOps normalizes as applyOps does, and retypes: a replace of a
	// missing member sets it, an append to a missing array creates the array,
	// and what does not fit (a root replaced by an array, a missing target) is
	// skipped and reported.
	ops := []string{
		`{"op":"replace","path":"/status","value":"running"}`,
		`{"op":"add","path":"/notes/-","value":"started"}`,
		`{"op":"replace","path":"","value":[]}`,
		`{"op":"remove","path":"/gone"}`,
	}
	a, err := c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "plan-running", Ops: []any{
		json.RawMessage(ops[0]), json.RawMessage(ops[1]), json.RawMessage(ops[2]), json.RawMessage(ops[3]),
		Op{Op: "add", Path: "/steps/-", Value: json.RawMessage(`{"title":"rank","done":false}`)},
	}})
	notMethodNotFound(t, "applyActivityOps", err)
	if err != nil {
		t.Fatal(err)
	}
	delta := `[{"op":"add","path":"/status","value":"running"},{"op":"add","path":"/notes","value":[]},` +
		`{"op":"add","path":"/notes/-","value":"started"},{"op":"add","path":"/steps/-","value":{"title":"rank","done":false}}]`
	wantJSON(t, "applyActivityOps: delta", a.Delta, delta)
	wantJSON(t, "applyActivityOps: events", a.Events,
		`[{"type":"ACTIVITY_DELTA","messageId":"plan-1","activityType":"plan-running","patch":`+delta+`}]`)
	if len(a.Skipped) != 2 || a.Skipped[0].Index != 2 || a.Skipped[0].Code != "ROOT_NOT_OBJECT" || !jsonEq(a.Skipped[0].Op, []byte(ops[2])) ||
		a.Skipped[1].Index != 3 || a.Skipped[1].Code != "PATH_NOT_FOUND" || !jsonEq(a.Skipped[1].Op, []byte(ops[3])) {
		t.Fatalf("applyActivityOps: skipped %+v, want ROOT_NOT_OBJECT at 2 and PATH_NOT_FOUND at 3", a.Skipped)
	}
	if a.Version != v+1 {
		t.Fatalf("applyActivityOps: version %d, want %d", a.Version, v+1)
	}
	v++
	content := `{"steps":[` + search + `,{"title":"rank","done":false}],"status":"running","notes":["started"]}`
	wantActivity(t, c, "act", "plan-1", "plan-running", content, v)

	// A retype with no ops (nil Ops is sent as []): one ACTIVITY_DELTA with an
	// empty patch, carrying the new type. The same type again moves nothing.
	a, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "plan-done"})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "retype: result", a, `{"version":`+itoa(v+1)+`,"delta":[],"skipped":[],`+
		`"events":[{"type":"ACTIVITY_DELTA","messageId":"plan-1","activityType":"plan-done","patch":[]}]}`)
	v++
	wantActivity(t, c, "act", "plan-1", "plan-done", content, v)
	a, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "plan-done", Ops: []any{}})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "the same type, no ops: result", a, `{"version":`+itoa(v)+`,"delta":[],"skipped":[],"events":[]}`)

	// Atomic: the first op that does not fit fails the call; nothing changes.
	_, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "plan-1", Atomic: true, ActivityType: "other", Ops: []any{
		Op{Op: "add", Path: "/x", Value: json.RawMessage(`1`)}, Op{Op: "replace", Path: "", Value: json.RawMessage(`5`)}}})
	var e *Error
	if !errors.Is(err, ErrPatchFailed) || !errors.As(err, &e) || e.SkipCode() != "ROOT_NOT_OBJECT" || e.OpIndex() != 1 {
		t.Fatalf("atomic applyActivityOps: want -32002 ROOT_NOT_OBJECT at op 1, got %v", err)
	}
	wantActivity(t, c, "act", "plan-1", "plan-done", content, v)

	// ifVersion, as for state: a mismatch changes nothing; the right one passes.
	for method, call := range map[string]func() error{
		"applyActivityOps": func() error {
			_, err := c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "plan-1", Ops: []any{}, ActivityType: "x", IfVersion: IfVersion(v - 1)})
			return err
		},
		"diffActivity": func() error {
			_, err := c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", Content: map[string]any{}, IfVersion: IfVersion(0)})
			return err
		},
		"activitySnapshot": func() error {
			_, err := c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "x", Content: map[string]any{}, IfVersion: IfVersion(v + 1)})
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrVersionConflict) {
			t.Fatalf("%s with a stale ifVersion: %v", method, err)
		}
	}
	wantActivity(t, c, "act", "plan-1", "plan-done", content, v)

	// diffActivity: a minimal delta; equal content and type move nothing; a
	// retype with equal content is one ACTIVITY_DELTA with an empty patch.
	content2 := `{"steps":[` + search + `,{"title":"rank","done":false}],"status":"running","notes":["started"],"done":true}`
	d, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", Content: json.RawMessage(content2), IfVersion: IfVersion(v)})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "diffActivity: result", d, `{"version":`+itoa(v+1)+`,"delta":[{"op":"add","path":"/done","value":true}],`+
		`"events":[{"type":"ACTIVITY_DELTA","messageId":"plan-1","activityType":"plan-done","patch":[{"op":"add","path":"/done","value":true}]}]}`)
	v++
	d, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", Content: json.RawMessage(content2), ActivityType: "plan-done"})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "diffActivity of equal content: result", d, `{"version":`+itoa(v)+`,"delta":[],"events":[]}`)
	d, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", Content: json.RawMessage(content2), ActivityType: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "diffActivity retype with equal content: result", d, `{"version":`+itoa(v+1)+`,"delta":[],`+
		`"events":[{"type":"ACTIVITY_DELTA","messageId":"plan-1","activityType":"plan","patch":[]}]}`)
	v++
	wantActivity(t, c, "act", "plan-1", "plan", content2, v)
	_, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "act", MessageID: "plan-1", Content: []any{1}})
	wantInvalid(t, err, "ROOT_NOT_OBJECT", "/content")

	// activitySnapshot with replace: false leaves an existing activity as it
	// is; its event carries what the mirror holds, with replace: false.
	s, err := c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act", MessageID: "plan-1", ActivityType: "other",
		Content: map[string]any{}, Replace: Bool(false)})
	notMethodNotFound(t, "activitySnapshot", err)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "activitySnapshot replace:false of an existing activity", s,
		`{"version":`+itoa(v)+`,"events":[{"type":"ACTIVITY_SNAPSHOT","messageId":"plan-1","activityType":"plan","content":`+content2+`,"replace":false}]}`)
	wantActivity(t, c, "act", "plan-1", "plan", content2, v)

	// ... and creates a new one.
	const query = `{"query":"raster ops","results":[]}`
	s, err = c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act", MessageID: "search-1", ActivityType: "search",
		Content: json.RawMessage(query), Replace: Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "activitySnapshot replace:false of a new activity", s,
		`{"version":`+itoa(v+1)+`,"events":[{"type":"ACTIVITY_SNAPSHOT","messageId":"search-1","activityType":"search","content":`+query+`}]}`)
	v++
	wantActivity(t, c, "act", "search-1", "search", query, v)

	// The default (and replace: true) replaces type and content; the event has
	// no replace member, and is returned even when nothing changed.
	const found = `{"query":"raster ops","results":["era5"]}`
	for i, replace := range []*bool{nil, Bool(true)} {
		s, err = c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act", MessageID: "search-1", ActivityType: "search-done",
			Content: json.RawMessage(found), Replace: replace})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			v++
		}
		wantJSON(t, "activitySnapshot", s,
			`{"version":`+itoa(v)+`,"events":[{"type":"ACTIVITY_SNAPSHOT","messageId":"search-1","activityType":"search-done","content":`+found+`}]}`)
		wantActivity(t, c, "act", "search-1", "search-done", found, v)
	}
	_, err = c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act", MessageID: "search-1", ActivityType: "search", Content: []int{1, 2}})
	wantInvalid(t, err, "ROOT_NOT_OBJECT", "/content")
	wantStats(t, c, 1, 2)

	// Activities share the thread's version and survive state calls and openRun.
	ao, err := c.ApplyOps(ctx, ApplyOpsParams{ThreadID: "act", Ops: []any{Op{Op: "add", Path: "/x", Value: json.RawMessage(`1`)}}})
	if err != nil || ao.Version != v+1 {
		t.Fatalf("applyOps on the thread: %v %+v (was at %d)", err, ao, v)
	}
	v++
	wantActivity(t, c, "act", "plan-1", "plan", content2, v)
	r, err = c.OpenRun(ctx, OpenRunParams{ThreadID: "act", RunID: "run-2", State: map[string]any{"plan": "q"}})
	if err != nil || r.Version != v+1 {
		t.Fatalf("openRun with another state: %v %+v (was at %d)", err, r, v)
	}
	v++
	wantActivity(t, c, "act", "plan-1", "plan", content2, v)
	wantActivity(t, c, "act", "search-1", "search-done", found, v)
	if g, err := c.GetState(ctx, GetStateParams{ThreadID: "act"}); err != nil || !jsonEq(g.State, []byte(`{"plan":"q"}`)) || g.Version != v {
		t.Fatalf("getState: %v %+v: activities are not in the state", err, g)
	}

	// An activity the thread does not hold: -32005 (getActivity, applyActivityOps).
	_, err = c.GetActivity(ctx, GetActivityParams{ThreadID: "act", MessageID: "never"})
	wantUnknownActivity(t, "getActivity", err, "act", "never")
	_, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "act", MessageID: "never", Ops: []any{Op{Op: "add", Path: "/a", Value: json.RawMessage(`1`)}}})
	wantUnknownActivity(t, "applyActivityOps", err, "act", "never")
	// A thread that does not exist: -32001, for every activity method.
	for method, call := range map[string]func() error{
		"getActivity": func() error {
			_, err := c.GetActivity(ctx, GetActivityParams{ThreadID: "nope", MessageID: "m"})
			return err
		},
		"applyActivityOps": func() error {
			_, err := c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "nope", MessageID: "m", Ops: []any{}})
			return err
		},
		"diffActivity": func() error {
			_, err := c.DiffActivity(ctx, DiffActivityParams{ThreadID: "nope", MessageID: "m", ActivityType: "t", Content: map[string]any{}})
			return err
		},
		"activitySnapshot": func() error {
			_, err := c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "nope", MessageID: "m", ActivityType: "t", Content: map[string]any{}})
			return err
		},
	} {
		err := call()
		notMethodNotFound(t, method, err)
		if !errors.As(err, &e) || !errors.Is(err, ErrUnknownThread) || e.Reason() != "never opened" {
			t.Fatalf("%s on a thread never opened: %v", method, err)
		}
	}

	// stats counts the activities of live threads; closeThread drops a
	// thread's activities, and a thread opened again has none.
	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "act-2", State: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "act-2", MessageID: "plan-1", ActivityType: "plan", Content: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	wantStats(t, c, 2, 3)
	if closed, err := c.CloseThread(ctx, "act"); err != nil || !closed {
		t.Fatalf("closeThread: %v %v", closed, err)
	}
	wantStats(t, c, 1, 1)
	_, err = c.GetActivity(ctx, GetActivityParams{ThreadID: "act", MessageID: "plan-1"})
	if !errors.As(err, &e) || !errors.Is(err, ErrUnknownThread) || e.Reason() != "closed" {
		t.Fatalf("getActivity on a closed thread: %v", err)
	}
	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "act", State: map[string]any{"plan": "q"}}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"plan-1", "search-1"} {
		_, err = c.GetActivity(ctx, GetActivityParams{ThreadID: "act", MessageID: m})
		wantUnknownActivity(t, "getActivity", err, "act", m)
	}
	wantActivity(t, c, "act-2", "plan-1", "plan", `{}`, 1) // openRun with {} changed nothing: version 0, then 1
	wantStats(t, c, 2, 1)
}

// A restarted sidecar knows no thread and no activity. After openRun the
// thread is back, its activities are not: applyActivityOps fails with -32005,
// and diffActivity, given the type and the server's content, creates the
// activity again and returns an ACTIVITY_SNAPSHOT that resynchronizes the client.
func TestActivitiesAfterRestart(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "r", State: map[string]any{"plan": "p"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiffActivity(ctx, DiffActivityParams{ThreadID: "r", MessageID: "plan-1", ActivityType: "plan", Content: map[string]any{"steps": []string{"search"}}}); err != nil {
		t.Fatal(err)
	}
	a, err := c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "r", MessageID: "plan-1", Ops: []any{Op{Op: "add", Path: "/steps/-", Value: json.RawMessage(`"rank"`)}}})
	if err != nil || len(a.Events) != 1 {
		t.Fatalf("applyActivityOps: %v %+v", err, a)
	}
	wantActivity(t, c, "r", "plan-1", "plan", `{"steps":["search","rank"]}`, 3)

	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	var ee *ExitError
	if _, err := c.GetActivity(ctx, GetActivityParams{ThreadID: "r", MessageID: "plan-1"}); !errors.As(err, &ee) {
		t.Fatalf("getActivity on a killed sidecar: %v", err)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	wantStats(t, c, 0, 0)
	if _, err := c.GetActivity(ctx, GetActivityParams{ThreadID: "r", MessageID: "plan-1"}); !errors.Is(err, ErrUnknownThread) {
		t.Fatalf("getActivity before openRun on a fresh sidecar: %v", err)
	}
	r, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "r", State: map[string]any{"plan": "p"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "r", MessageID: "plan-1", Ops: []any{Op{Op: "add", Path: "/steps/-", Value: json.RawMessage(`"plot"`)}}})
	wantUnknownActivity(t, "applyActivityOps", err, "r", "plan-1")
	_, err = c.GetActivity(ctx, GetActivityParams{ThreadID: "r", MessageID: "plan-1"})
	wantUnknownActivity(t, "getActivity", err, "r", "plan-1")
	// Without the type the sidecar cannot create it again.
	_, err = c.DiffActivity(ctx, DiffActivityParams{ThreadID: "r", MessageID: "plan-1", Content: map[string]any{}})
	wantInvalid(t, err, "MISSING", "/activityType")

	// The server's own copy of the activity, with the step the failed call meant to add.
	const truth = `{"steps":["search","rank","plot"]}`
	d, err := c.DiffActivity(ctx, DiffActivityParams{ThreadID: "r", MessageID: "plan-1", ActivityType: "plan", Content: json.RawMessage(truth)})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "diffActivity after a restart", d, `{"version":`+itoa(r.Version+1)+`,"delta":[],`+
		`"events":[{"type":"ACTIVITY_SNAPSHOT","messageId":"plan-1","activityType":"plan","content":`+truth+`}]}`)
	wantActivity(t, c, "r", "plan-1", "plan", truth, r.Version+1)
	a, err = c.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "r", MessageID: "plan-1", Ops: []any{Op{Op: "remove", Path: "/steps/0"}}})
	if err != nil {
		t.Fatal(err)
	}
	wantJSON(t, "applyActivityOps after the resynchronization: events", a.Events,
		`[{"type":"ACTIVITY_DELTA","messageId":"plan-1","activityType":"plan","patch":[{"op":"remove","path":"/steps/0"}]}]`)
	wantActivity(t, c, "r", "plan-1", "plan", `{"steps":["rank","plot"]}`, r.Version+2)
	wantStats(t, c, 1, 1)
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
