package aguistate

import (
	"encoding/json"
	"fmt"
)

// Error is an error response from the sidecar. Compare it with errors.Is
// against ErrUnknownThread, ErrPatchFailed, ... (by code), never by message.
// Reason, Field, SkipCode and OpIndex read Data (protocol/README.md §8).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"` // always an object with a string "code"
}

func (e *Error) Error() string { return fmt.Sprintf("agui-state: %s (%d)", e.Message, e.Code) }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrInvalidParams   = &Error{Code: -32602, Message: "invalid params"}
	ErrInternal        = &Error{Code: -32603, Message: "internal error"}
	ErrUnknownThread   = &Error{Code: -32001, Message: "unknown thread"} // call OpenRun with the state again
	ErrPatchFailed     = &Error{Code: -32002, Message: "patch failed"}   // atomic ApplyOps; nothing changed
	ErrLimitExceeded   = &Error{Code: -32003, Message: "limit exceeded"}
	ErrVersionConflict = &Error{Code: -32004, Message: "version conflict"}
	ErrUnknownActivity = &Error{Code: -32005, Message: "unknown activity"}  // ActivitySnapshot or DiffActivity creates it
	ErrUnknownStream   = &Error{Code: -32006, Message: "unknown stream"}    // never opened, closed, evicted or idle: send the rest as it is
	ErrResumeUnknown   = &Error{Code: -32007, Message: "nothing to resume"} // RejoinStream: answer the HTTP client with Refusal() (410 or 204)
	ErrUnknownRead     = &Error{Code: -32008, Message: "unknown read"}      // ReadRejoin: break the rejoin's response off
	ErrMethodNotFound  = &Error{Code: -32601, Message: "method not found"}
)

// errorData is the union of the members of data that the accessors read.
// Pointers tell a member that is absent from one that is "" or 0.
type errorData struct {
	Code   string  `json:"code"`
	Reason string  `json:"reason"`
	Field  *string `json:"field"`
	Index  *int    `json:"index"`
	Refusal
}

// data decodes Data; a missing or unreadable data reads as empty, so that the
// accessors answer "" rather than fail: they are for branching, not validation.
func (e *Error) data() errorData {
	var d errorData
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &d)
	}
	return d
}

// Reason is data.reason: for -32602 (ErrInvalidParams) one of a closed set
// that can be compared exactly (MISSING, UNKNOWN_PARAM, INVALID_VALUE,
// INVALID_POINTER, ROOT_NOT_OBJECT, ...); for -32001 (ErrUnknownThread)
// "never opened", "closed" or "evicted"; for -32006 (ErrUnknownStream) and
// -32008 (ErrUnknownRead) the same or "idle". "" for any other error.
func (e *Error) Reason() string { return e.data().Reason }

// Field is data.field of -32602 (ErrInvalidParams): an escaped JSON pointer
// into the params naming the offending member, e.g. "/threadId" or
// "/set/a~1b". ok is false when data has no field (any other error), which
// tells it apart from "", the params object itself.
func (e *Error) Field() (field string, ok bool) {
	d := e.data()
	if d.Field == nil {
		return "", false
	}
	return *d.Field, true
}

// SkipCode is the skip code of the op that failed an atomic call (-32002,
// ErrPatchFailed): data.code, e.g. "PATH_NOT_FOUND", as in Skip.Code. It is
// "" for every other error, whose data.code only repeats the error's name.
// (It cannot be called Code: that is the field with the numeric code.)
func (e *Error) SkipCode() string {
	if e.Code != ErrPatchFailed.Code {
		return ""
	}
	return e.data().Code
}

// OpIndex is data.index of -32002 (ErrPatchFailed): the position in Ops of
// the first op that would have been skipped. -1 for every other error.
func (e *Error) OpIndex() int {
	if d := e.data(); e.Code == ErrPatchFailed.Code && d.Index != nil {
		return *d.Index
	}
	return -1
}

// Status is data.status of -32007 (ErrResumeUnknown): the HTTP status to
// answer the rejoin with, 410 for a dropped stream (Last-Event-ID) or 204 for
// a reload (connect) (protocol/README.md §16). 0 for every other error.
func (e *Error) Status() int {
	r, _ := e.Refusal()
	return r.Status
}

// Refusal is the HTTP answer a refused rejoin or reload gets (data of -32007,
// ErrResumeUnknown, protocol/README.md §16): write exactly that status, those
// headers and that body. ok is false for every other error.
func (e *Error) Refusal() (r Refusal, ok bool) {
	if e.Code != ErrResumeUnknown.Code {
		return Refusal{}, false
	}
	return e.data().Refusal, true
}

// Refusal is an HTTP answer the sidecar decided: the same for an unknown run
// and a refused one.
type Refusal struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"` // lower-case names
	Body    string            `json:"body"`
}
