// Command raiseagent is an AG-UI agent server on net/http whose handler
// writes N events and then panics, as an agent whose node fails mid-run does.
// It is what test/middleware/go-raise.test.ts drives with the real
// @ag-ui/client: everything the handler wrote before its panic must reach the
// client, repaired, in order, and the response then end as net/http ends it.
//
// POST /repair?n=N&size=S answers through aguistate.Middleware with Lifecycle
// "repair", POST /pass?... through one with Lifecycle "pass", both on one
// sidecar, and POST /direct?... without a middleware; GET /stats is the
// sidecar's stats (its open streams). The events are
// RUN_STARTED (the request's threadId and runId), then in turn a
// STATE_SNAPSHOT {step, pad}, a STATE_DELTA of /step, and a text message's
// start, content and end, where pad and the content are S characters; each
// is one SSE block, flushed; with &finished=1 the last of the N is a
// RUN_FINISHED. Then the handler panics with
// http.ErrAbortHandler, or with &panic=plain, with a plain value.
//
//	AGUI_STATE_BIN=dist/agui-state go run ./examples/raiseagent
//
// It prints its URL on stdout; the log (the middleware's too) goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

func main() {
	log.SetFlags(0)
	repair, err := aguistate.NewMiddleware(context.Background(), aguistate.MiddlewareOptions{Paths: []string{"/repair"}, Lifecycle: "repair"})
	if err != nil {
		log.Fatal(err)
	}
	defer repair.Close()
	pass := aguistate.Middleware(repair.Client(), aguistate.MiddlewareOptions{Paths: []string{"/pass"}, Lifecycle: "pass"})

	mux := http.NewServeMux()
	for _, path := range []string{"/repair", "/pass", "/direct"} {
		mux.HandleFunc(path, agent)
	}
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		stats, err := repair.Client().Stats(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(stats)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, repair.Handler(pass(mux))))
}

// events is the run the handler writes: n events, each pad of size characters.
func events(threadID, runID string, n, size int, finished bool) []map[string]any {
	pad := strings.Repeat("p", size)
	out := []map[string]any{{"type": "RUN_STARTED", "threadId": threadID, "runId": runID}}
	for i := 1; i < n; i++ {
		m := func(k int) string { return "m" + strconv.Itoa(i-k) }
		switch (i - 1) % 5 {
		case 0:
			out = append(out, map[string]any{"type": "STATE_SNAPSHOT", "snapshot": map[string]any{"step": i, "pad": pad}})
		case 1:
			out = append(out, map[string]any{"type": "STATE_DELTA", "delta": []any{map[string]any{"op": "add", "path": "/step", "value": i}}})
		case 2:
			out = append(out, map[string]any{"type": "TEXT_MESSAGE_START", "messageId": m(0), "role": "assistant"})
		case 3:
			out = append(out, map[string]any{"type": "TEXT_MESSAGE_CONTENT", "messageId": m(1), "delta": pad})
		case 4:
			out = append(out, map[string]any{"type": "TEXT_MESSAGE_END", "messageId": m(2)})
		}
	}
	if finished && n > 1 {
		out[n-1] = map[string]any{"type": "RUN_FINISHED", "threadId": threadID, "runId": runID}
	}
	return out
}

// agent writes the events the query asks for, each flushed, and panics.
func agent(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	n, _ := strconv.Atoi(q.Get("n"))
	size, _ := strconv.Atoi(q.Get("size"))
	var input struct {
		ThreadID string `json:"threadId"`
		RunID    string `json:"runId"`
	}
	if err := json.NewDecoder(r.Body).Decode(&input); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	for _, e := range events(input.ThreadID, input.RunID, n, size, q.Get("finished") == "1") {
		line, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", line); err != nil {
			return
		}
		flusher.Flush()
	}
	if q.Get("panic") == "plain" {
		panic("the agent's node failed after its last event")
	}
	panic(http.ErrAbortHandler)
}
