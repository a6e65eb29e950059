package aguistate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// How a call is carried (issue 26): the calling goroutine reads its own
// reply; many goroutines share one sidecar, each reply reaching its own call;
// a sidecar that dies fails every waiting call at once with *ExitError, not
// with its ctx; a call whose ctx ends while it reads gives the reading up to
// the calls still waiting.

// holdSidecar echoes params, but holds every reply back until a "release"
// request, then answers what it holds last first, "release" last. "sync" is
// answered at once: when its reply is back, every request sent before it has
// been read.
func holdSidecar() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	var held []string
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil {
			os.Exit(3)
		}
		reply := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, req.Params)
		switch req.Method {
		case "sync":
			fmt.Println(reply)
		case "release":
			for i := len(held) - 1; i >= 0; i-- {
				fmt.Println(held[i])
			}
			held = held[:0]
			fmt.Println(reply)
		default:
			held = append(held, reply)
		}
	}
}

type echoed struct {
	N int `json:"n"`
}

// waitingCalls starts n echo calls that the hold stand-in keeps waiting, and
// returns once the stand-in has read all of them.
func waitingCalls(t *testing.T, c *Client, ctxs []context.Context) []chan error {
	t.Helper()
	errs := make([]chan error, len(ctxs))
	for i, ctx := range ctxs {
		errs[i] = make(chan error, 1)
		go func(i int, ctx context.Context) {
			var r echoed
			err := c.Call(ctx, "echo", map[string]int{"n": i}, &r)
			if err == nil && r.N != i {
				err = fmt.Errorf("call %d got the reply for %d", i, r.N)
			}
			errs[i] <- err
		}(i, ctx)
	}
	for {
		// The stand-in has read a request once a later "sync" is answered; the
		// calls' requests are in once pending holds them all and sync.
		if err := c.Call(testCtx(t), "sync", nil, nil); err != nil {
			t.Fatal(err)
		}
		c.p.mu.Lock()
		n := len(c.p.pending)
		c.p.mu.Unlock()
		if n == len(ctxs) {
			return errs
		}
	}
}

func TestKill9FailsEveryWaitingCallAtOnce(t *testing.T) {
	c, ctx := startFake(t, "hold", Options{}), testCtx(t)
	// Each waits with a 60 s ctx: a call that waited for its ctx would end with
	// context.DeadlineExceeded, not with the exit.
	errs := waitingCalls(t, c, []context.Context{ctx, ctx, ctx, ctx})
	if err := c.Process().Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i, ch := range errs {
		err := <-ch
		var ee *ExitError
		if !errors.As(err, &ee) || err.Error() != "agui-state exited: signal: killed" {
			t.Fatalf("call %d: want the ExitError of the kill, got %v", i, err)
		}
	}
	var ee *ExitError
	if _, err := c.Stats(ctx); !errors.As(err, &ee) {
		t.Fatalf("a call after the exit: %v", err)
	}
}

func TestCancelledReaderHandsTheReadingOver(t *testing.T) {
	c, ctx := startFake(t, "hold", Options{}), testCtx(t)
	cancellable, cancel := context.WithCancel(ctx) // no deadline: the reader looks at it every pollCancel
	errs := waitingCalls(t, c, []context.Context{cancellable, ctx, cancellable, ctx})
	cancel()
	for _, i := range []int{0, 2} {
		if err := <-errs[i]; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call %d: %v", i, err)
		}
	}
	if err := c.Call(ctx, "release", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 3} {
		if err := <-errs[i]; err != nil {
			t.Fatalf("call %d, still waiting when the others were cancelled: %v", i, err)
		}
	}
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	if err := c.Call(short, "echo", map[string]int{"n": 9}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call whose deadline passes while it reads: %v", err)
	}
	var r echoed
	if err := c.Call(ctx, "sync", map[string]int{"n": 7}, &r); err != nil || r.N != 7 {
		t.Fatalf("the stream after cancelled calls: %v %v", r, err)
	}
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if len(c.p.pending) != 0 { // the call that timed out is forgotten: its late reply goes nowhere
		t.Fatalf("pending after every call returned: %v", c.p.pending)
	}
}

func TestManyGoroutinesEachGetTheirOwnReplies(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	const n, calls = 32, 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			tid := fmt.Sprintf("many-%d", i)
			if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: tid, State: map[string]any{"who": i}}); err != nil {
				t.Error(err)
				return
			}
			for k := 0; k < calls; k++ {
				// Each reply names what only its own request asked for.
				ptr, err := c.EscapePointer(ctx, []any{fmt.Sprintf("t%d/k%d", i, k), k})
				if want := fmt.Sprintf("/t%d~1k%d/%d", i, k, k); err != nil || ptr != want {
					t.Errorf("goroutine %d call %d: pointer %q, %v; want %q", i, k, ptr, err, want)
				}
				ch, err := c.DiffState(ctx, DiffStateParams{ThreadID: tid, Path: "/k", Value: k})
				if err != nil || ch.Version != k+2 {
					t.Errorf("goroutine %d call %d: version %v, %v", i, k, ch, err)
				}
			}
			got, err := c.GetState(ctx, GetStateParams{ThreadID: tid})
			if want := fmt.Sprintf(`{"who":%d,"k":%d}`, i, calls-1); err != nil || strings.ReplaceAll(string(got.State), " ", "") != want {
				t.Errorf("goroutine %d: state %s, %v; want %s", i, got.State, err, want)
			}
		}(i)
	}
	wg.Wait()
}
