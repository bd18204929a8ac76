package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestEscapeEveryRune holds esc to its doc for every non-ASCII code point:
// a printable rune stays as it is, and every other one (and U+FFFD) is
// written as Go's strconv.QuoteToASCII writes it, \uNNNN in the Basic
// Multilingual Plane and \UNNNNNNNN above it, so that an operator reads
// the same escapes as in Go's own output.
func TestEscapeEveryRune(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue // surrogates are no runes of a UTF-8 string
		}
		s := string(r)
		want := s
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			want = strings.Trim(strconv.QuoteToASCII(s), `"`)
		}
		if got := esc(s); got != want {
			t.Fatalf("esc(U+%04X) = %q, want %q", r, got, want)
		}
	}
}

// TestEscJSONEveryRune: for every code point from DEL up, escJSON of a
// JSON string holding it is the same JSON value, and holds nothing a
// terminal would act on: only printable runes other than U+FFFD.
func TestEscJSONEveryRune(t *testing.T) {
	for r := rune(0x7f); r <= unicode.MaxRune; r++ {
		if r >= 0xd800 && r <= 0xdfff {
			continue
		}
		in := []byte(`{"k":"` + string(r) + `"}`)
		out := escJSON(in)
		for _, o := range string(out) {
			if !unicode.IsPrint(o) || o == utf8.RuneError {
				t.Fatalf("escJSON(U+%04X) = %q writes U+%04X raw", r, out, o)
			}
		}
		var v struct{ K string }
		if err := json.Unmarshal(out, &v); err != nil || v.K != string(r) {
			t.Fatalf("escJSON(U+%04X) = %q reads back as %q (%v)", r, out, v.K, err)
		}
	}
}

// TestEscapingWritersKeepTheWriterContract: jsonWriter and textWriter
// report all of p written when the terminal took it, and the terminal's
// error, with nothing written, when it did not: what fmt and slog rely
// on to tell a broken pipe.
func TestEscapingWritersKeepTheWriterContract(t *testing.T) {
	broken := errors.New("broken pipe")
	p := []byte("{\"k\":\"a\u009bb\"}\n")
	for name, mk := range map[string]func(w io.Writer) io.Writer{
		"jsonWriter": func(w io.Writer) io.Writer { return jsonWriter{w} },
		"textWriter": func(w io.Writer) io.Writer { return textWriter{w} },
	} {
		var buf bytes.Buffer
		if n, err := mk(&buf).Write(p); n != len(p) || err != nil {
			t.Errorf("%s.Write on a working writer = %d, %v; want %d, nil", name, n, err, len(p))
		}
		if bytes.Contains(buf.Bytes(), []byte("\u009b")) {
			t.Errorf("%s wrote U+009B (CSI) raw: %q", name, buf.Bytes())
		}
		if n, err := mk(failingWriter{broken}).Write(p); n != 0 || !errors.Is(err, broken) {
			t.Errorf("%s.Write on a broken writer = %d, %v; want 0, %v", name, n, err, broken)
		}
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }
