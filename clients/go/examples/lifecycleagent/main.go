// Command lifecycleagent is an AG-UI agent server on net/http that sends the
// streams of a lifecycle table (issue 40: each case a run as a real framework
// sends it, its lifecycle broken as that framework breaks it), through
// aguistate.Middleware. It is what test/middleware/go-lifecycle.test.ts drives
// with the real @ag-ui/client.
//
// POST /agent?case=N answers case N's events, one SSE block each, flushed,
// through the middleware with Lifecycle "repair"; POST /pass?case=N the same
// through one with Lifecycle "pass", and POST /default?case=N through one
// with none (the sidecar's default, pass), all on the same sidecar. Then the
// handler ends as the case says: "eof" returns; "reset" panics with
// http.ErrAbortHandler (net/http breaks such a response off), or, with
// &panic=plain, with a plain value, as a failing agent does. Each finding the
// repair mended or discarded is a line of the log: "PATH: finding CODE OUTCOME".
//
//	AGUI_STATE_BIN=dist/agui-state go run ./examples/lifecycleagent -cases test/fixtures/lifecycle/cases.json
//
// It prints its URL on stdout; the log (the middleware's too) goes to stderr.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// lifecycleCase is what the server reads of a case: the rest is the test's.
type lifecycleCase struct {
	Name   string            `json:"name"`
	End    string            `json:"end"`
	Events []json.RawMessage `json:"events"`
}

func main() {
	log.SetFlags(0)
	file := flag.String("cases", "", "the lifecycle table (test/fixtures/lifecycle/cases.json)")
	flag.Parse()
	raw, err := os.ReadFile(*file)
	if err != nil {
		log.Fatal(err)
	}
	var table struct {
		Cases []lifecycleCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &table); err != nil {
		log.Fatalf("%s: %v", *file, err)
	}

	findings := func(r *http.Request, f aguistate.StreamFinding) {
		if f.Outcome == "mended" || f.Outcome == "discarded" {
			log.Printf("%s: finding %s %s", r.URL.Path, f.Code, f.Outcome)
		}
	}
	repair, err := aguistate.NewMiddleware(context.Background(), aguistate.MiddlewareOptions{Paths: []string{"/agent"}, Lifecycle: "repair", Findings: findings})
	if err != nil {
		log.Fatal(err)
	}
	defer repair.Close()
	// The negative controls: the same streams, their lifecycle as sent.
	pass := aguistate.Middleware(repair.Client(), aguistate.MiddlewareOptions{Paths: []string{"/pass"}, Lifecycle: "pass", Findings: findings})
	byDefault := aguistate.Middleware(repair.Client(), aguistate.MiddlewareOptions{Paths: []string{"/default"}, Findings: findings})

	mux := http.NewServeMux()
	for _, path := range []string{"/agent", "/pass", "/default"} {
		mux.Handle(path, agent(table.Cases))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, repair.Handler(pass(byDefault(mux)))))
}

// agent answers the case ?case=N names, and ends as its `end` says.
func agent(cases []lifecycleCase) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("case"))
		if err != nil || n < 0 || n >= len(cases) {
			http.Error(w, "no such case", http.StatusNotFound)
			return
		}
		c := cases[n]
		// The request is RunAgentInput: a framework reads it whole before it answers.
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		flusher := w.(http.Flusher)
		for _, e := range c.Events {
			var line bytes.Buffer // one line: the table is written pretty
			if err := json.Compact(&line, e); err != nil {
				panic(err)
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", line.Bytes()); err != nil {
				return
			}
			flusher.Flush()
		}
		if c.End == "reset" {
			if r.URL.Query().Get("panic") == "plain" {
				panic(fmt.Sprintf("the agent failed (%s)", c.Name))
			}
			panic(http.ErrAbortHandler)
		}
	}
}
