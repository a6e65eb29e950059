package aguistate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Numbers keep their value and their kind through the sidecar
// (protocol/README.md §3, issue 22). Each token goes out as a json.Number,
// its exact text, and what comes back is read with UseNumber: it must be the
// same value, an integer (json.Number.Int64 reads it) when the token was one
// and a float when it was not, a zero keeping its sign. An integer beyond
// ±(2^53 − 1) must be refused with ErrInvalidParams, reason UNSAFE_INTEGER.
//
// The tokens are numberTokens, or, when $AGUI_NUMBER_TOKENS names a file of
// tokens (one per line, as test/clients/numbers.test.ts writes them), that
// file's; $AGUI_NUMBER_REPORT then receives one line per token: the token, a
// tab, and "same" or "refused".

var numberTokens = []string{"0", "-0", "1", "-1", "9007199254740991", "-9007199254740991", "9007199254740992", "1152921504606846976",
	"100000000000000000000", "1.0", "-0.0", "0.0", "1e2", "1.5e3", "1E-400", "100000000000000000000.0", "1e21",
	"0.5", "6.02e23", "0.99999999999999999", "5e-324", "-1.7976931348623157e308"}

var maxSafe = big.NewInt(1<<53 - 1)

func readTokens(t *testing.T) []string {
	path := os.Getenv("AGUI_NUMBER_TOKENS")
	if path == "" {
		return numberTokens
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// isIntegerToken: no fraction and no exponent, as JSON's grammar tells them apart.
func isIntegerToken(s string) bool { return !strings.ContainsAny(s, ".eE") }

// sameNumber holds got (read with UseNumber) to the token that went in.
func sameNumber(got json.Number, token string) error {
	if isIntegerToken(token) {
		want, _ := new(big.Int).SetString(token, 10)
		n, err := got.Int64()
		if err != nil || big.NewInt(n).Cmp(want) != 0 {
			return fmt.Errorf("%s came back as %s, not the integer %s", token, got, want)
		}
		return nil
	}
	if _, err := got.Int64(); err == nil {
		return fmt.Errorf("%s came back as %s, an integer", token, got)
	}
	want, _ := json.Number(token).Float64()
	f, err := got.Float64()
	if err != nil || f != want || math.Signbit(f) != math.Signbit(want) {
		return fmt.Errorf("%s came back as %s, not the float %v", token, got, want)
	}
	return nil
}

// member reads one member of a JSON object with UseNumber.
func member(t *testing.T, raw []byte, path ...string) json.Number {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		v = v.(map[string]any)[k]
	}
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v in %s is not a number", path, raw)
	}
	return n
}

// numberCheck is one place a token came back: where, and what was there.
type numberCheck struct {
	what string
	got  json.Number
}

func TestNumberTokensKeepValueAndKind(t *testing.T) {
	c, ctx := startClient(t), testCtx(t)
	var report strings.Builder
	for i, token := range readTokens(t) {
		tid := fmt.Sprintf("n%d", i)
		value, _ := new(big.Int).SetString(token, 10)
		big53 := isIntegerToken(token) && new(big.Int).Abs(value).Cmp(maxSafe) > 0
		// openRun's state is a baseline the client sent: an integer beyond 2^53 - 1 there is
		// the double the client holds (protocol/README.md §3, baselines), never refused.
		if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: tid, State: map[string]any{"s": json.Number(token)}, ToolState: map[string]any{}}); err != nil {
			t.Fatalf("%s: openRun: %v", token, err)
		}
		change, err := c.DiffToolState(ctx, DiffToolStateParams{ThreadID: tid, Set: map[string]any{"n": json.Number(token)}})
		if err != nil {
			var e *Error
			if !big53 || !errors.As(err, &e) || !errors.Is(err, ErrInvalidParams) || e.Reason() != "UNSAFE_INTEGER" || !strings.Contains(e.Message, "send it as a string") {
				t.Fatalf("%s was refused: %v", token, err)
			}
			if f, _ := e.Field(); f != "/set/n" {
				t.Fatalf("%s refused at %q", token, f)
			}
			held, err := c.GetState(ctx, GetStateParams{ThreadID: tid})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := strconv.ParseFloat(string(member(t, held.State, "s")), 64)
			want, _ := strconv.ParseFloat(token, 64)
			if got != want {
				t.Fatalf("%s in openRun's state came back as %s, not the double %v", token, member(t, held.State, "s"), want)
			}
			report.WriteString(token + "\trefused\n")
			continue
		}
		if big53 {
			t.Fatalf("%s, an integer beyond 2^53 - 1, was accepted", token)
		}
		if len(change.Delta) != 1 {
			t.Fatalf("%s: diffToolState: %v %v", token, change, err)
		}
		checks := []numberCheck{{"diffToolState's delta", member(t, change.Delta[0].Value)}}
		state, err := c.GetState(ctx, GetStateParams{ThreadID: tid})
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, numberCheck{"getState", member(t, state.State, "s")}, numberCheck{"getState's toolState", member(t, state.State, "toolState", "n")})
		// What a server does after a restart: open the thread again with the state it was given.
		if _, err := c.OpenRun(ctx, OpenRunParams{ThreadID: "r" + tid, State: state.State}); err != nil {
			t.Fatalf("%s: openRun with getState's output: %v", token, err)
		}
		again, err := c.GetState(ctx, GetStateParams{ThreadID: "r" + tid})
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, numberCheck{"openRun with getState's output", member(t, again.State, "s")})
		for _, k := range checks {
			if err := sameNumber(k.got, token); err != nil {
				t.Fatalf("%s: %v", k.what, err)
			}
		}
		report.WriteString(token + "\tsame\n")
	}
	if out := os.Getenv("AGUI_NUMBER_REPORT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
