package aguistate

import (
	"context"
	"encoding/json"
)

// Typed wrappers for the activity methods (protocol/README.md §10: AG-UI 1.0
// ACTIVITY_SNAPSHOT and ACTIVITY_DELTA). An activity is keyed by its message
// id within a thread: it shares the thread's version, survives OpenRun, goes
// with CloseThread or eviction, and its content is always a JSON object. A
// call for an activity the thread does not hold fails with ErrUnknownActivity
// (ActivitySnapshot or DiffActivity creates it); a call for a thread that does
// not exist, with ErrUnknownThread.

// Bool returns a pointer to v, for ActivitySnapshotParams.Replace.
func Bool(v bool) *bool { return &v }

type ActivitySnapshotParams struct {
	ThreadID     string `json:"threadId"`
	MessageID    string `json:"messageId"`
	ActivityType string `json:"activityType"`
	Content      any    `json:"content"`           // a JSON object
	Replace      *bool  `json:"replace,omitempty"` // nil: true; Bool(false) leaves an existing activity as it is
	IfVersion    *int   `json:"ifVersion,omitempty"`
}

// ActivitySnapshotResult has exactly one ACTIVITY_SNAPSHOT event, even when
// nothing changed: forward it, it is also how a client is resynchronized.
// With Replace false and an existing activity, the event carries what the
// sidecar holds, with "replace": false, and the version does not move.
type ActivitySnapshotResult struct {
	Version int               `json:"version"`
	Events  []json.RawMessage `json:"events"`
}

// ApplyActivityOpsParams: Ops as in ApplyOpsParams, applied to the content.
// A nil Ops is sent as [], so that a retype alone needs no ops.
type ApplyActivityOpsParams struct {
	ThreadID     string `json:"threadId"`
	MessageID    string `json:"messageId"`
	Ops          []any  `json:"ops"`
	ActivityType string `json:"activityType,omitempty"` // retypes the activity; "" keeps its type
	Atomic       bool   `json:"atomic,omitempty"`
	IfVersion    *int   `json:"ifVersion,omitempty"`
}

type DiffActivityParams struct {
	ThreadID     string `json:"threadId"`
	MessageID    string `json:"messageId"`
	Content      any    `json:"content"`                // the new content, a JSON object
	ActivityType string `json:"activityType,omitempty"` // required if the activity does not exist yet
	IfVersion    *int   `json:"ifVersion,omitempty"`
}

type GetActivityParams struct {
	ThreadID  string `json:"threadId"`
	MessageID string `json:"messageId"`
}

type GetActivityResult struct {
	Version      int             `json:"version"`
	ActivityType string          `json:"activityType"`
	Content      json.RawMessage `json:"content"`
}

// ActivitySnapshot creates the activity, or replaces its type and content.
func (c *Client) ActivitySnapshot(ctx context.Context, p ActivitySnapshotParams) (*ActivitySnapshotResult, error) {
	return do[ActivitySnapshotResult](ctx, c, "activitySnapshot", p)
}

// ApplyActivityOps normalizes model-style ops and applies what fits to the
// activity's content; the events hold one ACTIVITY_DELTA (with an empty patch
// for a retype alone), or none if nothing moved and the type did not change.
// An unknown activity fails with ErrUnknownActivity.
func (c *Client) ApplyActivityOps(ctx context.Context, p ApplyActivityOpsParams) (*ApplyOpsResult, error) {
	if p.Ops == nil {
		p.Ops = []any{} // a nil slice marshals as null, which is not an op list
	}
	return do[ApplyOpsResult](ctx, c, "applyActivityOps", p)
}

// DiffActivity sets the activity's content and returns a minimal
// ACTIVITY_DELTA; an activity that does not exist yet is created (ActivityType
// is then required), and its event is an ACTIVITY_SNAPSHOT, with Delta [].
// Equal content and an unchanged type give no event.
func (c *Client) DiffActivity(ctx context.Context, p DiffActivityParams) (*Change, error) {
	return do[Change](ctx, c, "diffActivity", p)
}

// GetActivity returns the activity's type and content and the thread's version.
func (c *Client) GetActivity(ctx context.Context, p GetActivityParams) (*GetActivityResult, error) {
	return do[GetActivityResult](ctx, c, "getActivity", p)
}
