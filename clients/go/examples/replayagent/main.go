// Command replayagent serves recorded answers of a real framework
// (test/fixtures/frameworks/<framework>/*.json) on net/http through
// aguistate.Middleware. It is what test/frameworks/langgraph-go.test.ts
// drives with the real @ag-ui/client.
//
// Each fixture is a thread: its path, its own (the members the framework
// writes) and its runs, each the request and every byte of the answer. A POST
// to a fixture's path goes through a Middleware of its own (Own: the
// fixture's own, Paths: its path; one sidecar for all) to the replay handler,
// which answers the run whose request.runId is the request's runId (404 for
// any other): the recorded status and content type, then the recorded body,
// one flushed write per SSE event, as the framework's server sent them.
//
//	AGUI_STATE_BIN=dist/agui-state go run ./examples/replayagent -fixtures test/fixtures/frameworks/langgraph
//
// It prints its URL on stdout; the middleware's log goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// recordedRun is what the server reads of a run: the rest is the test's.
type recordedRun struct {
	Request struct {
		RunID string `json:"runId"`
	} `json:"request"`
	Status      int    `json:"status"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
}

type fixture struct {
	Path string        `json:"path"`
	Own  []string      `json:"own"`
	Runs []recordedRun `json:"runs"`
}

// eventEnd is where each SSE event ends: its blank line.
var eventEnd = regexp.MustCompile(`\n\n`)

func main() {
	log.SetFlags(0)
	dir := flag.String("fixtures", "", "the folder of fixtures (test/fixtures/frameworks/langgraph)")
	flag.Parse()
	files, err := filepath.Glob(filepath.Join(*dir, "*.json"))
	if err != nil || len(files) == 0 {
		log.Fatalf("no fixtures in %q (%v)", *dir, err)
	}
	sort.Strings(files)
	var fixtures []fixture
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			log.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(raw, &f); err != nil {
			log.Fatalf("%s: %v", file, err)
		}
		fixtures = append(fixtures, f)
	}

	sidecar, err := aguistate.Start(context.Background(), aguistate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer sidecar.Close()
	mux := http.NewServeMux()
	for _, f := range fixtures {
		own := aguistate.Middleware(sidecar, aguistate.MiddlewareOptions{Own: f.Own, Paths: []string{f.Path}})
		mux.Handle(f.Path, own(replay(f)))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}

// replay answers the run of f the request's runId names, as recorded.
func replay(f fixture) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sent struct {
			RunID string `json:"runId"`
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil || json.Unmarshal(raw, &sent) != nil {
			http.Error(w, "not a RunAgentInput", http.StatusBadRequest)
			return
		}
		for _, run := range f.Runs {
			if run.Request.RunID != sent.RunID {
				continue
			}
			w.Header().Set("Content-Type", run.ContentType)
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(run.Status)
			flusher := w.(http.Flusher)
			from := 0
			for _, end := range append(eventEnd.FindAllStringIndex(run.Body, -1), []int{len(run.Body), len(run.Body)}) {
				if end[1] <= from {
					continue
				}
				if _, err := io.WriteString(w, run.Body[from:end[1]]); err != nil {
					return
				}
				flusher.Flush()
				from = end[1]
			}
			return
		}
		http.Error(w, "no recorded run "+sent.RunID, http.StatusNotFound)
	}
}
