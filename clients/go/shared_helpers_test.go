package aguistate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Helpers of the shared sidecar's tests (shared_test.go): a sidecar the test
// runs as a process manager would, the sidecars serving a socket found by
// their command lines, and the stand-ins run from this test binary.

// socketIn is a socket path in a directory of the test's own, short enough
// for a Unix socket's name.
func socketIn(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agui-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}

// serveShared runs `agui-state serve --listen unix:SOCK` as a process manager
// would, until it prints that it listens; it is killed at the test's end.
func serveShared(t *testing.T, sock string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(sidecarBin(), "serve", "--listen", "unix:"+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if want := "listening on unix:" + sock + "\n"; line != want {
		t.Fatalf("the sidecar wrote %q (%v), want %q", line, err, want)
	}
	return cmd
}

func sidecarBin() string {
	if bin := os.Getenv("AGUI_STATE_BIN"); bin != "" {
		return bin
	}
	return "agui-state"
}

// servingSidecars are the live processes (not zombies) whose command line is
// `... serve --listen unix:SOCK ...`.
func servingSidecars(t *testing.T, sock string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 { // gone, or a zombie (which has none)
			continue
		}
		if bytes.Contains(cmdline, []byte("\x00serve\x00--listen\x00unix:"+sock+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killSidecarsAtEnd kills, at the test's end, every sidecar serving sock:
// those the clients started live on after them (--exit-idle).
func killSidecarsAtEnd(t *testing.T, sock string) {
	t.Cleanup(func() {
		for _, pid := range servingSidecars(t, sock) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// untilTrue polls cond every 10 ms until it holds; past the test's own ctx it
// fails (a guard against a hang, not a figure the test asserts).
func untilTrue(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// procStat is a field of /proc/PID/stat (1-based as proc(5) numbers them,
// counted after the command's name); "" once the process is gone.
func procStat(pid, field int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	rest := string(b[bytes.LastIndexByte(b, ')')+2:])
	fields := strings.Fields(rest)
	if field-3 >= len(fields) {
		return ""
	}
	return fields[field-3]
}

// countStarts is the stand-in "count-starts:FILE": it adds a line to FILE,
// then execs the real sidecar with its arguments (the pid and the command
// line are then the sidecar's).
func countStarts(file string) {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		os.Exit(4)
	}
	_, _ = fmt.Fprintln(f, os.Getpid())
	_ = f.Close()
	bin := sidecarBin()
	_ = syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), withoutFake(os.Environ()))
	os.Exit(5)
}

func withoutFake(env []string) []string {
	out := []string{}
	for _, e := range env {
		if !strings.HasPrefix(e, "AGUI_STATE_FAKE=") {
			out = append(out, e)
		}
	}
	return out
}

// sharedWorker is the stand-in "shared-worker:THREAD:STARTS": a worker process
// whose client finds its sidecar as AGUI_STATE_SIDECAR and
// AGUI_STATE_SIDECAR_START say (starting it through count-starts:STARTS),
// opens the thread THREAD on it, and exits.
func sharedWorker(thread, starts string) {
	exe, err := os.Executable()
	if err != nil {
		os.Exit(6)
	}
	ctx := context.Background()
	c, err := Start(ctx, Options{Path: exe, Env: append(withoutFake(os.Environ()), "AGUI_STATE_FAKE=count-starts:"+starts)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(7)
	}
	if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: thread, State: map[string]any{"worker": thread}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(8)
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(9)
	}
}

func logTo(b *lockedBuffer) *log.Logger { return log.New(b, "", 0) }

// serveHandler serves h on a real server until the test's end.
func serveHandler(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
