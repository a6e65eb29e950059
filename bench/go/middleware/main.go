// B13 for Go: events per second through aguistate.Middleware in front of a
// net/http handler that streams small STATE_DELTA events as SSE, flushing
// after each as a streaming agent does, against the same handler without it.
// The client (an http.Client in this process) reads the stream and parses
// every event. Rounds alternate (without, with, without, ...); each round's
// events per second are printed as JSON for bench/go-middleware.ts.
//
//	go run ./middleware <rounds> <events> <sidecar argv...>
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

func main() {
	rounds, err := strconv.Atoi(os.Args[1])
	check(err)
	events, err := strconv.Atoi(os.Args[2])
	check(err)
	argv := os.Args[3:]
	c, err := aguistate.Start(context.Background(), aguistate.Options{Path: argv[0], Args: argv[1:]})
	check(err)
	defer c.Close()

	mux := http.NewServeMux()
	mux.Handle("/plain", agent(events))
	mux.Handle("/repaired", aguistate.Middleware(c, aguistate.MiddlewareOptions{Own: []string{"/toolState"}})(agent(events)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() { _ = http.Serve(ln, mux) }()
	base := "http://" + ln.Addr().String()

	out := map[string][]float64{"plain": {}, "repaired": {}}
	measure := func(side string) {
		t := time.Now()
		n := read(base + "/" + side)
		if n != events+2 {
			panic(fmt.Sprintf("%s: %d events, want %d", side, n, events+2))
		}
		out[side] = append(out[side], float64(events)/time.Since(t).Seconds())
	}
	measure("plain") // warm both paths (and the sidecar's JIT) before the first round
	measure("repaired")
	out["plain"], out["repaired"] = nil, nil
	for k := 0; k < rounds; k++ {
		measure("plain")
		measure("repaired")
	}
	check(json.NewEncoder(os.Stdout).Encode(out))
}

// agent streams RUN_STARTED, n small STATE_DELTAs that apply, RUN_FINISHED.
func agent(n int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		send := func(e string) {
			_, _ = w.Write([]byte("data: " + e + "\n\n"))
			f.Flush()
		}
		send(`{"type":"RUN_STARTED","threadId":"t","runId":"r"}`)
		send(`{"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{"n":0}}]}`)
		for i := 1; i < n; i++ {
			send(`{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/toolState/n","value":` + strconv.Itoa(i) + `}]}`)
		}
		send(`{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`)
	}
}

// read reads an SSE response and parses every event's data; it returns the count.
func read(url string) int {
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(`{"threadId":"t","runId":"r","state":{}}`)))
	check(err)
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	n := 0
	for {
		line, err := br.ReadBytes('\n')
		if bytes.HasPrefix(line, []byte("data: ")) {
			var e map[string]any
			check(json.Unmarshal(line[6:], &e))
			n++
		}
		if err != nil {
			return n
		}
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
