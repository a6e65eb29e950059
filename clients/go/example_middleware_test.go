package aguistate_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// The middleware, built where the app starts: the sidecar runs, ready for
// streams, before the first request. Each STATE_SNAPSHOT the agent sends
// goes out as a STATE_DELTA on /toolState alone, so the client keeps its
// own keys (here "selectedLayer"), and the log says what was changed.
func ExampleNewMiddleware() {
	ctx := context.Background()
	repair, err := aguistate.NewMiddleware(ctx, aguistate.MiddlewareOptions{
		Own:    []string{"/toolState"},
		Logger: log.New(os.Stdout, "", 0), // nil: log.Default()
	})
	if err != nil {
		log.Fatal(err) // the sidecar could not start
	}
	defer repair.Close() // once the server has stopped serving

	// An agent that sends a snapshot of its own state after a tool write.
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"type\":\"RUN_STARTED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
		fmt.Fprint(w, "data: {\"type\":\"STATE_SNAPSHOT\",\"snapshot\":{\"toolState\":{\"dataset\":\"gfs\"}}}\n\n")
		fmt.Fprint(w, "data: {\"type\":\"RUN_FINISHED\",\"threadId\":\"t\",\"runId\":\"r\"}\n\n")
	})
	server := httptest.NewServer(repair.Handler(agent)) // or http.ListenAndServe(addr, repair.Handler(mux))
	defer server.Close()

	// A run, as the client posts it: its RunAgentInput.state is the baseline.
	resp, err := http.Post(server.URL, "application/json", strings.NewReader(`{"threadId":"t","runId":"r","state":{"selectedLayer":"era5"}}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// Each event has an id, for a client that drops to rejoin from (resume):
	// the run's handle, the event's number and a nonce, random but the number.
	// The answer starts with an id alone, number 0 (no event), so that a client
	// cut before the first event has one too.
	fmt.Print(regexp.MustCompile(`(?m)^id: [\w-]+\.(\d+)\.[\w-]+$`).ReplaceAllString(string(body), "id: <run>.$1.<nonce>"))

	// Output:
	// agui-state: /: findings: 1 kept
	// id: <run>.0.<nonce>
	//
	// id: <run>.1.<nonce>
	// data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}
	//
	// id: <run>.2.<nonce>
	// data: {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{"dataset":"gfs"}}]}
	//
	// id: <run>.3.<nonce>
	// data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}
}
