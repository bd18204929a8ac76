package dedupe

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// errNotJSON is returned by CanonicalJSON for input that is not one valid
// JSON value.
var errNotJSON = errors.New("dedupe: not valid JSON")

// CanonicalJSON returns the canonical form of the JSON value in data, so
// that two serialisations of the same value compare equal byte for byte:
//
//   - insignificant whitespace is dropped;
//   - object members are sorted by key (bytewise on the decoded UTF-8
//     key); members with equal keys keep their order, since decoders that
//     keep the last of them see different values otherwise;
//   - strings are decoded and re-encoded with the minimal escaping (only
//     '"', '\\' and control characters are escaped);
//   - numbers are kept exactly as written: 1 and 1.0 stay different, and
//     big integers or long decimals never pass through float64.
//
// It returns an error if data is not exactly one valid JSON value. A lone
// UTF-16 surrogate's escape ("\ud800" alone) becomes U+FFFD, as
// encoding/json decodes it; Fingerprint hashes such a body raw.
func CanonicalJSON(data []byte) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errNotJSON
	}
	return canonicalJSON(make([]byte, 0, len(data)), data), nil
}

// Fingerprint returns the hex SHA-256 fingerprint of a request made of
// parts and a body. Each part is length-prefixed, so parts can never run
// into each other. A body that is valid JSON is hashed in its CanonicalJSON
// form, anything else raw (a body that escapes a lone UTF-16 surrogate
// too, which CanonicalJSON would make U+FFFD), and the two cases are
// tagged so they cannot collide.
//
// The HTTP adapters fingerprint method, route, path parameters, query,
// configured headers and body this way; event handlers can use it with no
// parts and the message body.
func Fingerprint(body []byte, parts ...string) string {
	var buf []byte
	for _, p := range parts {
		buf = appendPart(buf, p)
	}
	return sumHex(appendBody(buf, body))
}

// appendPart appends p to buf with a length prefix.
func appendPart(buf []byte, p string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(p)))
	return append(buf, p...)
}

// appendBody appends body to buf, canonicalised and tagged 'j' when it is
// JSON, raw and tagged 'r' otherwise. The body must be the last thing
// appended, since it carries no length prefix.
func appendBody(buf, body []byte) []byte {
	if json.Valid(body) && !loneSurrogate(body) {
		return canonicalJSON(append(buf, 'j'), body)
	}
	return append(append(buf, 'r'), body...)
}

// sumHex returns the SHA-256 of buf in hex.
func sumHex(buf []byte) string {
	sum := sha256.Sum256(buf)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// canonicalizer turns a JSON text already checked by json.Valid into its
// canonical form. It cannot fail, because its input is valid.
//
// It works in two passes so that the cost stays O(n log n) however deep
// the nesting: parse builds a flat tree in which only containers, object
// members and runs of scalars are nodes (scalars are written, canonical,
// into an arena as they are met), and emit writes the tree out once,
// sorting each object's members on the way. Copying each object's
// canonical text into its parent instead would be quadratic in the depth.
type canonicalizer struct {
	src   []byte
	pos   int
	arena []byte  // canonical scalars and decoded keys
	nodes []cnode // the tree
	kids  []int   // children of every container, contiguous per container
	stack []int   // children of the containers being parsed
}

// canonicalJSON appends the canonical form of src, which must be valid
// JSON, to dst. Every buffer is sized up front from a count of the
// punctuation, an upper bound of the node count, so none grows.
func canonicalJSON(dst, src []byte) []byte {
	n := 1 + bytes.Count(src, []byte{','}) + bytes.Count(src, []byte{':'}) +
		bytes.Count(src, []byte{'['}) + bytes.Count(src, []byte{'{'})
	ints := make([]int, 2*n)
	c := canonicalizer{
		src:   src,
		arena: make([]byte, 0, len(src)+16),
		nodes: make([]cnode, 0, n),
		kids:  ints[:0:n],
		stack: ints[n:n],
	}
	return c.canonical(dst)
}

// cnode is one node of the tree.
type cnode struct {
	kind     byte // '{' object, '[' array, 's' scalars
	lo, hi   int  // containers: kids[lo:hi]; scalars: arena[lo:hi]
	klo, khi int  // object members: the decoded key in arena[klo:khi]
}

// canonical appends the canonical form of c.src to dst.
func (c *canonicalizer) canonical(dst []byte) []byte {
	return c.emit(dst, c.value())
}

func (c *canonicalizer) skipSpace() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// value parses the value at c.pos and returns its node.
func (c *canonicalizer) value() int {
	c.skipSpace()
	switch c.src[c.pos] {
	case '{', '[':
		return c.container()
	}
	lo := len(c.arena)
	c.arena = c.scalar(c.arena)
	c.nodes = append(c.nodes, cnode{kind: 's', lo: lo, hi: len(c.arena)})
	return len(c.nodes) - 1
}

// container parses the object or array at c.pos.
func (c *canonicalizer) container() int {
	kind := c.src[c.pos]
	c.pos++
	self := len(c.nodes)
	c.nodes = append(c.nodes, cnode{kind: kind})
	base := len(c.stack)
	for {
		c.skipSpace()
		switch c.src[c.pos] {
		case '}', ']':
			c.pos++
			lo := len(c.kids)
			c.kids = append(c.kids, c.stack[base:]...)
			c.stack = c.stack[:base]
			c.nodes[self].lo, c.nodes[self].hi = lo, len(c.kids)
			return self
		case ',':
			c.pos++
			c.skipSpace()
		}
		if kind == '{' {
			klo := len(c.arena)
			c.arena = c.str(c.arena)
			khi := len(c.arena)
			c.skipSpace()
			c.pos++ // ':'
			child := c.value()
			c.nodes[child].klo, c.nodes[child].khi = klo, khi
			c.stack = append(c.stack, child)
			continue
		}
		// In arrays, consecutive scalars share one node: "1,2,3".
		prev := -1
		if len(c.stack) > base {
			prev = c.stack[len(c.stack)-1]
		}
		if prev >= 0 && c.nodes[prev].kind == 's' && c.nodes[prev].hi == len(c.arena) {
			c.arena = append(c.arena, ',')
			child := c.value()
			if n := c.nodes[child]; n.kind == 's' && n.lo == c.nodes[prev].hi+1 {
				c.nodes[prev].hi = n.hi
				c.nodes = c.nodes[:child]
				continue
			}
			c.stack = append(c.stack, child)
			continue
		}
		c.stack = append(c.stack, c.value())
	}
}

// scalar appends the canonical form of the string, number or literal at
// c.pos to dst.
func (c *canonicalizer) scalar(dst []byte) []byte {
	if c.src[c.pos] == '"' {
		// Without escapes a valid JSON string is already canonical.
		end := c.pos + 1
		for c.src[end] != '"' && c.src[end] != '\\' {
			end++
		}
		if c.src[end] == '"' {
			dst = append(dst, c.src[c.pos:end+1]...)
			c.pos = end + 1
			return dst
		}
		return appendString(dst, c.str(nil))
	}
	// Numbers and literals are copied as written.
	start := c.pos
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ',', ']', '}', ' ', '\t', '\n', '\r':
			return append(dst, c.src[start:c.pos]...)
		}
		c.pos++
	}
	return append(dst, c.src[start:c.pos]...)
}

