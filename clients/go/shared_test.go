package aguistate

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// The host's shared sidecar (protocol/README.md §2, "One sidecar per host"):
// the client connects to `agui-state serve --listen` instead of spawning its
// own, shares its threads and streams with every other client, and, in start
// mode, starts it. A sidecar that dies is a connection that ends: the
// middleware connects again (starting it again in start mode) and recovers
// each stream as from a process that exited (§14). Kill tests stop the
// handlers at points they name, as middleware_recover_test.go does.

func TestSharedSidecarAddresses(t *testing.T) {
	ctx := testCtx(t)
	for _, c := range []struct{ address, says string }{
		{"/tmp/s.sock", `expected unix:PATH or tcp:HOST:PORT, got "/tmp/s.sock"`},
		{"unix:", "unix: needs a path"},
		{"unix:/" + strings.Repeat("x", 103), "the socket path is 104 bytes, over the 103"},
		{"tcp:10.0.0.1:7000", "10.0.0.1 is not a loopback address"},
		{"tcp:127.0.0.1", "expected tcp:HOST:PORT with a port from 1 to 65535"},
		{"tcp:127.0.0.1:0", "expected tcp:HOST:PORT with a port from 1 to 65535"},
		{"tcp:::1:7000", "expected tcp:HOST:PORT"},
	} {
		_, err := Start(ctx, Options{Address: c.address})
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "the sidecar's Address: "+c.says) {
			t.Errorf("%q: %v, want INVALID_OPTION saying %q", c.address, err, c.says)
		}
	}
	for _, good := range []string{"unix:/run/agui/s.sock", "tcp:127.0.0.1:7000", "tcp:[::1]:7000", "tcp:localhost:7000", "tcp:127.1.2.3:1"} {
		if _, err := parseSharedAddress(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}

	// The environment's, named as such; the option wins over it.
	t.Setenv(EnvSidecar, "tcp:example.com:7000")
	if _, err := Start(ctx, Options{}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "the sidecar's AGUI_STATE_SIDECAR: example.com is not a loopback address") {
		t.Errorf("%v", err)
	}
	if _, err := NewMiddleware(ctx, MiddlewareOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewMiddleware: %v", err)
	}
	func() {
		defer func() {
			if p, _ := recover().(error); !errors.Is(p, ErrInvalidOption) {
				t.Errorf("Middleware(nil) panicked with %v, want ErrInvalidOption", p)
			}
		}()
		Middleware(nil, MiddlewareOptions{})
	}()
	sock := socketIn(t)
	serveShared(t, sock)
	c, err := Start(ctx, Options{Address: "unix:" + sock})
	if err != nil {
		t.Fatalf("the option did not win: %v", err)
	}
	_ = c.Close()

	// Nobody there and no start mode: an error that says where it looked.
	t.Setenv(EnvSidecar, "unix:"+sock+".none")
	if _, err := Start(ctx, Options{}); err == nil || !strings.Contains(err.Error(), "agui-state: no sidecar answers at unix:"+sock+".none: ") {
		t.Errorf("%v", err)
	}
	os.Unsetenv(EnvSidecar)
	if _, err := Start(ctx, Options{Start: true}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Start without an address: %v", err)
	}
	// A Client given with options that find a sidecar: they would not be used.
	if err := (MiddlewareOptions{Sidecar: Options{Address: "unix:" + sock}}).Check(c); !errors.Is(err, ErrConflictingOptions) {
		t.Errorf("Check: %v", err)
	}
}

