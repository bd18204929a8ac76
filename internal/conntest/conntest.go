package conntest

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
)

// readSignal is a connection that closes entered when its first Read
// begins.
type readSignal struct {
	net.Conn
	once    sync.Once
	entered chan struct{}
}

func (c *readSignal) Read(b []byte) (int, error) {
	c.once.Do(func() { close(c.entered) })
	return c.Conn.Read(b)
}

// LosesWaitingRead checks the connection wrap returns, which must lose
// the reply to every request it writes: it starts a read, waits until
// that read waits on the socket, writes request, answers it with reply,
// and requires the read to return no bytes and a connection reset.
func LosesWaitingRead(t *testing.T, wrap func(net.Conn) net.Conn, request, reply []byte) {
	t.Helper()
	client, server := net.Pipe()
	defer server.Close()
	sig := &readSignal{Conn: client, entered: make(chan struct{})}
	c := wrap(sig)
	defer c.Close()
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		b := make([]byte, 64)
		n, err := c.Read(b)
		got <- read{b[:n], err}
	}()
	<-sig.entered
	wrote := make(chan error, 1)
	go func() { _, err := c.Write(request); wrote <- err }() // a pipe's Write waits for the reader
	if _, err := io.ReadFull(server, make([]byte, len(request))); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if _, err := server.Write(reply); err != nil {
		t.Fatal(err)
	}
	if r := <-got; !errors.Is(r.err, syscall.ECONNRESET) || len(r.b) > 0 {
		t.Fatalf("Read after a lost reply = %q, %v; want no bytes and a reset", r.b, r.err)
	}
}
