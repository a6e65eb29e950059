// Package witness holds no code, only tests: they drive the real agui-state
// binary through the Go client and replay every event it returns with
// github.com/evanphx/json-patch, an RFC 6902 implementation that shares no
// code with the sidecar's. After every call the replay must equal getState,
// and getActivity for each activity (ACTIVITY_SNAPSHOT, ACTIVITY_DELTA).
// It is a module of its own so that the client module requires nothing.
package witness