// Two clients on one sidecar share its threads and streams; one that closes
// leaves the sidecar serving the other, and the streams it opened are closed.
func TestClientsShareTheSidecar(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	serveShared(t, sock)
	a, err := Start(ctx, Options{Address: "unix:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(ctx, Options{Address: "unix:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Process() != nil || a.Address() != "unix:"+sock {
		t.Errorf("Process %v, Address %q: want nil and the address", a.Process(), a.Address())
	}
	if _, err := a.OpenRun(ctx, OpenRunParams{ThreadID: "t", State: map[string]any{"by": "a"}}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.GetState(ctx, GetStateParams{ThreadID: "t"}); err != nil || string(st.State) != `{"by":"a"}` {
		t.Errorf("b reads %+v %v", st, err)
	}
	id, err := a.OpenStream(ctx, OpenStreamParams{Framing: "sse"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.FixStream(ctx, id, sse(sloppy[:1])); err != nil {
		t.Errorf("b feeds a's stream: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	var exited *ExitError
	if err := a.Call(ctx, "stats", nil, nil); !errors.As(err, &exited) || exited.Address != "unix:"+sock {
		t.Errorf("a call after Close: %v", err)
	}
	if _, err := b.FixStream(ctx, id, sse(sloppy[1:2])); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("a's stream after a closed: %v, want it closed", err)
	}
	if st, err := b.GetState(ctx, GetStateParams{ThreadID: "t"}); err != nil || string(st.State) != `{"by":"a"}` {
		t.Errorf("the thread after a closed: %+v %v", st, err)
	}
}

// Start mode: the middleware starts the sidecar, detached (a session of its
// own); killed mid-stream, it is started again once for both streams, each
// opened again with its replay and repaired to its end exactly as fix writes
// the whole body; the killed one was reaped; the next request is repaired.
func TestMiddlewareStartsTheSharedSidecarAgain(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	killSidecarsAtEnd(t, sock)
	opts := ownToolState
	opts.Sidecar = Options{Address: "unix:" + sock, Start: true}
	logs := &lockedBuffer{}
	opts.Logger = logTo(logs)
	repair, err := NewMiddleware(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer repair.Close()
	pids := servingSidecars(t, sock)
	if len(pids) != 1 {
		t.Fatalf("sidecars %v, want the one started", pids)
	}
	if sid := procStat(pids[0], 6); sid != strconv.Itoa(pids[0]) {
		t.Errorf("the sidecar's session is %s, want its own (%d)", sid, pids[0])
	}
	stream := sse(sloppy)
	cut := strings.Index(stream, "raster-ops/dataset\":\"era5")
	h := &paused{head: stream[:cut], tail: stream[cut:], resume: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}}
	s := serveHandler(t, repair.Handler(h))
	want := fixed(t, "{}", stream, ownArgs...)
	head := fixedSoFar(t, "{}", sse(sloppy[:3]), ownArgs...)
	a := post(t, ctx, s.URL+"?pause=a", `{}`)
	readHead(t, a.Body, head)
	b := post(t, ctx, s.URL+"?pause=b", `{}`)
	readHead(t, b.Body, head)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Reaped (by the middleware's client, which started it): until then its
	// listening socket may still take a connection the kernel then resets.
	untilTrue(t, ctx, "the killed sidecar reaped", func() bool { return procStat(pids[0], 3) == "" })
	h.resume["b"] <- struct{}{}
	if rest := readAll(t, b.Body); head+rest != want {
		t.Errorf("b after the kill:\n got %q\nwant %q", head+rest, want)
	}
	h.resume["a"] <- struct{}{}
	if rest := readAll(t, a.Body); head+rest != want {
		t.Errorf("a after the kill:\n got %q\nwant %q", head+rest, want)
	}
	log := logs.String()
	if n := strings.Count(log, "; connected to unix:"+sock+" again"); n != 1 {
		t.Errorf("%d reconnections logged, want 1: %s", n, log)
	}
	if n := strings.Count(log, "/: the stream was opened again on the new sidecar, and the "+strconv.Itoa(cut)+" bytes it had repaired fed to it again: the repair goes on"); n != 2 || strings.Contains(log, "unrepaired") {
		t.Errorf("%d reopens logged, want 2: %s", n, log)
	}
	again := servingSidecars(t, sock)
	if len(again) != 1 || again[0] == pids[0] {
		t.Errorf("sidecars %v after the kill of %d, want one new one", again, pids[0])
	}
	if out := readAll(t, post(t, ctx, s.URL, `{}`).Body); out != want {
		t.Errorf("the next request:\n got %q\nwant %q", out, want)
	}
}

// Without start mode a sidecar that dies and is not back (its process manager
// has not restarted it yet) fails open: the stream goes on as the handler
// wrote it, with one line saying so. Once it is back, the next request
// connects again and is repaired.
func TestMiddlewareFailsOpenUntilTheSharedSidecarIsBack(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	first := serveShared(t, sock)
	opts := ownToolState
	opts.Sidecar = Options{Address: "unix:" + sock}
	logs := &lockedBuffer{}
	opts.Logger = logTo(logs)
	repair, err := NewMiddleware(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer repair.Close()
	stream := sse(sloppy)
	cut := strings.Index(stream, "raster-ops/dataset\":\"era5")
	h := &paused{head: stream[:cut], tail: stream[cut:], resume: map[string]chan struct{}{"a": make(chan struct{})}}
	s := serveHandler(t, repair.Handler(h))
	resp := post(t, ctx, s.URL+"?pause=a", `{}`)
	readHead(t, resp.Body, fixedSoFar(t, "{}", sse(sloppy[:3]), ownArgs...))
	_ = first.Process.Kill()
	_ = first.Wait()
	h.resume["a"] <- struct{}{}
	if got, want := readAll(t, resp.Body), stream[len(sse(sloppy[:3])):]; got != want {
		t.Errorf("after the kill:\n got %q\nwant the rest as written %q", got, want)
	}
	log := logs.String()
	if !strings.Contains(log, "agui-state: the connection to the sidecar ended (agui-state at unix:"+sock+": the connection ended (") ||
		!strings.Contains(log, "), and could not be made again: agui-state: no sidecar answers at unix:"+sock) ||
		strings.Count(log, "the rest of this response goes through unrepaired") != 1 {
		t.Errorf("log %s", log)
	}

	serveShared(t, sock)
	if out, want := readAll(t, post(t, ctx, s.URL, `{}`).Body), fixed(t, "{}", stream, ownArgs...); out != want {
		t.Errorf("the next request:\n got %q\nwant %q", out, want)
	}
}

// Three worker processes starting at once in start mode (the environment's
// AGUI_STATE_SIDECAR and AGUI_STATE_SIDECAR_START) converge on one sidecar:
// the others' starts exit 3, and the three threads the workers opened are on
// the one that serves.
func TestThreeWorkersStartOneSidecar(t *testing.T) {
	ctx, sock := testCtx(t), socketIn(t)
	killSidecarsAtEnd(t, sock)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	starts := socketIn(t) + ".starts"
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), "AGUI_STATE_FAKE=shared-worker:w"+strconv.Itoa(i)+":"+starts, EnvSidecar+"=unix:"+sock, EnvSidecarStart+"=1")
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = errors.New(err.Error() + ": " + string(out))
			}
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	b, _ := os.ReadFile(starts)
	started := strings.Fields(string(b))
	if len(started) < 2 {
		t.Errorf("%d sidecars started (%q): the workers did not race", len(started), b)
	}
	untilTrue(t, ctx, "the losers' starts exited", func() bool { return len(servingSidecars(t, sock)) <= 1 })
	serving := servingSidecars(t, sock)
	if len(serving) != 1 {
		t.Fatalf("sidecars %v, want one", serving)
	}
	t.Logf("%d starts, pids %v; serving: %d", len(started), started, serving[0])
	c, err := Start(ctx, Options{Address: "unix:" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range errs {
		w := "w" + strconv.Itoa(i)
		if st, err := c.GetState(ctx, GetStateParams{ThreadID: w}); err != nil || string(st.State) != `{"worker":"`+w+`"}` {
			t.Errorf("%s: %+v %v", w, st, err)
		}
	}
	if st, err := c.Stats(ctx); err != nil || st.Threads != 3 {
		t.Errorf("stats %+v %v", st, err)
	}
}
