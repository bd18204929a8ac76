package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/redistest"
)

func TestStartStop(t *testing.T) {
	srv, err := redistest.Start(context.Background(), redistest.Options{})
	if errors.Is(err, redistest.ErrNotInstalled) && os.Getenv(redistest.EnvCI) == "" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.URL(), "redis://127.0.0.1:") {
		t.Errorf("URL = %q, want redis://127.0.0.1:PORT/0", srv.URL())
	}
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	// Persistence is off: CONFIG GET save answers an empty value.
	io.WriteString(c, "CONFIG GET save\r\n")
	r := bufio.NewReader(c)
	var lines []string
	for range 5 {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSpace(l))
	}
	c.Close()
	if got := strings.Join(lines, " "); got != "*2 $4 save $0 " && got != "*2 $4 save $0" {
		t.Errorf("CONFIG GET save = %q, want save empty", got)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", srv.Addr()); err == nil {
		c.Close()
		t.Errorf("server at %s still accepts connections after Stop", srv.Addr())
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestNotInstalled(t *testing.T) {
	_, err := redistest.Start(context.Background(), redistest.Options{Bin: "/nonexistent/redis-server"})
	if !errors.Is(err, redistest.ErrNotInstalled) {
		t.Errorf("got %v, want ErrNotInstalled", err)
	}
}

func TestStartClusterNeedsThree(t *testing.T) {
	if _, err := redistest.StartCluster(context.Background(), redistest.Options{}, 2); err == nil {
		t.Error("StartCluster(2): got nil, want an error")
	}
}
