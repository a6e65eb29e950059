package aguistate

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The contract is what the sidecar serves in rpc.discover (protocol/openrpc.json).

// discovered maps each method the sidecar announces to its params, each
// marked true if it is required.
func discovered(t *testing.T) map[string]map[string]bool {
	t.Helper()
	c, ctx := startClient(t), testCtx(t)
	doc, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Methods []struct {
			Name   string
			Params []struct {
				Name     string
				Required bool
			}
		}
	}
	if err := json.Unmarshal(doc, &d); err != nil || len(d.Methods) == 0 {
		t.Fatalf("rpc.discover: %v %.200s", err, doc)
	}
	methods := map[string]map[string]bool{}
	for _, m := range d.Methods {
		methods[m.Name] = map[string]bool{}
		for _, p := range m.Params {
			methods[m.Name][p.Name] = p.Required
		}
	}
	return methods
}

// Every method the sidecar announces has a typed wrapper on *Client, named as
// the method with its first letter upper-cased (rpc.discover: Discover). A
// method added to the protocol fails this test until it has one.
func TestEveryMethodHasAWrapper(t *testing.T) {
	var c *Client
	for method := range discovered(t) {
		name := strings.TrimPrefix(method, "rpc.")
		name = strings.ToUpper(name[:1]) + name[1:]
		w, ok := reflect.TypeOf(c).MethodByName(name)
		if !ok || w.Type.NumIn() < 2 || w.Type.In(1) != reflect.TypeOf((*context.Context)(nil)).Elem() {
			t.Errorf("method %s has no typed wrapper (*Client).%s(ctx, ...)", method, name)
		}
	}
}

