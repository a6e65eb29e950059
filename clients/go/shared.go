package aguistate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// One sidecar per host (protocol/README.md §2, "One sidecar per host"): the
// client connects to `agui-state serve --listen ADDRESS` instead of spawning a
// sidecar of its own, so that every worker of a server shares one process
// (one idle sidecar's memory instead of one per worker), and a rejoin the load
// balancer sends to another worker finds the run this one's stream records
// (§16) with the memory store. The connection is a session as stdin/stdout
// is: the same lines, the same calls (session.go); a connection that breaks
// is a sidecar that died (§14), and the middleware recovers from it as from a
// process that exited.

// Environment variables naming the shared sidecar, for a client whose Options
// leave Address empty (and Start false): the option wins.
const (
	EnvSidecar      = "AGUI_STATE_SIDECAR"       // unix:PATH or tcp:HOST:PORT
	EnvSidecarStart = "AGUI_STATE_SIDECAR_START" // "1": start the sidecar when nobody answers
)

// SidecarStartWait bounds how long a client in start mode waits for the
// sidecar it started (or another worker's, started at the same moment) to
// answer: a sidecar that starts takes well under a second; past this one it
// is taken for dead, and the middleware fails open as for a dead sidecar.
const SidecarStartWait = 10 * time.Second

// SidecarExitIdle is the --exit-idle of a sidecar a client starts: it
// outlives the worker that started it, and exits once no worker has been
// connected for a minute.
const SidecarExitIdle = 60 * time.Second

// sharedAddress is a parsed unix:PATH or tcp:HOST:PORT.
type sharedAddress struct {
	text            string // as given: what --listen is passed
	network, target string // for net.Dial
}

// maxSocketPath is the longest socket path every Unix takes (sun_path holds
// 108 bytes on Linux and 104 on macOS and the BSDs, its NUL included): the
// sidecar's own limit, so that an address one accepts the other does too.
const maxSocketPath = 103

var (
	tcpAddress = regexp.MustCompile(`^(?:\[([0-9A-Fa-f:.]+)\]|([^:\[\]\s]+)):(\d{1,5})$`)
	loopback4  = regexp.MustCompile(`(?i)^(::ffff:)?127(\.\d{1,3}){3}$`)
)

// parseSharedAddress reads an address as `serve --listen` does, but for port
// 0, which picks a port when the sidecar listens and names none a client can
// connect to. The problem, in words, when it is not one.
func parseSharedAddress(text string) (sharedAddress, error) {
	if path := strings.TrimPrefix(text, "unix:"); path != text {
		switch {
		case path == "":
			return sharedAddress{}, errors.New("unix: needs a path, such as unix:/run/agui-state/sidecar.sock")
		case strings.ContainsRune(path, 0):
			return sharedAddress{}, errors.New("a socket path cannot hold a NUL character")
		case len(path) > maxSocketPath:
			return sharedAddress{}, fmt.Errorf("the socket path is %d bytes, over the %d a Unix socket's name can hold; pick a shorter one", len(path), maxSocketPath)
		}
		return sharedAddress{text: text, network: "unix", target: path}, nil
	}
	if rest := strings.TrimPrefix(text, "tcp:"); rest != text {
		m := tcpAddress.FindStringSubmatch(rest)
		port := -1
		if m != nil {
			port, _ = strconv.Atoi(m[3])
		}
		if port < 1 || port > 65535 {
			return sharedAddress{}, fmt.Errorf("expected tcp:HOST:PORT with a port from 1 to 65535, got %q", text)
		}
		host := m[1] + m[2]
		// The sidecar serves every thread's state and every run's events: it
		// listens on this host only (§2), and a client never looks for it elsewhere.
		if host != "localhost" && host != "::1" && !loopback4.MatchString(host) {
			return sharedAddress{}, fmt.Errorf("%s is not a loopback address; the sidecar listens on this host only (use unix:PATH, or 127.0.0.1)", host)
		}
		return sharedAddress{text: text, network: "tcp", target: net.JoinHostPort(host, m[3])}, nil
	}
	return sharedAddress{}, fmt.Errorf("expected unix:PATH or tcp:HOST:PORT, got %q", text)
}

