package aguistate

import (
	"context"
	"encoding/json"
)

// Typed wrappers for the protocol's methods (protocol/openrpc.json). JSON
// values are `any` (anything encoding/json marshals, json.RawMessage included)
// on the way in and json.RawMessage on the way out. Fields whose zero value is
// meaningful are pointers or `any`: IfVersion is *int so that ifVersion 0 can be
// sent, and ToolState is `any` so that an empty map {} is sent, not dropped.

// IfVersion returns a pointer to v, for the IfVersion fields.
func IfVersion(v int) *int { return &v }

// Op is an RFC 6902 operation as the sidecar emits it: escaped pointer
// strings, never "test". It can also be sent in ApplyOps and Normalize.
type Op struct {
	Op    string          `json:"op"`
	From  string          `json:"from,omitempty"`
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value,omitempty"` // JSON null arrives as "null", not empty
}

// Skip is an op that did not apply.
type Skip struct {
	Index   int             `json:"index"`
	Op      json.RawMessage `json:"op,omitempty"` // the element exactly as given
	Code    string          `json:"code"`         // PATH_NOT_FOUND, INVALID_POINTER, ...
	Message string          `json:"message"`
}

// Change is what every state-changing call returns. Events are the AG-UI
// events to forward to the client, in order, as they are ([] when nothing moved).
type Change struct {
	Version int               `json:"version"`
	Delta   []Op              `json:"delta"`
	Events  []json.RawMessage `json:"events"`
}

type OpenRunParams struct {
	ThreadID  string `json:"threadId"`
	RunID     string `json:"runId,omitempty"`
	State     any    `json:"state,omitempty"`     // the client's RunAgentInput.state; replaces the mirror
	Namespace string `json:"namespace,omitempty"` // default "toolState" when ToolState is given
	ToolState any    `json:"toolState,omitempty"` // the thread's stored map; {} is meaningful
	Snapshot  bool   `json:"snapshot,omitempty"`
	IfVersion *int   `json:"ifVersion,omitempty"`
}

type OpenRunResult struct {
	ThreadID string `json:"threadId"`
	RunID    string `json:"runId,omitempty"`
	Change
}

// DiffToolStateParams takes either ToolState (the complete new map) or Set
// and/or Remove (incremental).
type DiffToolStateParams struct {
	ThreadID  string         `json:"threadId"`
	ToolState any            `json:"toolState,omitempty"` // {} removes every key
	Set       map[string]any `json:"set,omitempty"`
	Remove    []string       `json:"remove,omitempty"`
	IfVersion *int           `json:"ifVersion,omitempty"`
}

// ApplyOpsParams: each element of Ops is an Op, a map, or the model's raw JSON
// (json.RawMessage); paths may be pointers or arrays of raw segments.
type ApplyOpsParams struct {
	ThreadID  string `json:"threadId"`
	Ops       []any  `json:"ops"`
	Atomic    bool   `json:"atomic,omitempty"`
	IfVersion *int   `json:"ifVersion,omitempty"`
}

type ApplyOpsResult struct {
	Change
	Skipped []Skip `json:"skipped"`
}

type NormalizeParams struct {
	Ops   []any `json:"ops"`
	State any   `json:"state,omitempty"` // default {}
}

type NormalizeResult struct {
	Delta   []Op            `json:"delta"`
	Skipped []Skip          `json:"skipped"`
	State   json.RawMessage `json:"state"`
}

type DiffStateParams struct {
	ThreadID  string `json:"threadId"`
	Value     any    `json:"value"`          // nil sends null
	Path      any    `json:"path,omitempty"` // pointer string or []any of raw segments; default root
	IfVersion *int   `json:"ifVersion,omitempty"`
}

type GetStateParams struct {
	ThreadID string `json:"threadId"`
	Path     any    `json:"path,omitempty"`
}

type GetStateResult struct {
	Version int             `json:"version"`
	State   json.RawMessage `json:"state"`
}

// OpenRun starts a run: the resynchronization point for a thread.
func (c *Client) OpenRun(ctx context.Context, p OpenRunParams) (*OpenRunResult, error) {
	return do[OpenRunResult](ctx, c, "openRun", p)
}

// DiffToolState diffs the namespace key by key.
func (c *Client) DiffToolState(ctx context.Context, p DiffToolStateParams) (*Change, error) {
	return do[Change](ctx, c, "diffToolState", p)
}

// ApplyOps normalizes model-style ops and applies what fits.
func (c *Client) ApplyOps(ctx context.Context, p ApplyOpsParams) (*ApplyOpsResult, error) {
	return do[ApplyOpsResult](ctx, c, "applyOps", p)
}

