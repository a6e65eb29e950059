// B22go (issue 31): the time to the first event of the first stream after a
// net/http app behind aguistate.NewMiddleware is ready (NewMiddleware has
// returned and the server listens), against a later stream's, on the same
// server. Each round is a fresh app, so a fresh sidecar. Beside it, the same
// first stream behind Middleware(nil, ...), which starts the sidecar at the
// first stream, as before. Times in milliseconds, printed as JSON for
// bench/go-firststream.ts.
//
//	go run ./firststream <rounds> <sidecar argv...>
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

func main() {
	var rounds int
	_, err := fmt.Sscan(os.Args[1], &rounds)
	check(err)
	sidecar := aguistate.Options{Path: os.Args[2], Args: os.Args[3:]}
	opts := aguistate.MiddlewareOptions{Own: []string{"/toolState"}, Sidecar: sidecar, Logger: log.New(io.Discard, "", 0)}
	out := map[string][]float64{"first": {}, "later": {}, "lazy": {}}
	for k := 0; k < rounds; k++ {
		// The app starts: NewMiddleware returns with the sidecar ready.
		repair, err := aguistate.NewMiddleware(context.Background(), opts)
		check(err)
		url, stop := serve(repair.Handler(agent()))
		out["first"] = append(out["first"], firstEvent(url))
		out["later"] = append(out["later"], firstEvent(url))
		stop()
		check(repair.Close())

		// As before: the sidecar starts at the first stream.
		lazy := aguistate.Middleware(nil, opts)
		url, stop = serve(lazy(agent()))
		out["lazy"] = append(out["lazy"], firstEvent(url))
		stop()
	}
	check(json.NewEncoder(os.Stdout).Encode(out))
	// The lazy sidecars are left to exit with this process (their stdin closes).
}

// serve listens on a loopback port; stop closes the server.
func serve(h http.Handler) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	s := &http.Server{Handler: h}
	go func() { _ = s.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = s.Close() }
}

// firstEvent posts a run and returns the milliseconds until its first event
// has been read whole, then reads the rest.
func firstEvent(url string) float64 {
	t := time.Now()
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"threadId":"t","runId":"r","state":{"ui":1}}`))
	check(err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	// The first block with data: the answer opens with a block of its id alone (protocol/README.md §16).
	data := false
	for {
		line, err := r.ReadString('\n')
		check(err)
		if strings.HasPrefix(line, "data:") {
			data = true
		}
		if line == "\n" && data {
			break
		}
	}
	ms := float64(time.Since(t).Microseconds()) / 1000
	_, err = io.Copy(io.Discard, r)
	check(err)
	return ms
}

// agent streams a short run, as a framework writes one: RUN_STARTED at once,
// then a snapshot and RUN_FINISHED.
func agent() http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, e := range []string{
			`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`,
			`{"type":"STATE_SNAPSHOT","snapshot":{"toolState":{"n":1}}}`,
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`,
		} {
			_, _ = w.Write([]byte("data: " + e + "\n\n"))
			f.Flush()
		}
	}
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