// sharedSidecar is where o's client finds its sidecar: nil when it spawns one
// of its own; an error wrapping ErrInvalidOption for an address that is not
// one, naming where it came from.
func (o Options) sharedSidecar() (*sharedAddress, bool, error) {
	text, from := o.Address, "Address"
	if text == "" {
		text, from = os.Getenv(EnvSidecar), EnvSidecar
	}
	start := o.Start || os.Getenv(EnvSidecarStart) == "1"
	if text == "" {
		if o.Start {
			return nil, false, fmt.Errorf("%w: Start needs an Address (or %s) to start the sidecar at", ErrInvalidOption, EnvSidecar)
		}
		return nil, false, nil
	}
	a, err := parseSharedAddress(text)
	if err != nil {
		return nil, false, fmt.Errorf("%w: the sidecar's %s: %v", ErrInvalidOption, from, err)
	}
	return &a, start, nil
}

// conflictingOptions is ErrConflictingOptions (errors.Is) with its own words.
type conflictingOptions struct{ say string }

func (e *conflictingOptions) Error() string        { return "agui-state: CONFLICTING_OPTIONS: " + e.say }
func (e *conflictingOptions) Is(target error) bool { return target == ErrConflictingOptions }

// unstarted refuses the sidecar flags given (their names, e.g. "Store"), if
// any, when a names an address and start mode is off (protocol/README.md §2,
// "One sidecar per host"): they are flags of a sidecar this client starts,
// and it starts none, so they would reach no sidecar; the one at the address
// keeps the flags it was started with. Refused when the client or the
// middleware is made, as a bad address is.
func unstarted(a *sharedAddress, start bool, given []string) error {
	if a == nil || start || len(given) == 0 {
		return nil
	}
	verb, it := "gives", "it"
	if len(given) > 1 {
		verb, it = "give", "them"
	}
	return &conflictingOptions{fmt.Sprintf("%s %s the flags of a sidecar this client starts, but with an address (%s) and no start mode no sidecar is started here; drop %s, or set start mode (Start, or %s=1)",
		strings.Join(given, " and "), verb, a.text, it, EnvSidecarStart)}
}

// probeWait bounds the answer to the probe of a new connection (answered): a
// sidecar that took the connection and says nothing for this long is hung
// (stopped, say), and waiting longer for it would not help.
const probeWait = 5 * time.Second

// probe is the one request a new connection carries before it counts as made:
// id 0, since a client's own calls count from 1.
const probe = `{"jsonrpc":"2.0","id":0,"method":"stats"}` + "\n"

// silentSidecar: a sidecar took the connection and did not answer the probe.
type silentSidecar struct{ err error }

func (e *silentSidecar) Error() string {
	return "the sidecar took the connection and did not answer on it within " + probeWait.String() + " (" + e.err.Error() + ")"
}
func (e *silentSidecar) Unwrap() error { return e.err }

// dial connects to the sidecar at a, and counts the connection as made once
// the sidecar has answered one stats on it, its reply read and dropped
// (protocol/README.md §2): a sidecar being killed still accepts connections
// until its socket closes, and a connection it took as it died would be
// counted as made, then found broken, spending one of a stream's tries. A
// connection that closes before the answer is nobody answering (an error
// like a refused dial's); one not answered within probeWait is a *silentSidecar.
func (a sharedAddress) dial(ctx context.Context) (net.Conn, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, a.network, a.target)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(probeWait)
	if at, ok := ctx.Deadline(); ok && at.Before(deadline) {
		deadline = at
	}
	_ = conn.SetDeadline(deadline)
	if err = readAnswer(conn); err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		_ = conn.Close()
		var timeout net.Error
		if errors.As(err, &timeout) && timeout.Timeout() && ctx.Err() == nil {
			return nil, &silentSidecar{err}
		}
		return nil, err
	}
	return conn, nil
}