// Normalize is ApplyOps against a given state, touching no thread.
func (c *Client) Normalize(ctx context.Context, p NormalizeParams) (*NormalizeResult, error) {
	return do[NormalizeResult](ctx, c, "normalize", p)
}

// DiffState sets the mirror at Path to Value and returns a minimal delta.
func (c *Client) DiffState(ctx context.Context, p DiffStateParams) (*Change, error) {
	return do[Change](ctx, c, "diffState", p)
}

// GetState returns the mirror (or the value at Path) and the thread's version.
func (c *Client) GetState(ctx context.Context, p GetStateParams) (*GetStateResult, error) {
	return do[GetStateResult](ctx, c, "getState", p)
}

// CloseThread forgets a thread; it reports whether a live one was forgotten.
func (c *Client) CloseThread(ctx context.Context, threadID string) (bool, error) {
	var r struct {
		Closed bool `json:"closed"`
	}
	err := c.Call(ctx, "closeThread", struct {
		ThreadID string `json:"threadId"`
	}{threadID}, &r)
	return r.Closed, err
}

// EscapePointer writes raw segments (strings, or non-negative integers for
// array indexes) as an escaped JSON pointer: {"a/b", 0} gives "/a~1b/0", and
// no segments give "", the root.
func (c *Client) EscapePointer(ctx context.Context, path []any) (string, error) {
	if path == nil {
		path = []any{} // a nil slice marshals as null, which is not a path
	}
	var r struct {
		Pointer string `json:"pointer"`
	}
	err := c.Call(ctx, "escapePointer", struct {
		Path []any `json:"path"`
	}{path}, &r)
	return r.Pointer, err
}

// ParsePointer splits an escaped JSON pointer into its raw segments, always
// strings (no index conversion): "/a~1b/0" gives {"a/b", "0"}, "" gives {}.
// A pointer without its leading "/" fails with ErrInvalidParams, Reason
// INVALID_POINTER.
func (c *Client) ParsePointer(ctx context.Context, pointer string) ([]string, error) {
	var r struct {
		Path []string `json:"path"`
	}
	if err := c.Call(ctx, "parsePointer", struct {
		Pointer string `json:"pointer"`
	}{pointer}, &r); err != nil {
		return nil, err
	}
	return r.Path, nil
}

// StatsResult is what the sidecar counts (protocol/README.md §6, stats).
type StatsResult struct {
	Threads        int    `json:"threads"`    // live threads
	StateBytes     int64  `json:"stateBytes"` // approximate JSON size of every live mirror (§7)
	Requests       int64  `json:"requests"`   // requests with an id since start, this one included
	UptimeMs       int64  `json:"uptimeMs"`
	Limits         Limits `json:"limits"`
	Version        string `json:"version"`        // the program's version, not the protocol's
	Evicted        int64  `json:"evicted"`        // threads evicted since start (--max-threads, --max-heap)
	Activities     int    `json:"activities"`     // activities held by live threads (§10)
	Streams        int    `json:"streams"`        // open streams (§14)
	StreamsEvicted int64  `json:"streamsEvicted"` // streams closed by maxStreams, streamIdleMs (ones their callers abandoned) or the heap ceiling
	Runs           int    `json:"runs"`           // runs the run log keeps (§16): in memory, every live or retained run; in Redis, the ones this process writes
	RunBytes       int64  `json:"runBytes"`       // bytes of events those runs hold
	RunsEvicted    int64  `json:"runsEvicted"`    // runs dropped to stay within --log-bytes
	Reads          int    `json:"reads"`          // open rejoin reads (RejoinStream)
}

// Limits are the limits in force (protocol/README.md §7).
type Limits struct {
	MaxMessageBytes int64 `json:"maxMessageBytes"`
	MaxOps          int   `json:"maxOps"`
	MaxDepth        int   `json:"maxDepth"`
	MaxStateBytes   int64 `json:"maxStateBytes"`
	MaxThreads      int   `json:"maxThreads"`
	MaxHeapBytes    int64 `json:"maxHeapBytes"`
	MaxStreams      int   `json:"maxStreams"`
	StreamIdleMs    int64 `json:"streamIdleMs"`
}

// Stats returns the sidecar's counters and the limits in force.
func (c *Client) Stats(ctx context.Context) (*StatsResult, error) {
	return do[StatsResult](ctx, c, "stats", nil)
}

// Discover returns the OpenRPC document (rpc.discover), as it is.
func (c *Client) Discover(ctx context.Context) (json.RawMessage, error) {
	var r json.RawMessage
	if err := c.Call(ctx, "rpc.discover", nil, &r); err != nil {
		return nil, err
	}
	return r, nil
}

// do calls method and returns its decoded result, or nil and the error.
func do[T any](ctx context.Context, c *Client, method string, params any) (*T, error) {
	var r T
	if err := c.Call(ctx, method, params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
