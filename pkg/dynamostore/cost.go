package dynamostore

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Capacity sizes of DynamoDB's billing (provisioned capacity units and
// on-demand request units alike).
const (
	// WriteUnitBytes is the item size one write unit covers.
	WriteUnitBytes = 1 << 10
	// ReadUnitBytes is the item size one strongly consistent read unit
	// covers.
	ReadUnitBytes = 4 << 10
)

// ItemSize returns the size of item by DynamoDB's documented rules: the
// sum, over its attributes, of the attribute name's UTF-8 length and the
// value's size, where a string is its UTF-8 length, a binary its raw
// length, a number 1 byte per two significant digits plus 1, a Boolean
// or null 1 byte, a list or map 3 bytes plus its elements' sizes plus 1
// byte per element, and a set the sum of its members' sizes.
func ItemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is the size of one attribute value, without its name.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	}
	return 0
}

// numberSize is the documented size of a number: 1 byte per two
// significant digits (leading and trailing zeros trimmed), plus 1.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	digits := strings.Replace(s, ".", "", 1)
	digits = strings.TrimLeft(digits, "0")
	digits = strings.TrimRight(digits, "0")
	return (len(digits)+1)/2 + 1
}

// WriteUnits returns the write units of writing an item of size bytes:
// its size rounded up to the next WriteUnitBytes, at least 1.
func WriteUnits(size int) int {
	return max(1, (size+WriteUnitBytes-1)/WriteUnitBytes)
}

// ReadUnits returns the read units of a strongly consistent read of an
// item of size bytes: its size rounded up to the next ReadUnitBytes, at
// least 1 (a read of an absent item costs one too).
func ReadUnits(size int) int {
	return max(1, (size+ReadUnitBytes-1)/ReadUnitBytes)
}