// emit appends node i to dst, sorting object members by key. Members with
// equal keys keep their order: under last-wins decoding, {"a":1,"a":2} and
// {"a":2,"a":1} are different values.
func (c *canonicalizer) emit(dst []byte, i int) []byte {
	n := c.nodes[i]
	if n.kind == 's' {
		return append(dst, c.arena[n.lo:n.hi]...)
	}
	kids := c.kids[n.lo:n.hi]
	if n.kind == '[' {
		dst = append(dst, '[')
		for j, k := range kids {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = c.emit(dst, k)
		}
		return append(dst, ']')
	}
	// Node indices grow in source order, so they break ties stably.
	slices.SortFunc(kids, func(a, b int) int {
		na, nb := &c.nodes[a], &c.nodes[b]
		if n := bytes.Compare(c.arena[na.klo:na.khi], c.arena[nb.klo:nb.khi]); n != 0 {
			return n
		}
		return a - b
	})
	dst = append(dst, '{')
	for j, k := range kids {
		if j > 0 {
			dst = append(dst, ',')
		}
		m := &c.nodes[k]
		dst = appendString(dst, c.arena[m.klo:m.khi])
		dst = append(dst, ':')
		dst = c.emit(dst, k)
	}
	return append(dst, '}')
}

// str decodes the string at c.pos (which starts with '"') and appends the
// decoded bytes to dst.
func (c *canonicalizer) str(dst []byte) []byte {
	c.pos++ // opening quote
	for {
		start := c.pos
		for c.src[c.pos] != '"' && c.src[c.pos] != '\\' {
			c.pos++
		}
		dst = append(dst, c.src[start:c.pos]...)
		if c.src[c.pos] == '"' {
			c.pos++
			return dst
		}
		c.pos++ // backslash
		e := c.src[c.pos]
		c.pos++
		switch e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := c.hex4()
			if utf16.IsSurrogate(r) {
				// A valid pair decodes to one rune; a lone surrogate
				// becomes U+FFFD, as encoding/json decodes it.
				if c.pos+6 <= len(c.src) && c.src[c.pos] == '\\' && c.src[c.pos+1] == 'u' {
					save := c.pos
					c.pos += 2
					r2 := c.hex4()
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						continue
					}
					c.pos = save
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
	}
}

// hex4 decodes the four hex digits at c.pos.
func (c *canonicalizer) hex4() rune {
	var r rune
	for _, h := range c.src[c.pos : c.pos+4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			r |= rune(h - 'a' + 10)
		default:
			r |= rune(h - 'A' + 10)
		}
	}
	c.pos += 4
	return r
}

// appendString appends s as a JSON string with minimal escaping. Bytes
// that are not valid UTF-8 are kept as they are, so the encoding stays
// injective.
func appendString(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		if b >= 0x20 && b != '"' && b != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
