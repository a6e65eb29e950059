// B25's Go server (bench/big-state.ts): a net/http handler that answers every
// POST, once it has read the request body, with the run in the file given
// (bench/big-state-run.ts: SSE, ~6 STATE_SNAPSHOTs of a ~1 MB state), each
// event written and flushed on its own, at /plain as it is and at /mw through
// aguistate.Middleware with Own set to the server's members. It prints
// "listening on PORT" and serves until it is killed.
//
//	go run ./bigstate <run file> <own,own,...> <sidecar argv...>
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

func main() {
	run, err := os.ReadFile(os.Args[1])
	check(err)
	var events [][]byte
	for _, e := range bytes.Split(run, []byte("\n\n")) {
		if len(e) > 0 {
			events = append(events, append(e, '\n', '\n'))
		}
	}
	own := strings.Split(os.Args[2], ",")
	argv := os.Args[3:]
	c, err := aguistate.Start(context.Background(), aguistate.Options{Path: argv[0], Args: argv[1:]})
	check(err)
	defer c.Close()

	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for _, e := range events {
			_, _ = w.Write(e)
			f.Flush()
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/plain", agent)
	mux.Handle("/mw", aguistate.Middleware(c, aguistate.MiddlewareOptions{Own: own})(agent))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	check(http.Serve(ln, mux))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
