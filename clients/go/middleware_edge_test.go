package aguistate

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// The resume edge's conformance table (protocol/README.md §16), which the
// proxy's tests and every middleware's suite play, so that none can drift:
// each case on a fresh sidecar behind the middleware with no option but
// resume (on by default), in front of the table's app.

// edgeTable is where the table is, from this module's directory.
const edgeTable = "../../test/fixtures/resume-edge/cases.json"

type edgeRequest struct {
	Method  string
	Path    string
	Headers [][2]string
	Body    json.RawMessage // absent: no body
}

type edgeCase struct {
	Name    string
	Start   *edgeRequest
	Request edgeRequest
	Expect  struct {
		Status  int
		App     bool
		Events  *[]string // nil: not checked
		IDs     bool
		Headers map[string]string
		Absent  []string
		Body    *string // "$gone": the table's gone.body
	}
}

type edgeFixture struct {
	App struct {
		Status  int
		Headers [][2]string
		Events  []json.RawMessage
	}
	Gone struct {
		Body string
	}
	Cases []edgeCase
}

func TestResumeEdgeConformance(t *testing.T) {
	raw, err := os.ReadFile(edgeTable)
	if err != nil {
		t.Fatal(err)
	}
	var table edgeFixture
	if err := json.Unmarshal(raw, &table); err != nil || len(table.Cases) == 0 {
		t.Fatalf("%s: %v", edgeTable, err)
	}
	for _, tc := range table.Cases {
		tc := tc
		t.Run(tc.Name, func(t *testing.T) {
			c, ctx := startClient(t), testCtx(t)
			var calls int32
			s, logs := serve(t, c, MiddlewareOptions{}, edgeApp(table, &calls))
			ids := map[string]string{}
			if tc.Start != nil {
				resp := edgeSend(t, ctx, s.URL, *tc.Start, nil)
				ids = edgeIDs(t, readAll(t, resp.Body))
			}
			before := atomic.LoadInt32(&calls)
			resp := edgeSend(t, ctx, s.URL, tc.Request, ids)
			body := readAll(t, resp.Body)
			want := tc.Expect
			if resp.StatusCode != want.Status {
				t.Errorf("status %d, want %d (body %q)", resp.StatusCode, want.Status, body)
			}
			if app := atomic.LoadInt32(&calls) > before; app != want.App {
				t.Errorf("the app was called: %v, want %v", app, want.App)
			}
			blocks := dataBlocks(body)
			if want.Events != nil {
				types := []string{}
				for _, b := range blocks {
					types = append(types, eventType(t, b))
				}
				if !reflect.DeepEqual(types, *want.Events) {
					t.Errorf("events %v, want %v", types, *want.Events)
				}
			}
			for _, b := range blocks {
				if want.IDs && !strings.HasPrefix(b, "id: ") {
					t.Errorf("a block without its id: %q", b)
				}
			}
			for name, v := range want.Headers {
				if got := resp.Header.Values(name); len(got) != 1 || got[0] != v {
					t.Errorf("header %s: %q, want %q", name, got, v)
				}
			}
			for _, name := range want.Absent {
				if got := resp.Header.Values(name); len(got) > 0 {
					t.Errorf("header %s: %q, want none", name, got)
				}
			}
			if want.Body != nil {
				w := *want.Body
				if w == "$gone" {
					w = table.Gone.Body
				}
				if body != w {
					t.Errorf("body %q, want %q", body, w)
				}
			}
			if t.Failed() {
				t.Logf("the middleware's log: %s", logs)
			}
		})
	}
}

// edgeApp is the table's app: its status, headers and events for every
// request that reaches it, each counted.
func edgeApp(table edgeFixture, calls *int32) http.HandlerFunc {
	var stream bytes.Buffer
	for _, e := range table.App.Events {
		stream.WriteString("data: ")
		_ = json.Compact(&stream, e)
		stream.WriteString("\n\n")
	}
	return func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(calls, 1)
		for _, h := range table.App.Headers {
			w.Header().Add(h[0], h[1])
		}
		w.WriteHeader(table.App.Status)
		_, _ = w.Write(stream.Bytes())
	}
}

// edgeSend sends a request of the table, its header values' $names replaced
// from ids, and its body as its compact text.
func edgeSend(t *testing.T, ctx context.Context, url string, r edgeRequest, ids map[string]string) *http.Response {
	t.Helper()
	var body bytes.Buffer
	if len(r.Body) > 0 {
		if err := json.Compact(&body, r.Body); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, url+r.Path, &body)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for _, h := range r.Headers {
		v := h[1]
		if id, ok := ids[v]; ok {
			v = id
		}
		req.Header.Add(h[0], v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

var idLines = regexp.MustCompile(`(?m)^id: (.*)$`)

// edgeIDs are the ids a case's request may name: the start answer's opening
// id, the id of its last event, and the opening id forged.
func edgeIDs(t *testing.T, answer string) map[string]string {
	t.Helper()
	found := idLines.FindAllStringSubmatch(answer, -1)
	if len(found) < 2 {
		t.Fatalf("the start answer has no ids to rejoin from: %q", answer)
	}
	opening := found[0][1]
	return map[string]string{"$opening": opening, "$last": found[len(found)-1][1], "$forged": forge(opening)}
}

// dataBlocks are the SSE blocks of text that carry data, each as written.
func dataBlocks(text string) []string {
	var out []string
	for _, b := range strings.Split(text, "\n\n") {
		if strings.HasPrefix(b, "data:") || strings.Contains(b, "\ndata:") {
			out = append(out, b)
		}
	}
	return out
}

// eventType is the type of the event a data block carries.
func eventType(t *testing.T, block string) string {
	t.Helper()
	var data strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "data:") {
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	var e struct{ Type string }
	if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
		t.Fatalf("block %q: %v", block, err)
	}
	return e.Type
}
