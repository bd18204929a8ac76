package moto

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// requireInstalled skips the test when moto_server is not on PATH, or
// fails it when CI is set.
func requireInstalled(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath(DefaultBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server required in CI: %v", err)
		}
		t.Skipf("moto_server not installed (%v): %s", err, InstallHint)
	}
}

func TestStartStop(t *testing.T) {
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := listTables(ctx, http.DefaultClient, s.Endpoint()); err != nil {
		t.Errorf("ListTables on a started server: %v", err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The port is free once Stop returns.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())))
	if err != nil {
		t.Errorf("port %d still taken after Stop: %v", s.Port(), err)
	} else {
		l.Close()
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: got %v, want nil", err)
	}
}

func TestStartNotInstalled(t *testing.T) {
	_, err := Start(context.Background(), Options{Bin: "moto-no-such-server"})
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("got %v, want %v", err, ErrNotInstalled)
	}
}

func TestStartExitsWhileStarting(t *testing.T) {
	// false exits at once: Start must report it, not wait for the timeout.
	_, err := Start(context.Background(), Options{Bin: "false", StartTimeout: time.Hour})
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("got %v, want %v", err, ErrNotReady)
	}
}
