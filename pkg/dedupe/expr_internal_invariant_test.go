package dedupe

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// TestBase64GzipInflationBound states powertools_base64_gzip's bound: data
// that inflates to at most maxDecodedBytes is decoded whole; one byte
// more is refused, never cut.
func TestBase64GzipInflationBound(t *testing.T) {
	e := mustCompileExpr("powertools_base64_gzip(data)")
	for _, n := range []int{maxDecodedBytes, maxDecodedBytes + 1} {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(bytes.Repeat([]byte("a"), n))
		w.Close()
		ev := map[string]any{"data": base64.StdEncoding.EncodeToString(z.Bytes())}
		got, err := e.Search(ev)
		switch {
		case n <= maxDecodedBytes && (err != nil || len(got.(string)) != n):
			t.Errorf("%d bytes inflated: %v; want them whole", n, err)
		case n > maxDecodedBytes && (err == nil || !strings.Contains(err.Error(), "inflates to more than")):
			t.Errorf("%d bytes inflated: %v; want refused", n, err)
		}
	}
}

// TestComputedKeyNumbersBelow2p53 states the bound of a key computed as
// a number: a whole number of magnitude below 2^53 (every one float64
// holds exactly, and no neighbour rounds to) makes a key; 2^53 itself,
// which 2^53+1 also rounds to, is refused with ErrNoKey, either sign.
func TestComputedKeyNumbersBelow2p53(t *testing.T) {
	event := []byte(`{"half":4503599627370496,"neg":-4503599627370496}`)
	for src, want := range map[string]string{
		"half * `2` - `1`": "=n9007199254740991|",
		"neg * `2` + `1`":  "=n-9007199254740991|",
		"half * `2`":       "",
		"neg * `2`":        "",
	} {
		got, err := mustCompileExpr(src).Key(event)
		switch {
		case want == "" && !errors.Is(err, ErrNoKey):
			t.Errorf("Key(%s) = %q, %v; want ErrNoKey", src, got, err)
		case want != "" && (err != nil || got != want):
			t.Errorf("Key(%s) = %q, %v; want %q", src, got, err, want)
		}
	}
}

// TestKeyErrorNamesWhatWasSelected states that a key expression that
// selects no usable key says what it selected instead (the operator's
// only clue to fix it): a list inside the list, empty or not, is named
// as such.
func TestKeyErrorNamesWhatWasSelected(t *testing.T) {
	event := []byte(`{"empty":[[]],"full":[[1]]}`)
	for src, want := range map[string]string{"empty": "holding an empty list", "full": "holding a list"} {
		_, err := mustCompileExpr(src).Key(event)
		if !errors.Is(err, ErrNoKey) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("Key(%s): %v; want ErrNoKey ending %q", src, err, want)
		}
	}
}

// TestParseDecimalReadsOnlyNumbers states what parseDecimal, which keys
// and compares the event's numbers by their digits, accepts: only what
// strconv.ParseFloat also reads as a number, at the same value. Checked
// on every string of up to five characters drawn from digits, '.', 'e',
// 'E', '-' and '+'. A text that is no number ("", ".", "e5", "-") read
// as zero would make a key of it, and one equal to another number would
// give two numbers one key.
func TestParseDecimalReadsOnlyNumbers(t *testing.T) {
	const alphabet = "019.eE-+"
	accepted := 0
	var walk func(s string)
	walk = func(s string) {
		if _, ok := parseDecimal(s); ok {
			accepted++
			f, err := strconv.ParseFloat(s, 64)
			switch {
			case errors.Is(err, strconv.ErrSyntax):
				t.Errorf("parseDecimal(%q) accepted what ParseFloat refuses: %v", s, err)
			case err == nil && !sameDecimal(s, strconv.FormatFloat(f, 'g', -1, 64)):
				t.Errorf("parseDecimal(%q) differs from ParseFloat's %g", s, f)
			}
		}
		if len(s) == 5 {
			return
		}
		for _, c := range alphabet {
			walk(s + string(c))
		}
	}
	walk("")
	if accepted < 1000 {
		t.Fatalf("parseDecimal accepted only %d strings; the walk is broken", accepted)
	}
}

// TestParseDecimalExponentBound states maxDecimalExp: an exponent of at
// most maxDecimalExp in magnitude is read, either sign (zero, "0e1048576",
// is zero); one beyond it is refused, never read as another number.
func TestParseDecimalExponentBound(t *testing.T) {
	for _, tt := range []struct {
		exp int
		ok  bool
	}{{maxDecimalExp, true}, {-maxDecimalExp, true}, {maxDecimalExp + 1, false}, {-maxDecimalExp - 1, false}} {
		for _, mant := range []string{"0", "1"} {
			s := mant + "e" + strconv.Itoa(tt.exp)
			if _, ok := parseDecimal(s); ok != tt.ok {
				t.Errorf("parseDecimal(%q) ok = %v, want %v", s, ok, tt.ok)
			}
		}
	}
	if got, ok := wholeDecimal("0e" + strconv.Itoa(maxDecimalExp)); !ok || got != "0" {
		t.Errorf("wholeDecimal(0e%d) = %q, %v; want 0", maxDecimalExp, got, ok)
	}
}
