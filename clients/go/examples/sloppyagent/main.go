// Command sloppyagent is an AG-UI agent server on net/http that makes the
// mistakes agent frameworks are known to make, served twice: at /agent
// through aguistate.Middleware, and at /raw as it is. It is what
// test/middleware/go.test.ts drives with the real @ag-ui/client (issue 24 §6).
//
// Each run, as a framework writes it:
//   - a STATE_SNAPSHOT after every write, of the server's state only: it
//     replaces the client's whole state, and so wipes the client's own keys;
//   - a key with "/" sent unescaped (/toolState/raster-ops/dataset);
//   - an append to /todos before /todos exists.
//
// Every event is written in slices of 5 bytes (so writes cut events, lines and
// UTF-8 characters) and flushed. With ?pause=NAME the handler stops after the
// run's fourth event (with &at=0, before its first, its head sent) until POST /resume?name=NAME, and GET /paused?name=NAME
// answers once it has stopped: a test can then kill the sidecar in the middle
// of one stream, or of several. GET /sidecar answers the sidecar's pid (its
// address when it is the host's shared one, AGUI_STATE_SIDECAR).
//
// The sidecar is started, ready for streams, before the URL is printed
// (aguistate.NewMiddleware), not at the first request.
//
// Resume (protocol/README.md §16) is on, as by default: -store names the
// sidecar's run log (redis://... to share runs between servers), and
// -detach-grace how long a run goes on after its client left (-no-resume
// turns resume off), -log-bytes the run log's cap. GET /hits
// answers how many times the agent handler was called, GET /requests how many
// requests to /agent (and below it) reached the server, the ones the
// middleware answered itself included, and GET /cancelled?name=NAME answers
// once the paused handler NAME saw its context cancelled. With ?raise=N the
// handler panics once it has written N events: an app that fails mid-run
// (by default, or -lifecycle pass, the response breaks off; with -lifecycle
// repair the sidecar ends the run with RUN_ERROR and the response ends
// cleanly; issue 40).
//
//	AGUI_STATE_BIN=dist/agui-state go run ./examples/sloppyagent [-store redis://127.0.0.1:6379] [-detach-grace 30s]
//
// It prints its URL on stdout; the log (the middleware's too) goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

const pauseAfter = 4 // events

func main() {
	log.SetFlags(0)
	store := flag.String("store", "", "the sidecar's run log: memory (the default) or redis://HOST:PORT[/DB]")
	grace := flag.Duration("detach-grace", 0, "how long a run goes on after its client left (0: the sidecar's default)")
	noResume := flag.Bool("no-resume", false, "no resume: no event ids, no detach, no rejoin")
	logBytes := flag.String("log-bytes", "", "the sidecar's --log-bytes: past it the least recently used run is evicted from the run log")
	lifecycle := flag.String("lifecycle", "", "the middleware's Lifecycle: repair, or pass (the default)")
	flag.Parse()
	// The one line: the server owns /toolState, the client everything else;
	// unescaped keys are joined when that is the only way they apply.
	repair, err := aguistate.NewMiddleware(context.Background(), aguistate.MiddlewareOptions{
		Own: []string{"/toolState"}, JoinKeys: true, Paths: []string{"/agent"},
		Store: *store, DetachGrace: *grace, NoResume: *noResume, Sidecar: sidecar(*logBytes), Lifecycle: *lifecycle,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer repair.Close()

	var pauses pauses
	var hits, requests int64 // atomic
	mux := http.NewServeMux()
	mux.HandleFunc("/agent", func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt64(&hits, 1)
		agent(&pauses)(w, r)
	})
	mux.HandleFunc("/raw", agent(&pauses))
	mux.HandleFunc("/hits", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, atomic.LoadInt64(&hits))
	})
	mux.HandleFunc("/requests", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, atomic.LoadInt64(&requests))
	})
	mux.HandleFunc("/cancelled", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-pauses.get(r.URL.Query().Get("name")).cancelled:
			fmt.Fprint(w, "cancelled")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/sidecar", func(w http.ResponseWriter, r *http.Request) {
		if p := repair.Client().Process(); p != nil {
			fmt.Fprint(w, p.Pid)
		} else {
			fmt.Fprint(w, repair.Client().Address()) // the host's shared sidecar (AGUI_STATE_SIDECAR)
		}
	})
	mux.HandleFunc("/paused", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-pauses.get(r.URL.Query().Get("name")).paused:
			fmt.Fprint(w, "paused")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/resume", func(w http.ResponseWriter, r *http.Request) {
		pauses.get(r.URL.Query().Get("name")).resume <- struct{}{}
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	repaired := repair.Handler(mux)
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/agent" || strings.HasPrefix(r.URL.Path, "/agent/") {
			atomic.AddInt64(&requests, 1)
		}
		repaired.ServeHTTP(w, r)
	})))
}