// Every wrapper, with every field of its params set, sends only params the
// method declares, and every param it requires. The calls go to the recording
// stand-in, so that each is made exactly as written, valid or not.
func TestWireFollowsDiscover(t *testing.T) {
	methods := discovered(t)
	var wire lockedBuffer
	f, ctx := startFake(t, "record", Options{Stderr: &wire}), testCtx(t)
	ops := []any{Op{Op: "add", Path: "/a", Value: json.RawMessage(`1`)}}
	obj := map[string]any{"k": 1}
	v := IfVersion(0)
	calls := []func() error{
		func() error {
			_, err := f.OpenRun(ctx, OpenRunParams{ThreadID: "t", RunID: "r", State: obj, Namespace: "ns", ToolState: obj, Snapshot: true, IfVersion: v})
			return err
		},
		func() error {
			_, err := f.DiffToolState(ctx, DiffToolStateParams{ThreadID: "t", ToolState: obj, Set: obj, Remove: []string{"k"}, IfVersion: v})
			return err
		},
		func() error {
			_, err := f.ApplyOps(ctx, ApplyOpsParams{ThreadID: "t", Ops: ops, Atomic: true, IfVersion: v})
			return err
		},
		func() error { _, err := f.Normalize(ctx, NormalizeParams{Ops: ops, State: obj}); return err },
		func() error {
			_, err := f.DiffState(ctx, DiffStateParams{ThreadID: "t", Value: 1, Path: "/a", IfVersion: v})
			return err
		},
		func() error { _, err := f.GetState(ctx, GetStateParams{ThreadID: "t", Path: "/a"}); return err },
		func() error {
			_, err := f.ActivitySnapshot(ctx, ActivitySnapshotParams{ThreadID: "t", MessageID: "m", ActivityType: "a", Content: obj, Replace: Bool(false), IfVersion: v})
			return err
		},
		func() error {
			_, err := f.ApplyActivityOps(ctx, ApplyActivityOpsParams{ThreadID: "t", MessageID: "m", Ops: ops, ActivityType: "a", Atomic: true, IfVersion: v})
			return err
		},
		func() error {
			_, err := f.DiffActivity(ctx, DiffActivityParams{ThreadID: "t", MessageID: "m", Content: obj, ActivityType: "a", IfVersion: v})
			return err
		},
		func() error {
			_, err := f.GetActivity(ctx, GetActivityParams{ThreadID: "t", MessageID: "m"})
			return err
		},
		func() error { _, err := f.CloseThread(ctx, "t"); return err },
		func() error { _, err := f.EscapePointer(ctx, []any{"a", 0}); return err },
		func() error { _, err := f.ParsePointer(ctx, "/a"); return err },
		func() error {
			_, err := f.OpenStream(ctx, OpenStreamParams{State: json.RawMessage(`{"k":1}`), Own: []string{"/k"}, Snapshots: "delta", JoinKeys: true, Framing: "sse", Lifecycle: "pass",
				Resume: &ResumeRun{ThreadID: "t", Messages: json.RawMessage(`[]`), Path: "/agent", RequestHeaders: [][2]string{{"Authorization", "Bearer a"}}, ResponseHeaders: [][2]string{{"Content-Type", "text/event-stream"}},
					Authorization: "Bearer a", Cookie: "s=1", Headers: map[string]string{"content-type": "text/event-stream"}}})
			return err
		},
		func() error {
			body := `{"state":{}}`
			_, err := f.OpenStream(ctx, OpenStreamParams{Request: &StreamRequest{Method: "POST", Path: "/agent", Headers: [][2]string{{"Content-Type", "application/json"}}, Body: &body},
				Response: &HTTPResponseHead{Status: 200, Headers: [][2]string{{"Content-Type", "text/event-stream"}}}, Own: []string{"/k"}, Snapshots: "delta", JoinKeys: true, NoResume: true, Lifecycle: "repair"})
			return err
		},
		func() error { _, err := f.FixStream(ctx, "s1", "data: {}\n\n"); return err },
		func() error { _, err := f.DetachStream(ctx, "s1"); return err },
		func() error { _, err := f.CloseStream(ctx, "s1"); return err },
		func() error { _, err := f.CloseBrokenStream(ctx, "s1"); return err },
		func() error {
			_, err := f.RejoinStream(ctx, RejoinStreamParams{Request: &HTTPRequest{Method: "POST", Path: "/agent", Headers: [][2]string{{"Last-Event-ID", "x"}}, Body: `{"threadId":"t"}`},
				ThreadID: "t", Path: "/agent", Authorization: "Bearer a", Cookie: "s=1", LastEventID: "x"}) // the earlier form too, to the recording stand-in
			return err
		},
		func() error {
			_, err := f.ClassifyRequest(ctx, ClassifyRequestParams{Method: "POST", Path: "/agent", Headers: [][2]string{{"Last-Event-ID", "x"}}, Paths: []string{"/agent"}, Resume: new(bool)})
			return err
		},
		func() error {
			w := 0
			_, err := f.ReadRejoin(ctx, ReadRejoinParams{ReadID: "r1", WaitMs: &w})
			return err
		},
		func() error { return f.CloseRejoin(ctx, "r1") },
		func() error { _, err := f.Stats(ctx); return err },
		func() error { _, err := f.Discover(ctx); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := f.Close(); err != nil { // Close waits for the process, and so for its stderr
		t.Fatal(err)
	}

	sent := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(wire.String()), "\n") {
		var req struct {
			Method string
			Params map[string]json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil {
			t.Fatalf("request %s: %v", line, err)
		}
		sent[req.Method] = true
		declared, ok := methods[req.Method]
		if !ok {
			t.Errorf("%s is not a method the sidecar announces", req.Method)
			continue
		}
		for name := range req.Params {
			if _, ok := declared[name]; !ok {
				t.Errorf("%s sends %q, which it does not declare: %s", req.Method, name, line)
			}
		}
		for name, required := range declared {
			if _, ok := req.Params[name]; required && !ok {
				t.Errorf("%s leaves out %q, which it requires: %s", req.Method, name, line)
			}
		}
	}
	var missed []string
	for m := range methods {
		if !sent[m] {
			missed = append(missed, m)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("no call above exercises %v: add one", missed)
	}
}

// Every result type of this package that has a schema of the same name in the
// contract decodes exactly that schema's members: a member the protocol adds
// (as findings was added to fixStream's and closeStream's results) fails this
// test until the type has it, rather than being dropped in silence.
func TestResultTypesHaveTheirSchemasMembers(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	doc, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	types := []any{ApplyOpsResult{}, ActivitySnapshotResult{}, GetActivityResult{}, GetStateResult{}, NormalizeResult{},
		OpenRunResult{}, StatsResult{}, FixStreamResult{}, CloseStreamResult{}, DetachStreamResult{}, StreamSummary{},
		StreamFinding{}, Note{}, RejoinStreamResult{}, ReadRejoinResult{}, ResumeRun{}, ClassifyRequestResult{}, Limits{}, Skip{}}
	named := map[string]any{
		"OpenStreamResult": openedStream{}, // unexported: OpenStream returns its id alone
		"HttpRequest":      HTTPRequest{},  // Go's initialism
		"HttpResponseHead": HTTPResponseHead{},
		"ResumeUnknownData": struct {
			Code string `json:"code"`
			Refusal
		}{},
	}
	for _, v := range types {
		named[reflect.TypeOf(v).Name()] = v
	}
	for name, v := range named {
		ty := reflect.TypeOf(v)
		schema, ok := d.Components.Schemas[name]
		if !ok {
			t.Errorf("%s: the contract has no schema of that name", name)
			continue
		}
		var want []string
		for name := range schema.Properties {
			want = append(want, name)
		}
		got := jsonMembers(ty)
		sort.Strings(want)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s decodes %v; its schema has %v", name, got, want)
		}
	}
}

// jsonMembers is the JSON member names a struct type decodes, an embedded
// struct's (Change) counted as its own, as encoding/json counts them.
func jsonMembers(ty reflect.Type) []string {
	var out []string
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		switch {
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			out = append(out, jsonMembers(f.Type)...)
		case tag != "" && tag != "-":
			out = append(out, tag)
		}
	}
	return out
}
