package aguistate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The stream edge's conformance table (protocol/README.md §14), which the
// proxy's tests and every middleware's suite play, so that none can drift:
// each case on a fresh sidecar started with the table's sidecarArgs (the
// middleware's Client: options.sidecar "given" is every case's here), behind
// the middleware with the case's options, in front of an app on a real
// net/http server that answers the case's response and records whether it
// was called and the body it read.

// streamEdgeTable is where the table is, from this module's directory.
const streamEdgeTable = "../../test/fixtures/stream-edge/cases.json"

type streamEdgeCase struct {
	Name    string
	Runners []string
	Options map[string]json.RawMessage
	Request struct {
		Method  string
		Path    string
		Headers [][2]string
		Body    *string
		Pad     int
	}
	Response struct {
		Status  int
		Headers [][2]string
		Body    string
	}
	Expect struct {
		App     *bool
		Status  int
		Body    *string
		IDs     string
		Headers map[string]*string
		AppBody string
		Error   string
	}
}

// plays: the case is Go's to play (no runners named, or "go" among them).
func (c streamEdgeCase) plays() bool {
	if c.Runners == nil {
		return true
	}
	for _, r := range c.Runners {
		if r == "go" {
			return true
		}
	}
	return false
}

func TestStreamEdgeConformance(t *testing.T) {
	raw, err := os.ReadFile(streamEdgeTable)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		SidecarArgs []string
		Cases       []streamEdgeCase
	}
	if err := json.Unmarshal(raw, &table); err != nil || len(table.Cases) == 0 {
		t.Fatalf("%s: %v", streamEdgeTable, err)
	}
	want, played := 0, 0
	for _, tc := range table.Cases {
		if !tc.plays() {
			continue
		}
		want++
		tc := tc
		t.Run(tc.Name, func(t *testing.T) {
			played++
			c, ctx := startClient(t, table.SidecarArgs...), testCtx(t)
			opts := streamEdgeOptions(t, tc.Options)
			if tc.Expect.Error != "" {
				err := opts.Check(c)
				if err == nil || !strings.Contains(err.Error(), tc.Expect.Error) {
					t.Errorf("Check: %v, want an error naming %s", err, tc.Expect.Error)
				}
				if p := panics(func() { Middleware(c, opts) }); !strings.Contains(fmt.Sprint(p), tc.Expect.Error) {
					t.Errorf("Middleware: %v, want a panic naming %s", p, tc.Expect.Error)
				}
				return
			}
			var mu sync.Mutex
			called, appBody := false, []byte(nil)
			s, logs := serve(t, c, opts, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				called, appBody = true, b
				mu.Unlock()
				for _, h := range tc.Response.Headers {
					w.Header().Add(h[0], h[1])
				}
				w.WriteHeader(tc.Response.Status)
				_, _ = io.WriteString(w, tc.Response.Body)
			})
			var sent []byte
			body := io.Reader(http.NoBody)
			if tc.Request.Body != nil {
				sent = []byte(strings.Replace(*tc.Request.Body, "@PAD@", strings.Repeat("x", tc.Request.Pad), 1))
				body = bytes.NewReader(sent)
			}
			req, err := http.NewRequestWithContext(ctx, tc.Request.Method, s.URL+tc.Request.Path, body)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tc.Request.Headers {
				req.Header.Add(h[0], h[1])
			}
			resp, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got := readAll(t, resp.Body)
			mu.Lock()
			defer mu.Unlock()
			x := tc.Expect
			if x.App != nil && called != *x.App {
				t.Errorf("the app was called: %v, want %v", called, *x.App)
			}
			if x.Status != 0 && resp.StatusCode != x.Status {
				t.Errorf("status %d, want %d", resp.StatusCode, x.Status)
			}
			if x.Body != nil {
				if x.IDs == "strip" {
					got = streamEdgeIDLines.ReplaceAllString(got, "")
				}
				if got != *x.Body {
					t.Errorf("body\n got %q\nwant %q", got, *x.Body)
				}
			}
			for name, v := range x.Headers {
				vs := resp.Header.Values(name)
				switch {
				case v == nil && len(vs) > 0:
					t.Errorf("header %s: %q, want none", name, vs)
				case v != nil && strings.Join(vs, ", ") != *v:
					t.Errorf("header %s: %q, want %q", name, vs, *v)
				}
			}
			if x.AppBody == "same" && !bytes.Equal(appBody, sent) {
				t.Errorf("the app read %d bytes, not the %d sent", len(appBody), len(sent))
			}
			if t.Failed() {
				t.Logf("the middleware's log: %s", logs)
			}
		})
	}
	// Every row of the table is Go's: a row left out of this count, or one
	// skipped, fails here.
	if played != want || want != 29 || len(table.Cases) != 29 {
		t.Errorf("played %d of the table's %d Go cases (of %d), want 29 of 29", played, want, len(table.Cases))
	}
}

var streamEdgeIDLines = regexp.MustCompile(`(?m)^id:[^\n]*\n`)

// streamEdgeOptions are a case's options as MiddlewareOptions; an option this
// runner does not know fails the case, rather than being played without it.
func streamEdgeOptions(t *testing.T, options map[string]json.RawMessage) MiddlewareOptions {
	t.Helper()
	var o MiddlewareOptions
	for name, v := range options {
		var err error
		switch name {
		case "paths":
			err = json.Unmarshal(v, &o.Paths)
		case "own":
			err = json.Unmarshal(v, &o.Own)
		case "snapshots":
			err = json.Unmarshal(v, &o.Snapshots)
		case "joinKeys":
			err = json.Unmarshal(v, &o.JoinKeys)
		case "lifecycle":
			err = json.Unmarshal(v, &o.Lifecycle)
		case "resume":
			on := true
			err = json.Unmarshal(v, &on)
			o.NoResume = !on
		case "store":
			err = json.Unmarshal(v, &o.Store)
		case "sidecar": // "given": a sidecar of one's own, as every case here has (the Client)
			if string(v) != `"given"` {
				t.Fatalf("option sidecar %s", v)
			}
		default:
			t.Fatalf("option %s: this runner does not know it", name)
		}
		if err != nil {
			t.Fatalf("option %s: %v", name, err)
		}
	}
	return o
}

// panics is what f panics with, nil if it returns.
func panics(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
