package doccheck

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// hclBlock is a block of the HCL subset the docs' Terraform uses:
// arguments whose values are strings, numbers, booleans or lists of
// strings, and nested blocks. Labels are the block's quoted labels.
type hclBlock struct {
	Type   string
	Labels []string
	Args   map[string]any // string, float64, bool or []string
	Blocks []hclBlock
}

// parseHCL parses src into its top-level blocks. Anything outside the
// subset (expressions, references, heredocs) is an error, so that a
// snippet this cannot read fails loudly rather than passing unread.
func parseHCL(src string) ([]hclBlock, error) {
	p := &hclParser{toks: nil}
	if err := p.lex(src); err != nil {
		return nil, err
	}
	var out []hclBlock
	for !p.done() {
		b, err := p.block()
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

type hclToken struct {
	kind string // "ident", "string", "number", "punct"
	text string
	line int
}

type hclParser struct {
	toks []hclToken
	pos  int
}

func (p *hclParser) lex(src string) error {
	line := 1
	for i := 0; i < len(src); {
		c := rune(src[i])
		switch {
		case c == '\n':
			line++
			i++
		case unicode.IsSpace(c):
			i++
		case c == '#' || strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"':
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' || src[j] == '\n' || strings.HasPrefix(src[j:], "${") {
					return fmt.Errorf("line %d: only plain strings are read", line)
				}
				j++
			}
			if j == len(src) {
				return fmt.Errorf("line %d: unterminated string", line)
			}
			p.toks = append(p.toks, hclToken{"string", src[i+1 : j], line})
			i = j + 1
		case strings.ContainsRune("{}[]=,", c):
			p.toks = append(p.toks, hclToken{"punct", string(c), line})
			i++
		case unicode.IsLetter(c) || c == '_':
			j := i
			for j < len(src) && (unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j])) || src[j] == '_' || src[j] == '-') {
				j++
			}
			p.toks = append(p.toks, hclToken{"ident", src[i:j], line})
			i = j
		case unicode.IsDigit(c):
			j := i
			for j < len(src) && (unicode.IsDigit(rune(src[j])) || src[j] == '.') {
				j++
			}
			p.toks = append(p.toks, hclToken{"number", src[i:j], line})
			i = j
		default:
			return fmt.Errorf("line %d: unexpected %q", line, c)
		}
	}
	return nil
}

func (p *hclParser) done() bool { return p.pos >= len(p.toks) }

func (p *hclParser) next() (hclToken, error) {
	if p.done() {
		return hclToken{}, fmt.Errorf("unexpected end")
	}
	t := p.toks[p.pos]
	p.pos++
	return t, nil
}

func (p *hclParser) expect(kind, text string) error {
	t, err := p.next()
	if err != nil {
		return err
	}
	if t.kind != kind || (text != "" && t.text != text) {
		return fmt.Errorf("line %d: got %q, want %s %q", t.line, t.text, kind, text)
	}
	return nil
}

// block parses `type "label"... { body }`.
func (p *hclParser) block() (hclBlock, error) {
	t, err := p.next()
	if err != nil {
		return hclBlock{}, err
	}
	if t.kind != "ident" {
		return hclBlock{}, fmt.Errorf("line %d: got %q, want a block type", t.line, t.text)
	}
	b := hclBlock{Type: t.text, Args: map[string]any{}}
	for !p.done() && p.toks[p.pos].kind == "string" {
		b.Labels = append(b.Labels, p.toks[p.pos].text)
		p.pos++
	}
	if err := p.expect("punct", "{"); err != nil {
		return b, err
	}
	return b, p.body(&b)
}

// body parses arguments and blocks up to the closing brace.
func (p *hclParser) body(b *hclBlock) error {
	for {
		if p.done() {
			return fmt.Errorf("block %s: unterminated", b.Type)
		}
		t := p.toks[p.pos]
		if t.kind == "punct" && t.text == "}" {
			p.pos++
			return nil
		}
		if t.kind != "ident" {
			return fmt.Errorf("line %d: got %q, want an argument or a block", t.line, t.text)
		}
		if p.pos+1 < len(p.toks) && p.toks[p.pos+1].text == "=" {
			p.pos += 2
			v, err := p.value()
			if err != nil {
				return err
			}
			if _, dup := b.Args[t.text]; dup {
				return fmt.Errorf("line %d: argument %s twice", t.line, t.text)
			}
			b.Args[t.text] = v
			continue
		}
		nb, err := p.block()
		if err != nil {
			return err
		}
		b.Blocks = append(b.Blocks, nb)
	}
}

// value parses a string, number, boolean or list of strings.
func (p *hclParser) value() (any, error) {
	t, err := p.next()
	if err != nil {
		return nil, err
	}
	switch {
	case t.kind == "string":
		return t.text, nil
	case t.kind == "number":
		return strconv.ParseFloat(t.text, 64)
	case t.kind == "ident" && (t.text == "true" || t.text == "false"):
		return t.text == "true", nil
	case t.kind == "punct" && t.text == "[":
		list := []string{}
		for {
			t, err := p.next()
			if err != nil {
				return nil, err
			}
			switch {
			case t.kind == "punct" && t.text == "]":
				return list, nil
			case t.kind == "punct" && t.text == ",":
			case t.kind == "string":
				list = append(list, t.text)
			default:
				return nil, fmt.Errorf("line %d: only lists of strings are read, got %q", t.line, t.text)
			}
		}
	}
	return nil, fmt.Errorf("line %d: only strings, numbers, booleans and lists of strings are read, got %q", t.line, t.text)
}

func TestParseHCL(t *testing.T) {
	got, err := parseHCL(`resource "a" "b" { # a comment
  n = "x"
  ok = true
  l = ["p", "q"]
  sub {
    k = 1
  }
}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Type != "resource" || strings.Join(got[0].Labels, ",") != "a,b" || got[0].Args["n"] != "x" ||
		got[0].Args["ok"] != true || len(got[0].Blocks) != 1 || got[0].Blocks[0].Args["k"] != 1.0 {
		t.Errorf("got %+v", got)
	}
	for _, bad := range []string{`a { x = var.y }`, `a { x = "${y}" }`, `a { x = "y" x = "z" }`, `a {`} {
		if _, err := parseHCL(bad); err == nil {
			t.Errorf("parseHCL(%q) = nil error, want one", bad)
		}
	}
}
