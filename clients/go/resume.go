package aguistate

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
)

// Typed wrappers for resume through the stream methods (protocol/README.md
// §16): a stream opened with OpenStreamParams.Resume is filed as a run, every
// event of its text gets an `id:` line, and a client that drops can rejoin it
// from the sidecar's run log (memory, or Redis shared by several servers).
// Every rule of resume is the sidecar's: which request is a rejoin or a
// reload (ClassifyRequest), the credential a request carries, the headers a
// rejoin is answered with, and the answer to a refused one. The caller passes
// the raw request and response headers. Middleware (middleware_resume.go) is
// built on them.

// HeaderPairs is h as the [name, value] pairs the resume methods take, every
// value of a repeated header a pair of its own; the sidecar reads names in
// any case. The pairs are in the order of their names, for want of the order
// they came in, which http.Header does not keep.
func HeaderPairs(h http.Header) [][2]string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	sort.Strings(names)
	pairs := [][2]string{} // never nil: [] on the wire, not null
	for _, name := range names {
		for _, v := range h[name] {
			pairs = append(pairs, [2]string{name, v})
		}
	}
	return pairs
}

// ResumeRun is openStream's `resume`: what the run is filed under. The
// sidecar derives from the headers who may rejoin it and the headers a rejoin
// is answered with.
type ResumeRun struct {
	ThreadID        string          `json:"threadId,omitempty"`        // the request's RunAgentInput.threadId; "": the run is rejoinable by its ids, never reloadable
	Messages        json.RawMessage `json:"messages,omitempty"`        // RunAgentInput.messages, for a reload's MESSAGES_SNAPSHOT; nil: []
	Path            string          `json:"path"`                      // the request's path; a query is taken off
	RequestHeaders  [][2]string     `json:"requestHeaders,omitempty"`  // the request's headers as received (HeaderPairs)
	ResponseHeaders [][2]string     `json:"responseHeaders,omitempty"` // the response's headers as the handler set them (HeaderPairs)

	// Deprecated: the earlier form of RequestHeaders and ResponseHeaders,
	// which the sidecar still takes (not with them).
	Authorization string            `json:"authorization,omitempty"`
	Cookie        string            `json:"cookie,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
}

// ClassifyRequestParams is a request as it reached the server, with the
// middleware's own options: Paths, the paths it handles (nil: every path),
// and Resume, false when its resume is off (nil: on).
type ClassifyRequestParams struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`    // the request target, query allowed
	Headers [][2]string `json:"headers"` // HeaderPairs of the request's
	Paths   []string    `json:"paths,omitempty"`
	Resume  *bool       `json:"resume,omitempty"`
}

// ClassifyRequestResult says what to do with a request: Kind "forward" (to
// the app, as any other), "rejoin" (a dropped stream) or "reload" (a
// reloaded page): answer those two with RejoinStream, never the app.
// Handled false: the request is not the middleware's (the app's, untouched);
// true: BodyBytes is how much of its body to keep for openStream.
type ClassifyRequestResult struct {
	Kind      string `json:"kind"`
	Handled   bool   `json:"handled"`
	BodyBytes int    `json:"bodyBytes,omitempty"`
}

// ClassifyRequest asks the sidecar what a request is (protocol/README.md
// §16); a middleware calls it before the app, for every request it handles.
func (c *Client) ClassifyRequest(ctx context.Context, p ClassifyRequestParams) (*ClassifyRequestResult, error) {
	return c.classifyRequestOn(ctx, c.current(), p)
}

func (c *Client) classifyRequestOn(ctx context.Context, on *proc, p ClassifyRequestParams) (*ClassifyRequestResult, error) {
	var r ClassifyRequestResult
	if err := c.callOn(ctx, on, "classifyRequest", p, &r); err != nil {
		return nil, err
	}
	return &r, nil
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

// RejoinStreamParams is the request to answer from the run log, as it
// reached the server: the sidecar reads from it whether it is a dropped
// stream (Last-Event-ID: the events after that id) or a reloaded page (POST
// <path>/connect: the thread's latest run, from its start), the threadId of
// its body and its credential.
type RejoinStreamParams struct {
	Request *HTTPRequest `json:"request,omitempty"`

	// Deprecated: the earlier form of Request, which the sidecar still
	// takes (not with it), read by the same rules.
	ThreadID      string `json:"threadId,omitempty"`
	Path          string `json:"path,omitempty"`
	Authorization string `json:"authorization,omitempty"`
	Cookie        string `json:"cookie,omitempty"`
	LastEventID   string `json:"lastEventId,omitempty"`
}

// HTTPRequest is a request as the server received it (the protocol's
// HttpRequest). Body is its body as text, read up to the limit the caller
// keeps for a RunAgentInput; "": none.
type HTTPRequest struct {
	Method  string      `json:"method"`
	Path    string      `json:"path"`    // the request target, query allowed
	Headers [][2]string `json:"headers"` // HeaderPairs of the request's
	Body    string      `json:"body,omitempty"`
}

// RejoinStreamResult is the read to call ReadRejoin with, and the status and
// headers to answer the client with (the run's own).
type RejoinStreamResult struct {
	ReadID  string            `json:"readId"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
}

// RejoinStream opens a read of a run. Nothing to rejoin (an unknown, expired
// or forged id, another thread, path or credential, no run, a broken run
// already read to its end) fails with ErrResumeUnknown, one answer for all,
// whose Refusal() is the HTTP answer to give exactly: 410, or 204 for a
// reload.
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
// it answers with none; nil is its default, which a middleware keeps.
type ReadRejoinParams struct {
	ReadID string `json:"readId"`
	WaitMs *int   `json:"waitMs,omitempty"`
}

// ReadRejoinResult is the next events of the run, as SSE with their ids, to
// write to the client as they are: at most a page of them, so that a client
// that reads slowly is asked for the next one only once it has taken this
// one. Done: the run ended and the read is
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
