package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"

	"github.com/lambda-dedupe/dedupe/localtest/faultproxy"
)

// echo starts a line echo server and returns its address.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestProxy(t *testing.T) {
	p, err := faultproxy.Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	io.WriteString(c, "one\n")
	if l, err := r.ReadString('\n'); err != nil || l != "one\n" {
		t.Fatalf("echo: got %q, %v; want one", l, err)
	}
	p.LoseNextReply()
	io.WriteString(c, "two\n")
	if l, err := r.ReadString('\n'); err == nil {
		t.Fatalf("after LoseNextReply: got %q, want the connection closed", l)
	}
	if p.Lost() != 1 {
		t.Errorf("Lost = %d, want 1", p.Lost())
	}
	c.Close()
	// A new connection works again.
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "three\n")
	if l, err := bufio.NewReader(c).ReadString('\n'); err != nil || l != "three\n" {
		t.Fatalf("echo after: got %q, %v; want three", l, err)
	}
}
