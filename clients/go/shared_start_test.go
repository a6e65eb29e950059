package aguistate

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The sidecar flags a client is given and start mode (protocol/README.md §2,
// "One sidecar per host"): in start mode they are the started sidecar's, and
// one that refuses them (exit 2) is not started again; with an address and
// no start mode they would reach no sidecar, and are refused at once.

// A start whose command line the sidecar refuses (`--max-ops 0`: exit 2, not
// 3, "a sidecar serves there already") fails at once, showing the command:
// every other start would meet the same refusal. The middleware fails open on
// it: the response goes out as the handler wrote it, and the log says why.
func TestAStartWhoseFlagsAreRefusedFailsAtOnce(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	killSidecarsAtEnd(t, sock)
	address := "unix:" + sock
	want := "agui-state: the sidecar started at " + address + " refused its command line (exit 2): " +
		sidecarBin() + " serve --listen " + address + " --exit-idle 60000 --max-ops 0"
	c, err := Start(ctx, Options{Address: address, Start: true, Args: []string{"--max-ops", "0"}})
	if c != nil || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Start: %v %v\nwant %q", c, err, want)
	}

	logs := &lockedBuffer{}
	opts := ownToolState
	opts.Logger = logTo(logs)
	opts.Sidecar = Options{Address: address, Start: true, Args: []string{"--max-ops", "0"}}
	if _, err := NewMiddleware(ctx, opts); err == nil || err.Error() != want {
		t.Errorf("NewMiddleware: %v\nwant %q", err, want)
	}
	stream := sse(sloppy)
	s := serveHandler(t, Middleware(nil, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	})))
	if got := readAll(t, post(t, ctx, s.URL, `{}`).Body); got != stream {
		t.Errorf("the response:\n got %q\nwant it as written %q", got, stream)
	}
	if !strings.Contains(logs.String(), "could not be classified ("+want+"); it goes to the handler") {
		t.Errorf("log %s", logs.String())
	}
	if pids := servingSidecars(t, sock); len(pids) != 0 {
		t.Errorf("sidecars %v left serving, want none", pids)
	}
}

// With an address and no start mode, Args (Store, DetachGrace and
// Sidecar.Args for the middleware) could reach no sidecar: the client and
// the middleware refuse them when they are made, naming them; in start mode,
// the environment's included, they go to the sidecar started.
func TestSidecarFlagsWithoutStartModeAreRefused(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	address := "unix:" + sock
	unstarted := " the flags of a sidecar this client starts, but with an address (" + address +
		") and no start mode no sidecar is started here; drop "
	if _, err := Start(ctx, Options{Address: address, Args: []string{"--max-ops", "9"}}); !errors.Is(err, ErrConflictingOptions) ||
		err.Error() != `agui-state: CONFLICTING_OPTIONS: Args ["--max-ops" "9"] gives`+unstarted+"it, or set start mode (Start, or AGUI_STATE_SIDECAR_START=1)" {
		t.Errorf("Start: %v", err)
	}
	opts := MiddlewareOptions{Store: "memory", Sidecar: Options{Address: address}}
	if _, err := NewMiddleware(ctx, opts); !errors.Is(err, ErrConflictingOptions) ||
		err.Error() != "agui-state: CONFLICTING_OPTIONS: Store gives"+unstarted+"it, or set start mode (Start, or AGUI_STATE_SIDECAR_START=1)" {
		t.Errorf("NewMiddleware: %v", err)
	}
	t.Setenv(EnvSidecar, address) // the environment's address counts as the option's
	opts = MiddlewareOptions{DetachGrace: time.Second, Sidecar: Options{Args: []string{"--max-ops", "9"}}}
	want := `agui-state: CONFLICTING_OPTIONS: DetachGrace and Sidecar.Args ["--max-ops" "9"] give` + unstarted + "them, or set start mode (Start, or AGUI_STATE_SIDECAR_START=1)"
	if err := opts.Check(nil); !errors.Is(err, ErrConflictingOptions) || err.Error() != want {
		t.Errorf("Check: %v\nwant %q", err, want)
	}
	if p, _ := panics(func() { Middleware(nil, opts) }).(error); p == nil || p.Error() != want {
		t.Errorf("Middleware panicked with %v", p)
	}
	t.Setenv(EnvSidecarStart, "1")
	if err := opts.Check(nil); err != nil {
		t.Errorf("in start mode: %v", err)
	}
}

// A connection counts as made once the sidecar has answered on it
// (protocol/README.md §2): a sidecar being killed still accepts connections
// until its socket closes, and closes them unanswered. One such, here a
// listener that closes every connection it takes, is nobody answering.
func TestAConnectionClosedUnansweredIsNobodyAnswering(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	c, err := Start(ctx, Options{Address: "unix:" + sock})
	if want := "agui-state: no sidecar answers at unix:" + sock + ": the connection closed before the sidecar answered"; c != nil || err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Start: %v %v\nwant %q", c, err, want)
	}
}