// sidecar is the options of the sidecar the middleware starts: its own, but
// for -log-bytes.
func sidecar(logBytes string) aguistate.Options {
	if logBytes == "" {
		return aguistate.Options{}
	}
	return aguistate.Options{Args: []string{"--log-bytes", logBytes}}
}

// pauses are the named points where a handler waits for the test.
type pauses struct {
	mu sync.Mutex
	m  map[string]*pause
}

type pause struct{ paused, resume, cancelled chan struct{} }

func (ps *pauses) get(name string) *pause {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.m == nil {
		ps.m = map[string]*pause{}
	}
	if ps.m[name] == nil {
		ps.m[name] = &pause{make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{})}
	}
	return ps.m[name]
}

func agent(pauses *pauses) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			ThreadID string `json:"threadId"`
			RunID    string `json:"runId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		flusher := w.(http.Flusher)
		// The pause comes after the run's fourth event, or (?pause=NAME&at=0)
		// before its first, once the head is sent: the run's opening id block
		// (protocol/README.md §16) must reach the client without any event.
		at := pauseAfter
		if v := r.URL.Query().Get("at"); v != "" {
			at, _ = strconv.Atoi(v)
		}
		if at == 0 {
			w.WriteHeader(http.StatusOK)
			flusher.Flush()
			if !wait(pauses, r, 0, at) {
				return
			}
		}
		for i, e := range events(in.ThreadID, in.RunID) {
			frame := []byte("data: " + e + "\n\n")
			for len(frame) > 0 {
				n := 5
				if n > len(frame) {
					n = len(frame)
				}
				if _, err := w.Write(frame[:n]); err != nil {
					return
				}
				frame = frame[n:]
			}
			flusher.Flush()
			if raise := r.URL.Query().Get("raise"); raise == strconv.Itoa(i+1) {
				panic("the agent failed")
			}
			if !wait(pauses, r, i+1, at) {
				return
			}
		}
	}
}

// wait holds the handler under ?pause=NAME once it has written n events, when
// n is the pause's point; false when its context was cancelled meanwhile.
func wait(pauses *pauses, r *http.Request, n, at int) bool {
	name := r.URL.Query().Get("pause")
	if n != at || name == "" {
		return true
	}
	p := pauses.get(name)
	p.paused <- struct{}{}
	select {
	case <-p.resume:
		return true
	case <-r.Context().Done():
		close(p.cancelled)
		return false
	}
}

func q(s string) string { return strconv.Quote(s) } // the values here are plain: Go's quoting is JSON's

func events(threadID, runID string) []string {
	dataset, todo, msg := q("era5 "+runID), q("milk ☕ "+runID), q("m-"+runID)
	return []string{
		`{"type":"RUN_STARTED","threadId":` + q(threadID) + `,"runId":` + q(runID) + `}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{}}}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState/raster-ops/dataset","value":` + dataset + `}]}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"raster-ops/dataset":` + dataset + `}}}`,
		`{"type":"TEXT_MESSAGE_START","messageId":` + msg + `,"role":"assistant"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":` + msg + `,"delta":"Planning… 🗺"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":` + msg + `}`,
		`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/todos/-","value":` + todo + `}]}`,
		`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"raster-ops/dataset":` + dataset + `,"count":1},"todos":[` + todo + `]}}`,
		`{"type":"RUN_FINISHED","threadId":` + q(threadID) + `,"runId":` + q(runID) + `}`,
	}
}