// readAnswer writes the probe on conn and reads its one-line answer: nothing
// else is asked on conn yet, so nothing else can follow it. A timeout is
// returned as it is; any other end is the connection closed unanswered.
func readAnswer(conn net.Conn) error {
	closed := func(err error) error {
		var timeout net.Error
		if errors.As(err, &timeout) && timeout.Timeout() {
			return err
		}
		if err == io.EOF {
			return errors.New("the connection closed before the sidecar answered")
		}
		return fmt.Errorf("the connection closed before the sidecar answered (%w)", err)
	}
	if _, err := io.WriteString(conn, probe); err != nil {
		return closed(err)
	}
	buf := make([]byte, 1024)
	for {
		n, err := conn.Read(buf)
		if n > 0 && buf[n-1] == '\n' {
			return nil
		}
		if err != nil {
			return closed(err)
		}
	}
}

// connect opens a session on the shared sidecar at a; in start mode, when
// nobody answers there, it starts the sidecar first (startShared).
func (c *Client) connect(ctx context.Context, a sharedAddress, start bool) (*proc, error) {
	conn, err := a.dial(ctx)
	var hung *silentSidecar
	if err == nil {
		return newConnProc(conn, a.text), nil
	}
	if errors.As(err, &hung) {
		return nil, fmt.Errorf("agui-state: at %s, %w", a.text, err)
	}
	if !start {
		return nil, fmt.Errorf("agui-state: no sidecar answers at %s: %w", a.text, err)
	}
	exited, argv, err := c.startShared(a)
	if err != nil {
		return nil, err
	}
	wait, cancel := context.WithTimeout(ctx, SidecarStartWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err = a.dial(wait); err == nil {
			return newConnProc(conn, a.text), nil
		}
		if errors.As(err, &hung) {
			return nil, fmt.Errorf("agui-state: at %s, %w", a.text, err)
		}
		select {
		case status := <-exited:
			exited = nil
			// serve --listen's exit statuses (src/cli/exit.ts): 3, a sidecar
			// serves the socket already, or another worker's start holds it and
			// will; 0, it ended on its own: either way, go on connecting. 2,
			// its command line was refused (a bad flag in Args, a path that is
			// not a socket): every start would meet it, so give up at once.
			var ee *exec.ExitError
			switch {
			case status == nil || errors.As(status, &ee) && ee.ExitCode() == exitServed:
			case ee != nil && ee.ExitCode() == exitRefused:
				return nil, fmt.Errorf("agui-state: the sidecar started at %s refused its command line (exit 2): %s", a.text, commandLine(argv))
			default:
				return nil, fmt.Errorf("agui-state: the sidecar started at %s exited before it answered (%v): %s", a.text, status, commandLine(argv))
			}
		case <-wait.Done():
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("agui-state: started a sidecar at %s, and nothing answered there within %v: %w", a.text, SidecarStartWait, err)
		case <-tick.C:
		}
	}
}

// startShared starts `agui-state serve --listen ADDRESS --exit-idle 60000`
// with Options' Path, Args and Env, detached (protocol/README.md §2): in a
// session of its own, so that a signal to the worker's process group (a
// Ctrl-C, a process manager stopping this worker) does not reach it, and with
// stdin, stdout and stderr on the null device, so that it holds no pipe of
// the worker's open (a parent reading the worker's output to its end would
// wait for the sidecar too). It is reaped when it exits, so that it leaves no
// zombie while the worker lives; its exit status comes on the channel. The
// command line comes back too, for an error to show.
func (c *Client) startShared(a sharedAddress) (<-chan error, []string, error) {
	args := append([]string{"serve", "--listen", a.text, "--exit-idle", strconv.FormatInt(SidecarExitIdle.Milliseconds(), 10)}, c.opts.Args...)
	path := c.path()
	cmd := exec.Command(path, args...)
	cmd.Env = c.opts.Env
	cmd.SysProcAttr = ownSession()
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("agui-state: start %s: %w", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return exited, append([]string{path}, args...), nil
}

// The exit statuses of `serve --listen` a start tells apart (src/cli/exit.ts):
// exitServed, a live sidecar serves the socket already (another start won:
// connect to it); exitRefused, the command line was refused.
const (
	exitRefused = 2
	exitServed  = 3
)

// commandLine is argv as a shell would take it, for an error that shows the
// command: the user runs it to read why the sidecar refused it (a sidecar
// started here has no stderr to say so: it is detached).
func commandLine(argv []string) string {
	quoted := make([]string, len(argv))
	for i, arg := range argv {
		quoted[i] = arg
		if arg == "" || strings.ContainsAny(arg, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			quoted[i] = "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}
