package witness

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

// The sidecar is killed (SIGKILL, as kill -9) between two tool writes. Every
// call then returns the *ExitError; after Restart the fresh process knows no
// thread, and one openRun with the client's replayed state and the server's
// stored map brings the client up to date: later deltas apply again.
func TestCrashRecovery(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	stored := map[string]any{}
	r, err := c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "crash", State: json.RawMessage(clientOwn), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	w := open(t, c, "crash", []byte(clientOwn), r)
	step := func(key string, value any) {
		t.Helper()
		stored[key] = value // the server's store is written first: it is the truth
		d, err := c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "crash", Set: map[string]any{key: value}})
		if err != nil {
			t.Fatal(err)
		}
		w.apply(d.Events)
		w.check(ctx)
	}
	step("raster-ops/dataset", "era5")
	step("bounds", []int{0, 0, 10, 10})

	if err := c.Process().Kill(); err != nil {
		t.Fatal(err)
	}
	stored["raster-ops/dataset"] = "gfs"
	for i := 0; i < 2; i++ { // the call that meets the dead process, and a later one
		_, err = c.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "crash", Set: map[string]any{"raster-ops/dataset": "gfs"}})
		var ee *aguistate.ExitError
		if !errors.As(err, &ee) || err.Error() != "agui-state exited: signal: killed" {
			t.Fatalf("call %d after kill: %v", i, err)
		}
	}

	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetState(ctx, aguistate.GetStateParams{ThreadID: "crash"}); !errors.Is(err, aguistate.ErrUnknownThread) {
		t.Fatalf("a fresh process must not know the thread: %v", err)
	}
	r, err = c.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "crash", State: json.RawMessage(w.doc), ToolState: stored})
	if err != nil {
		t.Fatal(err)
	}
	w = open(t, c, "crash", w.doc, r)
	w.check(ctx)
	step("raster-ops/dataset", "icon")
	step("layers", []string{"t2m", "tp"})
	if !reflect.DeepEqual(w.member("toolState"), decode(t, mustJSON(t, stored))) {
		t.Fatalf("client toolState %v != stored %v", w.member("toolState"), stored)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close after restart: %v", err)
	}
	var ee *aguistate.ExitError
	if _, err := c.GetState(ctx, aguistate.GetStateParams{ThreadID: "crash"}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "exit status 0") {
		t.Fatalf("call after Close: %v", err)
	}
}
