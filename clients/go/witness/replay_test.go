package witness

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	aguistate "github.com/agui-state/agui-state/clients/go"
	jsonpatch "github.com/evanphx/json-patch"
)

// These tests spawn the real sidecar ($AGUI_STATE_BIN, else agui-state on
// PATH; without it they fail rather than skip) and check every event it
// returns with an independent RFC 6902 implementation: a replay of the events
// from the state the client held at openRun must apply without error and
// equal getState.

func TestMain(m *testing.M) {
	// Be strict: a negative index is not RFC 6902, and the client's library refuses it.
	jsonpatch.SupportNegativeIndices = false
	os.Exit(m.Run())
}

func startClient(t *testing.T, args ...string) *aguistate.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := aguistate.Start(ctx, aguistate.Options{Args: args})
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

// witness is the browser's copy of one thread: its state, and its activity
// messages (protocol/README.md §10) by message id.
type witness struct {
	t          *testing.T
	c          *aguistate.Client
	thread     string
	doc        []byte
	activities map[string]*activity
}

// activity is the client's copy of one activity message.
type activity struct {
	typ     string
	content []byte
}

// open starts a replay at openRun: the client's state, then openRun's events.
func open(t *testing.T, c *aguistate.Client, thread string, clientState []byte, r *aguistate.OpenRunResult) *witness {
	w := &witness{t: t, c: c, thread: thread, doc: clientState, activities: map[string]*activity{}}
	w.apply(r.Events)
	return w
}

// apply plays events as the client does; a delta that does not apply fails the test.
//   - STATE_SNAPSHOT replaces the state; STATE_DELTA is applied with evanphx.
//   - ACTIVITY_SNAPSHOT sets the activity's type and content, unless it has
//     "replace": false and the client holds the activity already.
//   - ACTIVITY_DELTA is applied with evanphx to the content the client holds,
//     and the activity takes the event's type. A delta for an activity the
//     client does not hold fails the test: AG-UI's client would drop it
//     without a word, and the spec forbids sending it.
func (w *witness) apply(events []json.RawMessage) {
	w.t.Helper()
	for _, raw := range events {
		var ev map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ev); err != nil {
			w.t.Fatalf("event %s: %v", raw, err)
		}
		var typ string
		_ = json.Unmarshal(ev["type"], &typ)
		switch typ {
		case "STATE_SNAPSHOT":
			w.members(raw, ev, "type", "snapshot")
			w.doc = ev["snapshot"]
		case "STATE_DELTA":
			w.members(raw, ev, "type", "delta")
			w.doc = w.patch(raw, ev["delta"], w.doc)
		case "ACTIVITY_SNAPSHOT":
			w.members(raw, ev, "type", "messageId", "activityType", "content", "?replace")
			id, atyp := w.name(raw, ev["messageId"]), w.name(raw, ev["activityType"])
			w.object(raw, ev["content"])
			if r, ok := ev["replace"]; ok && string(r) != "false" { // present only when the caller asked for false
				w.t.Fatalf("replace must be absent or false: %s", raw)
			}
			if a, held := w.activities[id]; held && ev["replace"] != nil {
				// replace: false leaves what the client holds as it is. The
				// event carries what the sidecar holds: the same, if in sync.
				if a.typ != atyp || !sameJSON(w.t, a.content, ev["content"]) {
					w.t.Fatalf("replace: false carries %s, the client holds %q %.500s", raw, a.typ, a.content)
				}
				continue
			}
			w.activities[id] = &activity{typ: atyp, content: ev["content"]}
		case "ACTIVITY_DELTA":
			w.members(raw, ev, "type", "messageId", "activityType", "patch")
			id, atyp := w.name(raw, ev["messageId"]), w.name(raw, ev["activityType"])
			a, held := w.activities[id]
			if !held {
				w.t.Fatalf("a delta for an activity the client does not hold: %s", raw)
			}
			content := w.patch(raw, ev["patch"], a.content)
			w.object(raw, content)
			w.activities[id] = &activity{typ: atyp, content: content}
		default:
			w.t.Fatalf("unexpected event %s", raw)
		}
	}
}

