package moto

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// serializer is a loopback reverse proxy that passes one request at a time
// to moto_server.
//
// moto_server serves each request on its own thread, and its DynamoDB
// keeps no lock between evaluating a ConditionExpression and writing the
// item: under concurrent requests, two conditional PutItems on the same
// absent key can both succeed (seen with 100 concurrent claims under
// load: 2 acquired). DynamoDB applies conditional writes to an item
// atomically, and the store's exactly-once guarantee rests on that. Passing
// requests one at a time restores it; moto answers each in about a
// millisecond, so the suites barely slow down.
type serializer struct {
	ln   net.Listener
	srv  *http.Server
	done chan struct{} // closed when Serve has returned
}

// startSerializer listens on 127.0.0.1:port (0: a free port) and forwards
// to target, one request at a time. One goroutine serves until close.
func startSerializer(port int, target string) (*serializer, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("serializer target %q: %w", target, err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, fmt.Errorf("serializer: %w", err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	p := &serializer{
		ln: ln,
		srv: &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				rp.ServeHTTP(w, r)
			}),
			ReadHeaderTimeout: 10 * time.Second,
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(p.done)
		// Serve returns ErrServerClosed after close; any other error means
		// the listener failed, and requests then fail with connection
		// errors that the callers report.
		_ = p.srv.Serve(ln)
	}()
	return p, nil
}

// port returns the port the serializer listens on.
func (p *serializer) port() int {
	return p.ln.Addr().(*net.TCPAddr).Port
}

// close stops accepting, lets requests in flight finish for a moment, and
// waits for the serving goroutine to end.
func (p *serializer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		_ = p.srv.Close()
	}
	<-p.done
}
