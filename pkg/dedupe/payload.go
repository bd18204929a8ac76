package dedupe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// JSONFields returns the canonical JSON (see CanonicalJSON) of an object
// holding only the named fields of the JSON object in data, for
// fingerprinting the part of a payload that identifies a request, as
// Powertools' payload_validation_jmespath does. A path names a member of
// the top-level object, or of nested objects with dots ("order.id"). A
// path data does not hold is left out, so a payload without it and one
// with it fingerprint differently. Numbers keep their text.
//
// It returns an error when data is not a JSON object. Use it in
// SQSConfig.Fingerprint, HTTPConfig.Fingerprint or as Once's
// payload:
//
//	Fingerprint: func(m events.SQSMessage) ([]byte, error) {
//		return dedupe.JSONFields([]byte(m.Body), "userId", "order.id", "amount")
//	},
func JSONFields(data []byte, paths ...string) ([]byte, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, p := range paths {
		if v, ok := lookupPath(obj, p); ok {
			setPath(out, p, v)
		}
	}
	return encodeCanonical(out)
}

// WithoutJSONFields returns the canonical JSON of the object in data with
// the named fields removed (paths as in JSONFields), for payloads that
// carry values that change on every send, such as a timestamp or a trace
// ID. It returns an error when data is not a JSON object.
func WithoutJSONFields(data []byte, paths ...string) ([]byte, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	for _, p := range paths {
		deletePath(obj, p)
	}
	return encodeCanonical(obj)
}

// decodeObject decodes a JSON object, keeping numbers as written. It
// refuses what decodeJSON refuses: text that is not UTF-8, and a lone
// surrogate's escape, which encoding/json would make U+FFFD.
func decodeObject(data []byte) (map[string]any, error) {
	if !utf8.Valid(data) || loneSurrogate(data) {
		return nil, fmt.Errorf("select JSON fields: payload is not UTF-8 or escapes a lone surrogate: %w", errNotJSON)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var obj map[string]any
	if err := d.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("select JSON fields: payload is not a JSON object: %w", errNotJSON)
	}
	if d.More() {
		return nil, fmt.Errorf("select JSON fields: data after the object: %w", errNotJSON)
	}
	return obj, nil
}

// encodeCanonical encodes v and returns its canonical form.
func encodeCanonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("select JSON fields: %w", err)
	}
	return CanonicalJSON(b)
}

func lookupPath(obj map[string]any, path string) (any, bool) {
	head, rest, nested := strings.Cut(path, ".")
	v, ok := obj[head]
	if !ok || !nested {
		return v, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return lookupPath(sub, rest)
}

func setPath(obj map[string]any, path string, v any) {
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		obj[head] = v
		return
	}
	sub, ok := obj[head].(map[string]any)
	if !ok {
		sub = map[string]any{}
		obj[head] = sub
	}
	setPath(sub, rest, v)
}

func deletePath(obj map[string]any, path string) {
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		delete(obj, head)
		return
	}
	if sub, ok := obj[head].(map[string]any); ok {
		deletePath(sub, rest)
	}
}
