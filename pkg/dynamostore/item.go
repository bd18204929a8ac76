package dynamostore

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// encodedResult is a dedupe.Result as Complete writes it.
type encodedResult struct {
	status   int
	headers  string // JSON, empty when there are no headers
	body     []byte // possibly gzip-compressed, empty when there is no body
	encoding string // EncodingGzip or EncodingIdentity
	omitted  bool
}

// encodeResult prepares r for storage: headers as JSON, the body
// gzip-compressed when it is above the threshold and compression helps.
func (s *Store) encodeResult(r dedupe.Result) (encodedResult, error) {
	out := encodedResult{status: r.StatusCode, body: r.Body, encoding: EncodingIdentity}
	if len(r.Headers) > 0 {
		h, err := json.Marshal(r.Headers)
		if err != nil {
			return encodedResult{}, fmt.Errorf("encode headers: %w", err)
		}
		out.headers = string(h)
	}
	if s.compressAbove >= 0 && len(r.Body) > s.compressAbove {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(r.Body); err != nil {
			return encodedResult{}, fmt.Errorf("compress body: %w", err)
		}
		if err := zw.Close(); err != nil {
			return encodedResult{}, fmt.Errorf("compress body: %w", err)
		}
		if buf.Len() < len(r.Body) {
			out.body = buf.Bytes()
			out.encoding = EncodingGzip
		}
	}
	return out, nil
}

// maxNumberSize is the most a number attribute value can take in
// DynamoDB's size accounting (38 significant digits).
const maxNumberSize = 21

// completedSize estimates the size of the item Complete would leave, in
// DynamoDB's accounting: attribute name lengths plus value sizes. The
// fingerprint, which Complete does not see, is left to the margin in
// DefaultMaxItemBytes.
func (s *Store) completedSize(req dedupe.CompleteRequest, res encodedResult) int {
	a := s.attr
	size := len(a.PartitionKey) + len(req.Key) +
		len(a.Status) + len(dedupe.StatusInProgress) +
		len(a.Owner) + len(req.Token) +
		len(a.ResOmitted) + 1
	if s.sortKey.Name != "" {
		size += len(s.sortKey.Name) + len(s.sortKey.Value)
	}
	for _, n := range []string{a.LeaseExpiresAt, a.ExpiresAt, a.CreatedAt, a.UpdatedAt, a.ResStatus} {
		size += len(n) + maxNumberSize
	}
	if res.headers != "" {
		size += len(a.ResHeaders) + len(res.headers)
	}
	if len(res.body) > 0 {
		size += len(a.ResBody) + len(res.body) + len(a.ResEncoding) + len(res.encoding)
	}
	return size
}

// decode turns a stored item into a Record.
func (s *Store) decode(item map[string]types.AttributeValue) (dedupe.Record, error) {
	a := s.attr
	d := decoder{item: item}
	rec := dedupe.Record{
		Key:            d.str(a.PartitionKey, true),
		Status:         dedupe.Status(d.str(a.Status, true)),
		Fingerprint:    d.str(a.Fingerprint, false),
		Token:          d.str(a.Owner, true),
		LeaseExpiresAt: time.UnixMilli(d.num(a.LeaseExpiresAt)).UTC(),
		ExpiresAt:      time.Unix(d.num(a.ExpiresAt), 0).UTC(),
		CreatedAt:      time.UnixMilli(d.num(a.CreatedAt)).UTC(),
		UpdatedAt:      time.UnixMilli(d.num(a.UpdatedAt)).UTC(),
	}
	if rec.Status == dedupe.StatusCompleted {
		if d.bool(a.ResOmitted) {
			rec.ResultOmitted = true
		} else {
			r := dedupe.Result{StatusCode: int(d.num(a.ResStatus))}
			if h := d.str(a.ResHeaders, false); h != "" && d.err == nil {
				if err := json.Unmarshal([]byte(h), &r.Headers); err != nil {
					d.fail(a.ResHeaders, err)
				}
			}
			body := d.bin(a.ResBody)
			switch enc := d.str(a.ResEncoding, false); enc {
			case EncodingGzip:
				if d.err == nil {
					var err error
					if body, err = gunzip(body); err != nil {
						d.fail(a.ResBody, err)
					}
				}
			case "", EncodingIdentity:
			default:
				d.fail(a.ResEncoding, fmt.Errorf("unknown encoding %q", enc))
			}
			r.Body = body
			rec.Result = &r
		}
	}
	if d.err != nil {
		return dedupe.Record{}, d.err
	}
	return rec, nil
}

// decoder reads typed attributes from an item, keeping the first error.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *decoder) fail(name string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: attribute %q: %v", ErrMalformedItem, name, err)
	}
}

func (d *decoder) str(name string, required bool) string {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case nil:
		if required {
			d.fail(name, fmt.Errorf("missing"))
		}
	default:
		d.fail(name, fmt.Errorf("got %T, want S", v))
	}
	return ""
}

func (d *decoder) num(name string) int64 {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(name, err)
		}
		return n
	case nil:
	default:
		d.fail(name, fmt.Errorf("got %T, want N", v))
	}
	return 0
}

func (d *decoder) bin(name string) []byte {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberB:
		return v.Value
	case nil:
	default:
		d.fail(name, fmt.Errorf("got %T, want B", v))
	}
	return nil
}

func (d *decoder) bool(name string) bool {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberBOOL:
		return v.Value
	case nil:
	default:
		d.fail(name, fmt.Errorf("got %T, want BOOL", v))
	}
	return false
}

// gunzip decompresses a gzip body.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	return io.ReadAll(zr)
}
