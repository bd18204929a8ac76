// Package faultproxy provides a TCP proxy on a loopback port that breaks
// connections on demand, for tests of how a store's driver and the store
// behave when a reply is lost after the server applied the request.
//
// A Proxy forwards bytes both ways unchanged until told otherwise:
// [Proxy.LoseNextReply] makes it swallow the next bytes any server sends
// and close that connection (the client sees a reset or EOF after its
// request was applied), and [Proxy.Refuse] makes it close new and
// existing connections at once (the server looks down).
package faultproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy is a running proxy, started by Start. Its methods are safe for
// concurrent use. It runs goroutines per connection until Close, which
// waits for all of them.
type Proxy struct {
	ln     net.Listener
	target string

	loseNext atomic.Bool
	refuse   atomic.Bool
	lost     atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 (a free port) and forwards every connection
// to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// LoseNextReply makes the proxy swallow the next bytes a server sends, on
// whichever connection sends first, and close that connection.
func (p *Proxy) LoseNextReply() { p.loseNext.Store(true) }

// Lost returns how many replies the proxy has swallowed.
func (p *Proxy) Lost() int { return int(p.lost.Load()) }

// Refuse, while on, closes every connection and every new one at once.
func (p *Proxy) Refuse(on bool) {
	p.refuse.Store(on)
	if on {
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	}
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track registers c, or reports false when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve forwards one client connection until either side closes.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		client.Close()
		server.Close()
		return
	}
	defer p.untrack(client)
	defer p.untrack(server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(server, client)
		server.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if p.loseNext.CompareAndSwap(true, false) {
				p.lost.Add(1)
				break
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break // EOF or a broken connection: close both sides
		}
	}
	client.Close()
	server.Close()
	<-done
}
