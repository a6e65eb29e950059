package aguistate

import (
	"context"
	"encoding/json"
)

// Typed wrappers for resume through the stream methods (protocol/README.md
// §16): a stream opened with OpenStreamParams.Resume is filed as a run, every
// event of its text gets an `id:` line, and a client that drops can rejoin it
// from the sidecar's run log (memory, or Redis shared by several servers).
// Middleware (middleware_resume.go) is built on them.

// ResumeRun is openStream's `resume`: what the run is filed under, and who
// may rejoin it.
type ResumeRun struct {
	ThreadID      string            `json:"threadId"`                // the request's RunAgentInput.threadId
	Path          string            `json:"path"`                    // the agent's path, without the query
	Authorization string            `json:"authorization,omitempty"` // the request's Authorization header
	Cookie        string            `json:"cookie,omitempty"`        // the request's Cookie headers, joined by "; "
	Messages      json.RawMessage   `json:"messages,omitempty"`      // RunAgentInput.messages, for a reload's MESSAGES_SNAPSHOT; nil: []
	Headers       map[string]string `json:"headers,omitempty"`       // the response's headers (lower-case names) a rejoin is answered with
}

// DetachStreamResult says how often to call FixStream, at least (with text
// "" when the app wrote nothing), to learn whether to cancel. 0: cancel now.
type DetachStreamResult struct {
	GraceMs int `json:"graceMs"`
}

// DetachStream says the stream's client went away before the response
// ended: a resumable run goes on for the grace period, the app's output is
// still fed with FixStream (its text is then "": the events go to the log
// only), and FixStreamResult.Cancel says when to cancel the app.
func (c *Client) DetachStream(ctx context.Context, streamID string) (*DetachStreamResult, error) {
	return c.detachStreamOn(ctx, c.current(), streamID)
}

func (c *Client) detachStreamOn(ctx context.Context, on *proc, streamID string) (*DetachStreamResult, error) {
	var r DetachStreamResult
	err := c.callOn(ctx, on, "detachStream", struct {
		StreamID string `json:"streamId"`
	}{streamID}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// RejoinStreamParams names the run to rejoin. With LastEventID (the
// request's Last-Event-ID header) it is a dropped stream: the events after
// that id. Without it, a reloaded page (POST <path>/connect): the thread's
// latest run at Path, from its start.
type RejoinStreamParams struct {
	ThreadID      string `json:"threadId"`
	Path          string `json:"path"`
	Authorization string `json:"authorization,omitempty"`
	Cookie        string `json:"cookie,omitempty"`
	LastEventID   string `json:"lastEventId,omitempty"`
}

// RejoinStreamResult is the read to call ReadRejoin with, and the status and
// headers to answer the client with (the run's own).
type RejoinStreamResult struct {
	ReadID  string            `json:"readId"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
}

// RejoinStream opens a read of a run. Nothing to rejoin (an unknown, expired
// or forged id, another thread, path or credentials, no run) fails with
// ErrResumeUnknown, one answer for all, whose Status() is the HTTP status to
// answer with: 410, or 204 for a reload.
func (c *Client) RejoinStream(ctx context.Context, p RejoinStreamParams) (*RejoinStreamResult, error) {
	return c.rejoinStreamOn(ctx, c.current(), p)
}

// Read ids (r1, r2, ...) are the process's own, as stream ids are: the ...On
// forms bind a read to the process that opened it.
func (c *Client) rejoinStreamOn(ctx context.Context, on *proc, p RejoinStreamParams) (*RejoinStreamResult, error) {
	var r RejoinStreamResult
	if err := c.callOn(ctx, on, "rejoinStream", p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ReadRejoinParams: WaitMs is how long the sidecar waits for an event before
// it answers with none; nil is its default (1 s), at most 30000.
type ReadRejoinParams struct {
	ReadID string `json:"readId"`
	WaitMs *int   `json:"waitMs,omitempty"`
}

// ReadRejoinResult is the next events of the run, as SSE with their ids, to
// write to the client as they are. Done: the run ended and the read is
// closed; End says how: "finished" (end the client's response), anything else
// ("cancelled", "evicted", "unresumable": break it off, so that the client
// does not take a cut run for a whole one).
type ReadRejoinResult struct {
	Text string `json:"text"`
	Done bool   `json:"done"`
	End  string `json:"end,omitempty"`
}

// ReadRejoin waits for the next events of a read (the replay first, then the
// live tail). A read the sidecar no longer holds fails with ErrUnknownRead.
func (c *Client) ReadRejoin(ctx context.Context, p ReadRejoinParams) (*ReadRejoinResult, error) {
	return c.readRejoinOn(ctx, c.current(), p)
}

func (c *Client) readRejoinOn(ctx context.Context, on *proc, p ReadRejoinParams) (*ReadRejoinResult, error) {
	var r ReadRejoinResult
	if err := c.callOn(ctx, on, "readRejoin", p, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// CloseRejoin forgets a read whose client went away: it no longer keeps the
// run going past its grace.
func (c *Client) CloseRejoin(ctx context.Context, readID string) error {
	return c.closeRejoinOn(ctx, c.current(), readID)
}

func (c *Client) closeRejoinOn(ctx context.Context, on *proc, readID string) error {
	return c.callOn(ctx, on, "closeRejoin", struct {
		ReadID string `json:"readId"`
	}{readID}, nil)
}
