package gateway

import (
	"bytes"
	"io"
	"sync"
)

// syncWriter serialises writes to w, so that lines from several
// environments never interleave.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// lineWriter forwards complete lines to out, each prefixed, in one Write
// call per line. Lines for which drop returns true are left out.
type lineWriter struct {
	out    io.Writer
	prefix string
	drop   func(line []byte) bool

	mu  sync.Mutex
	buf []byte
}

// maxLine bounds how much of a line without a newline is buffered before
// it is forwarded anyway.
const maxLine = 64 << 10

// Write implements io.Writer. It never fails: output that cannot be
// forwarded is dropped, so that a slow terminal cannot stall a function.
func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) < maxLine {
				break
			}
			i = len(l.buf)
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[min(i+1, len(l.buf)):]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	return len(b), nil
}

// Flush forwards a last line that had no newline.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

// emit writes one line; l.mu must be held.
func (l *lineWriter) emit(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if l.drop != nil && l.drop(line) {
		return
	}
	out := make([]byte, 0, len(l.prefix)+len(line)+1)
	out = append(out, l.prefix...)
	out = append(out, line...)
	out = append(out, '\n')
	_, _ = l.out.Write(out)
}

// emulatorNoise reports whether line is one of the lines the emulator
// prints around every invocation (START, END, REPORT). They are dropped
// unless PoolConfig.Verbose is set; the pool logs cold starts itself.
func emulatorNoise(line []byte) bool {
	for _, p := range [][]byte{[]byte("START RequestId: "), []byte("END RequestId: "), []byte("REPORT RequestId: ")} {
		if bytes.HasPrefix(line, p) {
			return true
		}
	}
	return false
}
