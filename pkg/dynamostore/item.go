package dynamostore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// encodedResult is a dedupe.Result as Complete writes it.
type encodedResult struct {
	status   int
	headers  []byte // encodeHeaders, empty when there are no headers
	body     []byte // possibly gzip-compressed, empty when there is no body
	encoding string // EncodingGzip or EncodingIdentity
	omitted  bool
	object   *objectRef // the body's S3 object (LargeResults); body is then empty
	item     *itemRef   // the body's own item (see BodyItemKey); body is then empty
}

// encodeResult prepares r for storage: headers in the binary form of
// encodeHeaders, the body gzip-compressed when it is above the threshold
// and compression helps.
//
// The codec is written by hand rather than with attributevalue: attribute
// names are configurable (Options.Attributes), and header values must
// round-trip as raw bytes, which a map[string][]string marshalled to S
// attributes cannot do (S must be valid UTF-8).
func (s *Store) encodeResult(r dedupe.Result) encodedResult {
	out := encodedResult{status: r.StatusCode}
	if len(r.Headers) > 0 {
		out.headers = encodeHeaders(r.Headers)
	}
	out.body, out.encoding = dynamoitem.Compress(r.Body, s.compressAbove)
	return out
}

// headersVersion is the first byte of encoded headers.
const headersVersion = 1

// encodeHeaders encodes h binary-safe, so header values holding any bytes
// (RFC 9110 obs-text, such as a Latin-1 filename) replay exactly:
//
//	version (1) | uvarint count | per name, sorted:
//	    uvarint len, name | uvarint values | per value: uvarint len, value
//
// A nil value list is stored as zero values.
func encodeHeaders(h map[string][]string) []byte {
	names := make([]string, 0, len(h))
	size := 1 + binary.MaxVarintLen64
	for k, vs := range h {
		names = append(names, k)
		size += 2*binary.MaxVarintLen64 + len(k)
		for _, v := range vs {
			size += binary.MaxVarintLen64 + len(v)
		}
	}
	slices.Sort(names)
	buf := make([]byte, 0, size)
	buf = append(buf, headersVersion)
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for _, k := range names {
		buf = binary.AppendUvarint(buf, uint64(len(k)))
		buf = append(buf, k...)
		buf = binary.AppendUvarint(buf, uint64(len(h[k])))
		for _, v := range h[k] {
			buf = binary.AppendUvarint(buf, uint64(len(v)))
			buf = append(buf, v...)
		}
	}
	return buf
}

// errBadHeaders reports encoded headers that do not parse.
var errBadHeaders = errors.New("truncated or unknown header encoding")

// decodeHeaders reverses encodeHeaders.
func decodeHeaders(b []byte) (map[string][]string, error) {
	if len(b) == 0 || b[0] != headersVersion {
		return nil, errBadHeaders
	}
	b = b[1:]
	next := func() (uint64, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, false
		}
		b = b[w:]
		return n, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		v := string(b[:n])
		b = b[n:]
		return v, true
	}
	count, ok := next()
	if !ok || count > uint64(len(b)) {
		return nil, errBadHeaders
	}
	h := make(map[string][]string, count)
	for range count {
		k, ok := str()
		if !ok {
			return nil, errBadHeaders
		}
		nv, ok := next()
		if !ok || nv > uint64(len(b)) {
			return nil, errBadHeaders
		}
		vs := make([]string, 0, nv)
		for range nv {
			v, ok := str()
			if !ok {
				return nil, errBadHeaders
			}
			vs = append(vs, v)
		}
		h[k] = vs
	}
	if len(b) != 0 {
		return nil, errBadHeaders
	}
	return h, nil
}

// completedSize estimates the size of the item Complete would leave, in
// DynamoDB's accounting (internal/dynamoitem, which pkg/memstore applies
// too): attribute name lengths plus value sizes. The fingerprint, which
// Complete does not see, is left to the margin in DefaultMaxItemBytes.
// Complete sizes a result before its body may go to a body item, and
// completeLarge with its body in S3: a result naming a body item is never
// sized.
func (s *Store) completedSize(req dedupe.CompleteRequest, res encodedResult) int {
	a := s.attr
	size := dynamoitem.CompletedSize(dynamoitem.Names{
		PartitionKey: a.PartitionKey, Status: a.Status, Owner: a.Owner, FirstToken: a.FirstToken,
		LeaseExpiresAt: a.LeaseExpiresAt, ExpiresAt: a.ExpiresAt, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt,
		ResStatus: a.ResStatus, ResHeaders: a.ResHeaders, ResBody: a.ResBody, ResEncoding: a.ResEncoding, ResOmitted: a.ResOmitted,
		RequestID: a.RequestID, Trace: a.Trace, Ref: a.Ref,
		SortKey: s.sortKey.Name, SortValue: s.sortKey.Value,
	}, dynamoitem.Completed{
		Key: req.Key, Token: req.Token, RequestID: req.RequestID, Trace: req.Trace, Ref: dedupe.KeyRef(req.Key),
		Headers: res.headers, Body: res.body, Encoding: res.encoding,
	})
	if long := s.longKey(req.Key); long != "" {
		// The sort key holds the key shortened, long_key the key in full.
		size += len(a.LongKey) + len(sortKeyValue(long))
	}
	if res.object != nil {
		size += res.object.attrSize(a.ResObject) + len(a.ResEncoding) + len(res.encoding)
	}
	return size
}

