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
//     key; members with equal keys by their canonical value);
//   - strings are decoded and re-encoded with the minimal escaping (only
//     '"', '\\' and control characters are escaped);
//   - numbers are kept exactly as written: 1 and 1.0 stay different, and
//     big integers or long decimals never pass through float64.
//
// It returns an error if data is not exactly one valid JSON value.
func CanonicalJSON(data []byte) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errNotJSON
	}
	c := canonicalizer{src: data}
	return c.value(make([]byte, 0, len(data))), nil
}

// Fingerprint returns the hex SHA-256 fingerprint of a request made of
// parts and a body. Each part is length-prefixed, so parts can never run
// into each other. A body that is valid JSON is hashed in its CanonicalJSON
// form, anything else raw, and the two cases are tagged so they cannot
// collide.
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
	if json.Valid(body) {
		c := canonicalizer{src: body}
		return c.value(append(buf, 'j'))
	}
	return append(append(buf, 'r'), body...)
}

// sumHex returns the SHA-256 of buf in hex.
func sumHex(buf []byte) string {
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

// canonicalizer walks a JSON text already checked by json.Valid and
// appends its canonical form. It never fails, because its input is valid.
type canonicalizer struct {
	src []byte
	pos int
}

// span locates one object member in an object's scratch buffer: the
// decoded key is scratch[k:v], the canonical value scratch[v:end].
type span struct{ k, v, end int }

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

// value appends the canonical form of the value at c.pos to dst.
func (c *canonicalizer) value(dst []byte) []byte {
	c.skipSpace()
	switch c.src[c.pos] {
	case '{':
		return c.object(dst)
	case '[':
		return c.array(dst)
	case '"':
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
	default: // number, true, false, null: copied as written
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
}

func (c *canonicalizer) object(dst []byte) []byte {
	c.pos++ // '{'
	var scratch []byte
	var members []span
	for {
		c.skipSpace()
		if c.src[c.pos] == '}' {
			c.pos++
			break
		}
		if c.src[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
		var m span
		m.k = len(scratch)
		scratch = c.str(scratch)
		m.v = len(scratch)
		c.skipSpace()
		c.pos++ // ':'
		scratch = c.value(scratch)
		m.end = len(scratch)
		members = append(members, m)
	}
	slices.SortFunc(members, func(a, b span) int {
		if n := bytes.Compare(scratch[a.k:a.v], scratch[b.k:b.v]); n != 0 {
			return n
		}
		return bytes.Compare(scratch[a.v:a.end], scratch[b.v:b.end])
	})
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, scratch[m.k:m.v])
		dst = append(dst, ':')
		dst = append(dst, scratch[m.v:m.end]...)
	}
	return append(dst, '}')
}

func (c *canonicalizer) array(dst []byte) []byte {
	c.pos++ // '['
	dst = append(dst, '[')
	first := true
	for {
		c.skipSpace()
		switch c.src[c.pos] {
		case ']':
			c.pos++
			return append(dst, ']')
		case ',':
			c.pos++
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = c.value(dst)
	}
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
