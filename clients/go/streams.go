package aguistate

import (
	"context"
	"encoding/json"
)

// Typed wrappers for the stream methods (protocol/README.md §14): the repair
// `agui-state fix` does (§13), fed part by part by a server that cannot
// compute its own deltas. Middleware (middleware.go) is built on them.

type OpenStreamParams struct {
	State     json.RawMessage `json:"state,omitempty"`     // the client's RunAgentInput.state, an object; nil: {}
	Own       []string        `json:"own,omitempty"`       // fix --own: escaped pointers, e.g. {"/toolState"}
	Snapshots string          `json:"snapshots,omitempty"` // fix --snapshots: "pass" (the default) or "delta"
	JoinKeys  bool            `json:"joinKeys,omitempty"`  // fix --join-keys
	Framing   string          `json:"framing,omitempty"`   // "sse" or "ndjson"; "" tells them apart by the first line
}

// FixStreamResult is the repaired text of every event the part completed
// ("" when it completed none), and their findings counted by outcome.
type FixStreamResult struct {
	Text      string `json:"text"`
	Passed    int    `json:"passed"`
	Mended    int    `json:"mended"`
	Discarded int    `json:"discarded"`
	Kept      int    `json:"kept"`
}

// StreamSummary counts a whole stream (protocol/README.md §13 and §14).
type StreamSummary struct {
	Events    int `json:"events"`
	Deltas    int `json:"deltas"`
	Dropped   int `json:"dropped"`
	Ignored   int `json:"ignored"`
	Fatal     int `json:"fatal"`
	Wiped     int `json:"wiped"`
	Passed    int `json:"passed"`
	Mended    int `json:"mended"`
	Discarded int `json:"discarded"`
	Kept      int `json:"kept"`
	Unfixed   int `json:"unfixed"` // findings about events that went out as they came and that the client still refuses
}

type CloseStreamResult struct {
	Text    string        `json:"text"` // the output that remained: send it before ending the response
	Summary StreamSummary `json:"summary"`
}

// OpenStream opens a stream repair and returns its id. Ids are the process's
// own: after a Restart, open the stream again (or send the rest as it is).
// The ...On forms below are bound to one process (Client.callOn), as
// Middleware uses them.
func (c *Client) OpenStream(ctx context.Context, p OpenStreamParams) (string, error) {
	return c.openStreamOn(ctx, c.current(), p)
}

func (c *Client) openStreamOn(ctx context.Context, on *proc, p OpenStreamParams) (string, error) {
	var r struct {
		StreamID string `json:"streamId"`
	}
	err := c.callOn(ctx, on, "openStream", p, &r)
	return r.StreamID, err
}

// FixStream hands over the next part of the stream, as the server wrote it
// but whole UTF-8 characters: a string that is not valid UTF-8 is sent with
// U+FFFD in place of each bad byte. A stream the sidecar no longer holds
// fails with ErrUnknownStream.
func (c *Client) FixStream(ctx context.Context, streamID, text string) (*FixStreamResult, error) {
	return c.fixStreamOn(ctx, c.current(), streamID, text)
}

func (c *Client) fixStreamOn(ctx context.Context, on *proc, streamID, text string) (*FixStreamResult, error) {
	var r FixStreamResult
	err := c.callOn(ctx, on, "fixStream", struct {
		StreamID string `json:"streamId"`
		Text     string `json:"text"`
	}{streamID, text}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// CloseStream ends the stream: the output that remained, and the whole
// stream's counts. Call it also when the client went away (drop the text).
func (c *Client) CloseStream(ctx context.Context, streamID string) (*CloseStreamResult, error) {
	return c.closeStreamOn(ctx, c.current(), streamID)
}

func (c *Client) closeStreamOn(ctx context.Context, on *proc, streamID string) (*CloseStreamResult, error) {
	var r CloseStreamResult
	err := c.callOn(ctx, on, "closeStream", struct {
		StreamID string `json:"streamId"`
	}{streamID}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