// members asserts that the event has exactly these members ("?name": optional).
func (w *witness) members(raw []byte, ev map[string]json.RawMessage, names ...string) {
	w.t.Helper()
	n := 0
	for _, name := range names {
		if _, ok := ev[strings.TrimPrefix(name, "?")]; ok {
			n++
		} else if !strings.HasPrefix(name, "?") {
			w.t.Fatalf("event without %s: %s", name, raw)
		}
	}
	if n != len(ev) {
		w.t.Fatalf("event with members other than %v: %s", names, raw)
	}
}

// name decodes a messageId or activityType: a string of 1 to 256 characters.
func (w *witness) name(raw []byte, v json.RawMessage) string {
	w.t.Helper()
	var s string
	if err := json.Unmarshal(v, &s); err != nil || s == "" || len([]rune(s)) > 256 {
		w.t.Fatalf("a messageId or activityType that is not a string of 1 to 256 characters: %s", raw)
	}
	return s
}

// object asserts that an activity's content is a JSON object.
func (w *witness) object(raw []byte, content []byte) {
	w.t.Helper()
	if _, ok := decode(w.t, content).(map[string]any); !ok {
		w.t.Fatalf("an activity's content must stay an object: %.500s (event %.500s)", content, raw)
	}
}

// patch applies an event's ops to doc with evanphx/json-patch.
func (w *witness) patch(raw []byte, ops json.RawMessage, doc []byte) []byte {
	w.t.Helper()
	if _, ok := decode(w.t, ops).([]any); !ok {
		w.t.Fatalf("ops that are not an array: %s", raw)
	}
	if strings.Contains(string(ops), `"op":"test"`) {
		w.t.Fatalf("a test op in an event: %s", raw)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		w.t.Fatalf("decode %s: %v", ops, err)
	}
	out, err := patch.Apply(doc)
	if err != nil {
		w.t.Fatalf("%.500s does not apply to %.500s: %v", ops, doc, err)
	}
	return out
}

// check asserts that the replay equals getState and, for each activity the
// client holds, getActivity (at the same version); and that the sidecar holds
// no activity the client was never sent (stats.activities, so the witness
// must be the only thread of its sidecar that has activities). It returns the
// version.
func (w *witness) check(ctx context.Context) int {
	w.t.Helper()
	g, err := w.c.GetState(ctx, aguistate.GetStateParams{ThreadID: w.thread})
	if err != nil {
		w.t.Fatal(err)
	}
	// Compared decoded (jsonpatch.Equal panics on a null array element in 5.2.0).
	if !sameJSON(w.t, w.doc, g.State) {
		w.t.Fatalf("replay %.500s != getState %.500s", w.doc, g.State)
	}
	for id, a := range w.activities {
		ga, err := w.c.GetActivity(ctx, aguistate.GetActivityParams{ThreadID: w.thread, MessageID: id})
		if err != nil {
			w.t.Fatalf("getActivity %s: %v", id, err)
		}
		if ga.ActivityType != a.typ || !sameJSON(w.t, a.content, ga.Content) || ga.Version != g.Version {
			w.t.Fatalf("activity %s: replay %q %.500s != getActivity %q %.500s (version %d, thread at %d)",
				id, a.typ, a.content, ga.ActivityType, ga.Content, ga.Version, g.Version)
		}
	}
	s, err := w.c.Stats(ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	if s.Activities != len(w.activities) {
		w.t.Fatalf("the sidecar holds %d activities, the client %d", s.Activities, len(w.activities))
	}
	return g.Version
}

func (w *witness) member(name string) any {
	return decode(w.t, w.doc).(map[string]any)[name]
}

func paths(d []aguistate.Op) string {
	s := make([]string, len(d))
	for i, op := range d {
		s[i] = op.Op + " " + op.Path
	}
	return strings.Join(s, ", ")
}

const clientOwn = `{"selectedLayer":"era5","ui":{"panel":"open"}}`
