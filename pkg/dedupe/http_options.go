package dedupe

import (
	"fmt"
	"strings"
	"time"
)

// httpOptions holds the HTTPConfig choices about where the key comes from,
// what of the body is fingerprinted and how long a route is replayed.
type httpOptions struct {
	keyHeader string // lower case; "" means Idempotency-Key
	key       func(any) string
	fpBody    func(any, []byte) ([]byte, error)
	retain    func(string) time.Duration
}

func newHTTPOptions(c *HTTPConfig) httpOptions {
	o := httpOptions{key: c.Key, fpBody: c.Fingerprint, retain: c.Retention}
	if h := strings.ToLower(c.KeyHeader); h != "" && h != "idempotency-key" {
		o.keyHeader = h
	}
	return o
}

// keyValue returns the raw key of a request and how many it carries.
func (o httpOptions) keyValue(ev httpEvent) (string, int) {
	switch {
	case o.key != nil:
		if v := o.key(ev.raw()); v != "" {
			return v, 1
		}
		return "", 0
	case o.keyHeader != "":
		// Repeated values come joined with commas, which ParseKey
		// refuses in a bare key, as for Idempotency-Key.
		if v, ok := ev.header(o.keyHeader); ok {
			return v, 1
		}
		return "", 0
	}
	return ev.keyHeader()
}

// parseKey validates a raw key: a header value as ParseKey parses it, a
// value from HTTPConfig.Key as it is.
func (o httpOptions) parseKey(raw string) (string, error) {
	if o.key == nil {
		return ParseKey(raw)
	}
	if err := checkKeyChars(raw); err != nil {
		return "", fmt.Errorf("HTTPConfig.Key: %w", err)
	}
	return raw, nil
}

// fingerprintBody returns what of body enters the fingerprint.
func (o httpOptions) fingerprintBody(req any, body []byte) ([]byte, error) {
	if o.fpBody == nil {
		return body, nil
	}
	return o.fpBody(req, body)
}

// retention returns the retention of route, zero for the guard's.
func (o httpOptions) retention(route string) time.Duration {
	if o.retain == nil {
		return 0
	}
	return o.retain(route)
}
