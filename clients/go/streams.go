package aguistate

import (
	"context"
	"encoding/json"
)

// Typed wrappers for the stream methods (protocol/README.md §14): the repair
// `agui-state fix` does (§13), fed part by part by a server that cannot
// compute its own deltas. Middleware (middleware.go) is built on them.

// OpenStreamParams opens a stream in one of two forms (protocol/README.md
// §14). The exchange form (protocol 1.2), which Middleware uses: Request and
// Response, the raw request and the app's response head, from which the
// sidecar decides the framing, the baseline, whether the response is an
// event stream at all and the head to write; NoResume turns resume off. The
// earlier form: State, Framing and Resume, decided by the caller (not with
// Request).
type OpenStreamParams struct {
	Request   *StreamRequest    `json:"request,omitempty"`   // the request as received
	Response  *HTTPResponseHead `json:"response,omitempty"`  // the app's response head
	State     json.RawMessage   `json:"state,omitempty"`     // the client's RunAgentInput.state, an object; nil: {}
	Own       []string          `json:"own,omitempty"`       // fix --own: escaped pointers, e.g. {"/toolState"}
	Snapshots string            `json:"snapshots,omitempty"` // fix --snapshots: "pass" (the default) or "delta"
	JoinKeys  bool              `json:"joinKeys,omitempty"`  // fix --join-keys
	Framing   string            `json:"framing,omitempty"`   // "sse" or "ndjson"; "" tells them apart by the first line
	Resume    *ResumeRun        `json:"resume,omitempty"`    // file the stream as a resumable run (SSE only; resume.go)
	NoResume  bool              `json:"-"`                   // the exchange form's resume: false (sent as such)
	// Lifecycle is fix --lifecycle (issue 40): "repair" mends a run's
	// lifecycle the client would refuse, and ends a run the stream stopped
	// inside; "pass" (the sidecar's default) leaves it as sent. "" leaves it out.
	Lifecycle string `json:"lifecycle,omitempty"`
	// Resync says the client may hold more than the baseline: a stream opened
	// again on a new sidecar without its replay (protocol 1.4.0, §14). Under
	// Own, each run's first owned write is then one add of each owned member.
	Resync bool `json:"resync,omitempty"`
}

// MarshalJSON sends NoResume as the exchange form's `"resume": false`.
func (p OpenStreamParams) MarshalJSON() ([]byte, error) {
	type plain OpenStreamParams
	if !p.NoResume {
		return json.Marshal(plain(p))
	}
	return json.Marshal(struct {
		plain
		Resume bool `json:"resume"`
	}{plain: plain(p)})
}