// decode turns a stored item into a Record. A completed record whose body
// is an S3 object (LargeResults) or a body item needs it: decode refuses
// it, and load reads it.
func (s *Store) decode(item map[string]types.AttributeValue) (dedupe.Record, error) {
	return s.decodeItem(item, nil, nil)
}

// load turns a stored item into a Record, reading and verifying the S3
// object that holds its body, if any (LargeResults). op and key name the
// calling operation in errors.
func (s *Store) load(ctx context.Context, op, key string, item map[string]types.AttributeValue) (dedupe.Record, error) {
	return s.decodeItem(item, func(ref objectRef) ([]byte, error) { return s.fetch(ctx, op, key, ref) },
		func(token string, ref itemRef) ([]byte, error) { return s.fetchBody(ctx, op, key, token, ref) })
}

// decodeItem turns a stored item into a Record; fetch reads a body stored
// as an S3 object, and fetchBody one stored in a body item (nil refuses
// one). When either fails, decodeItem
// returns the record without its Result together with fetch's error
// (which wraps dedupe.ErrResultUnreadable or dedupe.ErrResultOmitted, see
// fetch): the record is an answer, and its fingerprint still decides.
func (s *Store) decodeItem(item map[string]types.AttributeValue, fetch func(objectRef) ([]byte, error), fetchBody func(string, itemRef) ([]byte, error)) (dedupe.Record, error) {
	a := s.attr
	d := decoder{item: item}
	rec := dedupe.Record{
		Key:            d.str(a.PartitionKey, true),
		Status:         dedupe.Status(d.str(a.Status, true)),
		Fingerprint:    d.str(a.Fingerprint, false),
		Token:          d.str(a.Owner, true),
		FirstToken:     d.str(a.FirstToken, false),
		LeaseExpiresAt: time.UnixMilli(d.num(a.LeaseExpiresAt)).UTC(),
		ExpiresAt:      time.Unix(d.num(a.ExpiresAt), 0).UTC(),
		CreatedAt:      time.UnixMilli(d.num(a.CreatedAt)).UTC(),
		UpdatedAt:      time.UnixMilli(d.num(a.UpdatedAt)).UTC(),
		RequestID:      d.str(a.RequestID, false),
		Trace:          d.str(a.Trace, false),
	}
	if _, ok := item[a.LongKey]; ok {
		rec.Key = d.str(a.LongKey, true)
	}
	if rec.Status == dedupe.StatusCompleted {
		if d.bool(a.ResOmitted) {
			rec.ResultOmitted = true
		} else {
			r := dedupe.Result{StatusCode: int(d.num(a.ResStatus))}
			r.Headers = d.headers(a.ResHeaders)
			body := d.bin(a.ResBody)
			if v, ok := item[a.ResObject]; ok && d.err == nil {
				ref, err := decodeObjectRef(v)
				switch {
				case err != nil:
					d.fail(a.ResObject, err)
				case fetch == nil:
					d.fail(a.ResObject, errors.New("the body is an S3 object, read without it"))
				default:
					if body, err = fetch(ref); err != nil {
						if d.err != nil {
							return dedupe.Record{}, d.err
						}
						return rec, err
					}
				}
			}
			if v, ok := item[a.ResItem]; ok && d.err == nil {
				ref, err := decodeItemRef(v)
				switch {
				case err != nil:
					d.fail(a.ResItem, err)
				case fetchBody == nil:
					d.fail(a.ResItem, errors.New("the body is in its own item, read without it"))
				default:
					if body, err = fetchBody(rec.Token, ref); err != nil {
						if d.err != nil {
							return dedupe.Record{}, d.err
						}
						return rec, err
					}
				}
			}
			enc := d.str(a.ResEncoding, false)
			if _, split := item[a.ResItem]; split {
				var ok bool
				if enc, ok = strings.CutPrefix(enc, bodyItemEncoding); !ok {
					d.fail(a.ResEncoding, fmt.Errorf("encoding %q of a body item lacks %q", enc, bodyItemEncoding))
				}
			}
			switch enc {
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

// headers reads a result's headers: binary (B, encodeHeaders), or the JSON
// object of string arrays (S) that records written by earlier versions
// hold, so records stored before an upgrade still replay.
func (d *decoder) headers(name string) map[string][]string {
	var h map[string][]string
	var err error
	switch v := d.item[name].(type) {
	case nil:
		return nil
	case *types.AttributeValueMemberB:
		h, err = decodeHeaders(v.Value)
	case *types.AttributeValueMemberS:
		err = json.Unmarshal([]byte(v.Value), &h)
	default:
		err = fmt.Errorf("got %T, want B", v)
	}
	if err != nil {
		d.fail(name, err)
	}
	return h
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
