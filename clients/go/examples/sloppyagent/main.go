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
// UTF-8 characters) and flushed. With ?pause=1 the handler stops after the
// run's fourth event until POST /resume, and GET /paused answers once it has
// stopped: a test can then kill the sidecar in the middle of a stream.
// GET /sidecar answers the sidecar's pid.
//
//	AGUI_STATE_BIN=dist/agui-state go run ./examples/sloppyagent
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

	aguistate "github.com/agui-state/agui-state/clients/go"
)

const pauseAfter = 4 // events

func main() {
	log.SetFlags(0)
	c, err := aguistate.Start(context.Background(), aguistate.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	paused := make(chan struct{}, 1)
	resume := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/agent", agent(paused, resume))
	mux.HandleFunc("/raw", agent(paused, resume))
	mux.HandleFunc("/sidecar", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, c.Process().Pid)
	})
	mux.HandleFunc("/paused", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-paused:
			fmt.Fprint(w, "paused")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/resume", func(w http.ResponseWriter, r *http.Request) {
		resume <- struct{}{}
	})

	// The one line: the server owns /toolState, the client everything else;
	// unescaped keys are joined when that is the only way they apply.
	repair := aguistate.Middleware(c, aguistate.MiddlewareOptions{Own: []string{"/toolState"}, JoinKeys: true, Paths: []string{"/agent"}})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	log.Fatal(http.Serve(ln, repair(mux)))
}

func agent(paused, resume chan struct{}) http.HandlerFunc {
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
			if i+1 == pauseAfter && r.URL.Query().Get("pause") != "" {
				paused <- struct{}{}
				<-resume
			}
		}
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
