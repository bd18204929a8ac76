package headerenc

import (
	"errors"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    map[string][]string
	}{
		{"one", map[string][]string{"Content-Type": {"application/json"}}},
		{"multi", map[string][]string{"X-Multi": {"a", "b", ""}, "Set-Cookie": {"a=1", "b=2"}}},
		{"latin-1 value", map[string][]string{"Content-Disposition": {"attachment; filename=\"caf\xe9.txt\""}}},
		{"any bytes", map[string][]string{"X-Raw": {"\x00\xff\x80\n\r", string(make([]byte, 300))}}},
		{"no values", map[string][]string{"X-Empty": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(Encode(tt.h))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.h) {
				t.Errorf("got %q, want %q", got, tt.h)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	if b := Encode(nil); b != nil {
		t.Errorf("Encode(nil) = %q, want nil", b)
	}
	if h, err := Decode(nil); h != nil || err != nil {
		t.Errorf("Decode(nil) = %v, %v; want nil, nil", h, err)
	}
}

func TestMalformed(t *testing.T) {
	good := Encode(map[string][]string{"A": {"b"}})
	tests := []struct {
		name string
		b    []byte
	}{
		{"version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"huge count", []byte{1, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"huge length", []byte{1, 1, 0xff, 0xff, 0x03}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.b); !errors.Is(err, ErrMalformed) {
				t.Errorf("got %v, want ErrMalformed", err)
			}
		})
	}
}
