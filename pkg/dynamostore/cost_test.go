package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func TestItemSize(t *testing.T) {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	tests := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"empty", nil, 0},
		{"string", map[string]types.AttributeValue{"pk": s("abc")}, 2 + 3},
		{"utf-8 string", map[string]types.AttributeValue{"k": s("é")}, 1 + 2},
		{"binary", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: make([]byte, 10)}}, 1 + 10},
		{"number, 3 digits", map[string]types.AttributeValue{"n": n("123")}, 1 + 3},
		{"number, 13 digits (epoch ms)", map[string]types.AttributeValue{"n": n("1764590400123")}, 1 + 8},
		{"number, zeros trimmed", map[string]types.AttributeValue{"n": n("1000")}, 1 + 2},
		{"number, decimal", map[string]types.AttributeValue{"n": n("-0.0012")}, 1 + 2},
		{"bool and null", map[string]types.AttributeValue{"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 2 + 2},
		{"map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"a": s("xy")}}}, 1 + 3 + (1 + 2 + 1)},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("x"), s("yz")}}}, 1 + 3 + (1 + 1) + (2 + 1)},
		{"empty map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{}}, 1 + 3},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dynamostore.ItemSize(tt.item); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	tests := []struct {
		size, write, read int
	}{
		{0, 1, 1}, {1, 1, 1}, {1024, 1, 1}, {1025, 2, 1}, {4096, 4, 1}, {4097, 5, 2}, {400 << 10, 400, 100},
	}
	for _, tt := range tests {
		if w, r := dynamostore.WriteUnits(tt.size), dynamostore.ReadUnits(tt.size); w != tt.write || r != tt.read {
			t.Errorf("%d bytes: got %d write, %d read units; want %d, %d", tt.size, w, r, tt.write, tt.read)
		}
	}
}
