// Package syncbuf holds Buffer, a bytes.Buffer safe for a child process to write while a test
// reads what it has written so far.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects output under a lock; the zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
