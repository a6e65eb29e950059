package aguistate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// One run of an agent server: open the run with the client's state and the
// thread's stored tool state, let a tool write a key, forward the events.
func Example() {
	ctx := context.Background()
	c, err := aguistate.Start(ctx, aguistate.Options{}) // Path: option, else $AGUI_STATE_BIN, else agui-state on PATH
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// forward stands for your AG-UI event stream: send each event as it is.
	forward := func(events []json.RawMessage) {
		for _, e := range events {
			fmt.Println(string(e))
		}
	}
	// What the run brings (RunAgentInput), and the thread's map in your server's store.
	threadID, runID := "thread-1", "run-1"
	clientState := json.RawMessage(`{"selectedLayer":"era5"}`)
	toolState := map[string]any{}

	// Top of every run: the client's state and the thread's stored map.
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{
		ThreadID: threadID, RunID: runID,
		State:     clientState, // anything encoding/json marshals, or json.RawMessage
		ToolState: toolState,   // an empty map is sent as {}
	})
	if err != nil {
		log.Fatal(err)
	}
	forward(r.Events)

	// A tool writes a key: to your store first (it is the truth), then the diff.
	toolState["raster-ops/dataset"] = "gfs"
	d, err := c.DiffToolState(ctx, aguistate.DiffToolStateParams{
		ThreadID: threadID, Set: map[string]any{"raster-ops/dataset": "gfs"},
	})
	if err != nil {
		log.Fatal(err)
	}
	forward(d.Events) // [] when nothing moved

	// Output:
	// {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState","value":{}}]}
	// {"type":"STATE_DELTA","delta":[{"op":"add","path":"/toolState/raster-ops~1dataset","value":"gfs"}]}
}
