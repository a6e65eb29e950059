// B18: the Go client's cost per call beside a bare client on the same kind of
// pipe to the same binary. The bare client does nothing but json.Marshal,
// Write, bufio ReadBytes and json.Unmarshal into the same result type: the
// floor for any client. Rounds alternate (ours, bare, ours, bare, ...); each
// round's wall-clock and process CPU microseconds per call are printed as JSON
// for bench/clients.ts to take the medians.
//
//	go run . <rounds> <calls> <sidecar argv...>
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	aguistate "github.com/agui-state/agui-state/clients/go"
)

const key = "tool-50/result"

// namespace is B5's shape (tool results of 20 rows), 100 keys of it.
func namespace() map[string]any {
	m := map[string]any{}
	for i := 0; i < 100; i++ {
		rows := make([]any, 20)
		for j := range rows {
			rows[j] = map[string]any{"j": j, "v": fmt.Sprintf("value %d.%d", i, j)}
		}
		m[fmt.Sprintf("tool-%d/result", i)] = map[string]any{"rows": rows, "ok": true}
	}
	return m
}

func value(i int) any {
	return map[string]any{"rows": []any{map[string]any{"j": 0, "v": fmt.Sprintf("changed %d", i)}}, "ok": i%2 == 0}
}

// bare is the floor: one request written, one line read, one Unmarshal.
type bare struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int64
}

func startBare(argv []string) *bare {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	return &bare{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}
}

func (b *bare) call(method string, params, result any) {
	b.id++
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": b.id, "method": method, "params": params})
	check(err)
	_, err = b.in.Write(append(msg, '\n'))
	check(err)
	line, err := b.out.ReadBytes('\n')
	check(err)
	reply := struct {
		ID     int64            `json:"id"`
		Result any              `json:"result"`
		Error  *aguistate.Error `json:"error"`
	}{Result: result}
	check(json.Unmarshal(line, &reply))
	if reply.Error != nil || reply.ID != b.id {
		check(fmt.Errorf("bare: reply %s", line))
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func main() {
	rounds, err := strconv.Atoi(os.Args[1])
	check(err)
	calls, err := strconv.Atoi(os.Args[2])
	check(err)
	argv := os.Args[3:]
	ctx := context.Background()
	ns := namespace()

	ours, err := aguistate.Start(ctx, aguistate.Options{Path: argv[0], Args: argv[1:]})
	check(err)
	_, err = ours.OpenRun(ctx, aguistate.OpenRunParams{ThreadID: "ns", ToolState: ns})
	check(err)
	b := startBare(argv)
	b.call("openRun", map[string]any{"threadId": "ns", "toolState": ns}, &aguistate.OpenRunResult{})

	i := 0
	a := func() {
		i++
		_, err := ours.DiffToolState(ctx, aguistate.DiffToolStateParams{ThreadID: "ns", Set: map[string]any{key: value(i)}})
		check(err)
	}
	r := func() {
		i++
		var change aguistate.Change
		b.call("diffToolState", aguistate.DiffToolStateParams{ThreadID: "ns", Set: map[string]any{key: value(i)}}, &change)
	}
	out := map[string][]float64{"ours": {}, "bare": {}, "oursCpu": {}, "bareCpu": {}}
	measure := func(side string, fn func()) {
		t, c := time.Now(), cpu()
		for k := 0; k < calls; k++ {
			fn()
		}
		out[side] = append(out[side], float64(time.Since(t).Microseconds())/float64(calls))
		out[side+"Cpu"] = append(out[side+"Cpu"], float64((cpu()-c).Microseconds())/float64(calls))
	}
	for k := 0; k < 500; k++ { // both sidecars' JIT warm before the first round
		a()
		r()
	}
	for k := 0; k < rounds; k++ {
		measure("ours", a)
		measure("bare", r)
	}
	check(ours.Close())
	check(b.in.Close())
	check(b.cmd.Wait())
	check(json.NewEncoder(os.Stdout).Encode(out))
}
