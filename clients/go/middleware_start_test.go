package aguistate

import (
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// NewMiddleware starts the sidecar before it returns (issue 31): the process
// runs before any request, its stream pipeline loaded; its responses are
// repaired as Middleware's; Close stops it.
func TestNewMiddlewareStartsTheSidecar(t *testing.T) {
	ctx := testCtx(t)
	logs := &lockedBuffer{}
	opts := ownToolState
	opts.Logger = log.New(logs, "", 0)
	repair, err := NewMiddleware(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := repair.Client().Process()
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("no sidecar process after NewMiddleware: %v", err)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(p.Pid) + "/exe")
	if want, _ := os.Readlink("/proc/self/exe"); err != nil || exe == want {
		t.Fatalf("the process %d is %q (%v), want the sidecar", p.Pid, exe, err)
	}
	if st, err := repair.Client().Stats(ctx); err != nil || st.Streams != 0 || st.Requests != 4 {
		t.Errorf("stats %+v %v: want openStream, fixStream and closeStream before it, and no stream open", st, err)
	}

	s := httptest.NewServer(repair.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		writeSliced(w, sse(sloppy), 7, true)
	})))
	defer s.Close()
	if out, want := readAll(t, post(t, ctx, s.URL, `{}`).Body), fixed(t, "{}", sse(sloppy), ownArgs...); out != want {
		t.Errorf("got %q\nwant %q", out, want)
	}
	if repair.Client().Process().Pid != p.Pid {
		t.Error("the request started another sidecar")
	}

	if err := repair.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := p.Signal(syscall.Signal(0)); err == nil {
		t.Error("the sidecar still runs after Close")
	}
}

// A sidecar that cannot start is NewMiddleware's error, not a panic, and
// nothing is left running; one that exits at once, the same.
func TestNewMiddlewareReturnsStartErrors(t *testing.T) {
	ctx := testCtx(t)
	repair, err := NewMiddleware(ctx, MiddlewareOptions{Sidecar: Options{Path: "/nonexistent/agui-state"}})
	if repair != nil || err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%v %v, want a not-found error", repair, err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewMiddleware(ctx, MiddlewareOptions{Sidecar: Options{Path: exe, Env: append(os.Environ(), "AGUI_STATE_FAKE=garbage"), Stderr: io.Discard}})
	var exited *ExitError
	if !errors.As(err, &exited) || !strings.Contains(err.Error(), "did not start its stream repair") {
		t.Errorf("%v, want the sidecar's exit", err)
	}
	// Options the sidecar refuses are an error at the start too.
	repair, err = NewMiddleware(ctx, MiddlewareOptions{Own: []string{"toolState"}})
	if repair != nil || !errors.Is(err, ErrInvalidParams) {
		t.Errorf("%v %v, want ErrInvalidParams", repair, err)
	}
}
