// Package headerenc provides the byte-exact encoding of result headers that
// pkg/redisstore and pkg/pgstore store.
//
// JSON cannot hold them: encoding/json replaces bytes that are not UTF-8
// with U+FFFD, and header values may carry any bytes (RFC 9110 obs-text,
// such as a Latin-1 filename). The encoding is length-prefixed instead:
//
//	version (1 byte, 1)
//	uvarint number of names
//	per name, in sorted order:
//	    uvarint len, name bytes
//	    uvarint number of values
//	    per value: uvarint len, value bytes
package headerenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// version is the first byte of every encoding.
const version = 1

// ErrMalformed reports bytes that Decode cannot read.
var ErrMalformed = errors.New("headerenc: malformed headers")

// Encode returns the encoding of h, or nil when h is empty.
func Encode(h map[string][]string) []byte {
	if len(h) == 0 {
		return nil
	}
	names := make([]string, 0, len(h))
	size := 1 + binary.MaxVarintLen64
	for name, vals := range h {
		names = append(names, name)
		size += 2*binary.MaxVarintLen64 + len(name)
		for _, v := range vals {
			size += binary.MaxVarintLen64 + len(v)
		}
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = binary.AppendUvarint(b, uint64(len(name)))
		b = append(b, name...)
		vals := h[name]
		b = binary.AppendUvarint(b, uint64(len(vals)))
		for _, v := range vals {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// Decode returns the headers encoded in b, or nil when b is empty. The
// returned map shares no memory with b. It returns an error wrapping
// ErrMalformed when b is not an encoding made by Encode.
func Decode(b []byte) (map[string][]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != version {
		return nil, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	r := reader{b: b[1:]}
	n := r.count()
	h := make(map[string][]string, min(n, 64))
	for range n {
		name := r.str()
		nv := r.count()
		vals := make([]string, 0, min(nv, 64))
		for range nv {
			vals = append(vals, r.str())
		}
		if r.err != nil {
			break
		}
		h[name] = vals
	}
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return h, nil
}

// reader reads uvarints and strings from b, keeping the first error.
type reader struct {
	b   []byte
	err error
}

// count reads a uvarint that counts items, each at least one byte long,
// so it can never exceed the bytes left.
func (r *reader) count() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)) {
		r.err = fmt.Errorf("%w: bad length", ErrMalformed)
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

// str reads a length-prefixed string.
func (r *reader) str() string {
	if r.err != nil {
		return ""
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)-n) {
		r.err = fmt.Errorf("%w: bad length", ErrMalformed)
		return ""
	}
	s := string(r.b[n : n+int(v)])
	r.b = r.b[n+int(v):]
	return s
}