// StreamRequest is openStream's request: Body is the whole body as text, nil
// when it went past ClassifyRequestResult.BodyBytes (or was cut off).
type StreamRequest struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`    // the request target, query allowed
	Headers [][2]string `json:"headers"` // HeaderPairs of the request's
	Body    *string     `json:"body,omitempty"`
}

// HTTPResponseHead is a response head as the app gave it.
type HTTPResponseHead struct {
	Status  int         `json:"status"`
	Headers [][2]string `json:"headers"`
}

// Note is a code and its sentence for the log: why openStream passed a
// response (NOT_AN_EVENT_STREAM, CONTENT_ENCODED), or why it could not use the
// request's state (BODY_TOO_LARGE, BODY_NOT_JSON, BODY_ENCODED, STATE_NOT_OBJECT).
type Note struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// StreamFinding is one finding of the repair (protocol/README.md §13, the
// members of check --json's lines): an op or event the client would not apply
// as sent, a snapshot that takes what it holds, or an op the repair sent
// rewritten or left out, with what the repair did: Outcome is "passed",
// "mended", "discarded" or "kept".
type StreamFinding struct {
	Event   int    `json:"event"`
	Line    int    `json:"line"`
	Kind    string `json:"kind,omitempty"` // "dropped", "ignored", "fatal", "wiped"; "" when the client would have applied it as sent
	Type    string `json:"type"`
	Index   *int   `json:"index,omitempty"`   // for a finding about one op: its position in the patch as sent
	Pointer string `json:"pointer,omitempty"` // that op's path
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	Outcome string `json:"outcome"`
	Stops   bool   `json:"stops,omitempty"` // the op the client stops at, of a delta it drops
}

// FixStreamResult is the repaired text of every event the part completed
// ("" when it completed none), their findings, and those counted by outcome.
type FixStreamResult struct {
	Text      string          `json:"text"`
	Findings  []StreamFinding `json:"findings"`
	Passed    int             `json:"passed"`
	Mended    int             `json:"mended"`
	Discarded int             `json:"discarded"`
	Kept      int             `json:"kept"`
	// Cancel is only ever true for a stream DetachStream detached: the grace
	// passed with nobody reading its run, so cancel the app and CloseStream.
	Cancel bool `json:"cancel,omitempty"`
	// Pending is how many UTF-8 bytes at the end of all the text given so far
	// no reply has answered yet (the unfinished event the sidecar holds):
	// what to send on as it came should the repair fail.
	Pending int `json:"pending"`
	// Head is given once, in the reply that answers the stream's first event
	// when that is a RUN_STARTED: its length in UTF-8 bytes from the stream's
	// start, through that event (0: not in this reply).
	Head int `json:"head,omitempty"`
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

// CloseStreamResult is what closeStream answers: the output that remained,
// its findings and the whole stream's counts.
type CloseStreamResult struct {
	Text     string          `json:"text"`     // the output that remained: send it before ending the response
	Findings []StreamFinding `json:"findings"` // the findings of the events that output completes
	Summary  StreamSummary   `json:"summary"`
	// Ended: the stream stopped inside a run, and the sidecar ended that run
	// itself in Text (its open messages, tool calls and steps closed, then a
	// RUN_ERROR with code INCOMPLETE_STREAM; lifecycle "repair"). The response
	// is then a whole, failed run: end it cleanly, even after a handler that
	// broke off, rather than break it off (issue 40).
	Ended bool `json:"ended,omitempty"`
}

// OpenStream opens a stream repair and returns its id. Ids are the process's
// own: after a Restart, open the stream again (or send the rest as it is).
// The ...On forms below are bound to one process (Client.callOn), as
// Middleware uses them.
func (c *Client) OpenStream(ctx context.Context, p OpenStreamParams) (string, error) {
	r, err := c.openStreamOn(ctx, c.current(), p)
	return r.StreamID, err
}

// openedStream is openStream's result. Pass (exchange form): the response is
// not repaired, and there is no stream. Else Headers (exchange form) is the
// whole head to write in place of the app's, ReplayBytes how much answered
// text to keep for a replay, Baseline why the request's state was not used;
// Run is set when the stream was filed as a resumable run, and with it
// Opening, the block to write to the client first (protocol/README.md §16).
type openedStream struct {
	StreamID    string      `json:"streamId"`
	Pass        *Note       `json:"pass"`
	Headers     headerPairs `json:"headers"`
	ReplayBytes int         `json:"replayBytes"`
	Baseline    *Note       `json:"baseline"`
	Run         string      `json:"run"`
	Opening     string      `json:"opening"`
}

// headerPairs reads openStream's headers: [name, value] pairs (the exchange
// form), or the earlier form's object of the headers to add.
type headerPairs [][2]string

func (h *headerPairs) UnmarshalJSON(b []byte) error {
	var pairs [][2]string
	if err := json.Unmarshal(b, &pairs); err == nil {
		*h = pairs
		return nil
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*h = headerPairs{}
	for k, v := range m {
		*h = append(*h, [2]string{k, v})
	}
	return nil
}

func (c *Client) openStreamOn(ctx context.Context, on *proc, p OpenStreamParams) (openedStream, error) {
	var r openedStream
	err := c.callOn(ctx, on, "openStream", p, &r)
	return r, err
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
	return c.closeStreamOn(ctx, c.current(), streamID, false)
}

// CloseBrokenStream is CloseStream for a response that broke off (the app
// failed, or was cancelled) rather than ended: its resumable run ends as
// cancelled, and a rejoin's reader breaks its response off too.
func (c *Client) CloseBrokenStream(ctx context.Context, streamID string) (*CloseStreamResult, error) {
	return c.closeStreamOn(ctx, c.current(), streamID, true)
}

func (c *Client) closeStreamOn(ctx context.Context, on *proc, streamID string, broken bool) (*CloseStreamResult, error) {
	var r CloseStreamResult
	err := c.callOn(ctx, on, "closeStream", struct {
		StreamID string `json:"streamId"`
		Broken   bool   `json:"broken,omitempty"`
	}{streamID, broken}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
