package integration_test

import (
	"bytes"
	"sync"
)

// lockedBuffer is a command's output as it is written: exec.Cmd's copying goroutine writes it
// while the test may read it (a hang's or a failure's tail, before Wait has returned), so both
// take the mutex. Given as both Stdout and Stderr, exec.Cmd writes it from one goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Bytes is a copy of the output so far.
func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

// String is the output so far.
func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
