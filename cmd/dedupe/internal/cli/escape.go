package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Every string the command did not write itself reaches the terminal
// through esc (or escBody): record keys, owner tokens, fingerprints,
// request IDs, trace contexts, bodies, bucket names, the parts of a key
// computed from a saved event, and every error message, since errors
// quote what a store or a server answered. Many of these come from
// clients: a request ID taken from X-Request-Id, a raw path behind
// net/http without a pattern. Printed raw, a client could move the
// operator's cursor, set the terminal's title, write its clipboard (OSC
// 52), clear the screen, fake a line such as "owner: …", or rewrite the
// question the operator answers (a carriage return and an erase-line).
// JSON output (-o json, and forget's log line) goes through escJSON:
// encoding/json and slog escape the C0 controls and replace invalid UTF-8,
// but write DEL, the C1 controls (U+009B is CSI, U+009D is OSC), bidi
// overrides and zero-width characters raw.

// esc returns s as one line of printable text: a printable rune
// (unicode.IsPrint: letters, marks, numbers, punctuation, symbols, the
// ASCII space) stays as it is; a backslash becomes \\; \n, \r and \t are
// written so; every other byte below 0x80 (C0 controls, DEL) and every
// byte of invalid UTF-8 becomes \xNN; every other rune (C1 controls, bidi
// overrides and isolates, zero-width and other format characters,
// separators, non-ASCII spaces, unassigned code points) becomes \uNNNN or
// \UNNNNNNNN. The result is valid UTF-8 without a single control or
// format character, and it reads back unambiguously.
func esc(s string) string { return escape(s, false) }

// escBody is esc for a stored response body printed on its own (show
// --body): it keeps \n and \t as they are, since a body's lines are its
// own, and escapes everything else as esc does.
func escBody(b []byte) string { return escape(string(b), true) }

func escape(s string, keepLines bool) string {
	clean := true
	for _, r := range s {
		if r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case !unicode.IsPrint(r) || r == utf8.RuneError:
			// U+FFFD itself is escaped too, so that it never stands for
			// a byte that was replaced.
			if r > 0xffff {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}

// unesc inverts esc: it returns the string s is the escaped form of, and
// false when s is not one (a backslash that starts no escape esc writes,
// or an escape that decodes to a rune esc would have printed as it is).
// --stored-key reads a key through it, since show prints keys escaped.
func unesc(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", false
		}
		width := 0
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			width = 2
		case 'u':
			width = 4
		case 'U':
			width = 8
		default:
			return "", false
		}
		if width == 0 {
			i += 2
			continue
		}
		if i+2+width > len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+2:i+2+width], 16, 32)
		if err != nil {
			return "", false
		}
		switch {
		case width == 2 && (v < 0x80 && unicode.IsPrint(rune(v)) || v == '\\'):
			return "", false // esc writes it as it is
		case width == 2:
			b.WriteByte(byte(v)) // a control, or a byte of invalid UTF-8
		case !utf8.ValidRune(rune(v)) || v < 0x80 || unicode.IsPrint(rune(v)) && rune(v) != utf8.RuneError:
			return "", false
		default:
			b.WriteRune(rune(v))
		}
		i += 2 + width
	}
	return b.String(), true
}

// escJSON returns the JSON text b with every rune that esc would escape
// and that encoding/json writes raw (DEL, and the non-ASCII runes that
// are not printable or are U+FFFD) written as a \uNNNN escape, a UTF-16
// surrogate pair above U+FFFF. Such runes only ever occur inside JSON
// strings, so the result is the same JSON value, and every decoder reads
// back the same strings; a terminal sees only printable text.
func escJSON(b []byte) []byte {
	clean := true
	for _, r := range string(b) {
		if jsonRaw(r) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for _, r := range string(b) {
		switch {
		case !jsonRaw(r):
			out = utf8.AppendRune(out, r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}

// jsonRaw reports whether r, as encoding/json or slog writes it raw,
// must be escaped for a terminal: DEL, and any non-ASCII rune that is not
// printable, or is U+FFFD (which stands for invalid bytes).
func jsonRaw(r rune) bool {
	return r == 0x7f || r >= utf8.RuneSelf && (r == utf8.RuneError || !unicode.IsPrint(r))
}

// jsonWriter is a writer of complete JSON texts, one per Write (as
// writeJSON and slog's JSON handler write them), that escapes them with
// escJSON.
type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(escJSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// textWriter escapes what it writes as escBody does (newlines and tabs
// kept): the flag package's own messages quote the arguments as typed,
// and an argument is as hostile as a stored string.
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escBody(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
