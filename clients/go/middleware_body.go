package aguistate

import (
	"io"
	"sync"
)

// teeBody is a handled request's body as the app reads it (protocol/README.md
// §14, classifyRequest's bodyBytes): the middleware reads it only as the app
// does, and keeps a copy for openStream while it stays within limit. At the
// response head (atHead), if the body has not ended, it reads on up to limit
// in all, and hands those bytes to the app after, in order. So nothing is
// read before the app's first byte, and never more than limit ahead of it.
//
// mu is held across each read of src: the app's reads and the head's read
// ahead take turns, so the bytes keep their order.
type teeBody struct {
	mu     sync.Mutex
	src    io.ReadCloser
	limit  int64
	length int64  // the request's ContentLength, -1 unknown
	read   int64  // read from src so far
	kept   []byte // src's bytes so far, nil once past limit
	over   bool   // past limit: the body is not kept
	err    error  // src's error (io.EOF at its end), for the app once ahead is drained
	ahead  []byte // read at the head, not yet handed to the app
}

func newTeeBody(src io.ReadCloser, limit, length int64) *teeBody {
	return &teeBody{src: src, limit: limit, length: length, kept: []byte{}}
}

func (t *teeBody) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ahead) > 0 {
		n := copy(p, t.ahead)
		t.ahead = t.ahead[n:]
		return n, nil
	}
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.src.Read(p)
	t.took(p[:n], err)
	return n, err
}

func (t *teeBody) Close() error { return t.src.Close() }

// took keeps what was read, while within limit.
func (t *teeBody) took(b []byte, err error) {
	t.read += int64(len(b))
	switch {
	case t.read > t.limit:
		t.over, t.kept = true, nil
	case !t.over:
		t.kept = append(t.kept, b...)
	}
	if err != nil {
		t.err = err
	}
}

// atHead reads on up to limit if the body has not ended, and returns the
// whole body, or nil when it went past limit, failed or is not known to have
// ended.
func (t *teeBody) atHead() *string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.err == nil && t.read < t.limit && t.read != t.length {
		b := make([]byte, min64(t.limit-t.read, 32<<10))
		n, err := t.src.Read(b)
		t.took(b[:n], err)
		t.ahead = append(t.ahead, b[:n]...)
	}
	whole := t.err == io.EOF || (t.err == nil && t.read == t.length)
	if t.over || !whole {
		return nil
	}
	body := string(t.kept)
	return &body
}

func min64(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}
