package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lambda-dedupe/dedupe/internal/headerenc"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// The fields of a record's hash. Redis strings are binary-safe, so header
// values and bodies are stored as they are, byte for byte.
//
//	field  meaning
//	st     IN_PROGRESS or COMPLETED
//	fp     request fingerprint
//	tok    owner token of the current claim (fencing)
//	lease  lease end, epoch ms
//	exp    record expiry, epoch s
//	cat    claim time, epoch ms
//	uat    last write, epoch ms
//	rs     result status code (COMPLETED only)
//	rh     result headers, internal/headerenc (absent when none)
//	rb     result body (absent when empty)
//	ro     "1": COMPLETED without its result (ResultOmitted)
//	rid    request ID of the execution (absent when none)
//	tc     trace context of the execution (absent when none)
//	ft     first token: the token of the claim that started the record's
//	       life (dedupe.Record.FirstToken); absent on hashes written
//	       before it existed

// pairs turns a flat HGETALL reply into a map.
func pairs(flat []any) (map[string]string, error) {
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("%w: odd HGETALL reply", ErrMalformedRecord)
	}
	m := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, ok1 := flat[i].(string)
		v, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: HGETALL reply holds %T, %T", ErrMalformedRecord, flat[i], flat[i+1])
		}
		m[k] = v
	}
	return m, nil
}

// decode turns the hash of key into a Record. The Record shares no
// memory with f beyond immutable strings.
func decode(key string, f map[string]string) (dedupe.Record, error) {
	d := decoder{f: f}
	rec := dedupe.Record{
		Key:            key,
		Status:         dedupe.Status(d.str("st")),
		Fingerprint:    f["fp"],
		Token:          d.str("tok"),
		FirstToken:     f["ft"],
		LeaseExpiresAt: time.UnixMilli(d.num("lease")).UTC(),
		ExpiresAt:      time.Unix(d.num("exp"), 0).UTC(),
		CreatedAt:      time.UnixMilli(d.num("cat")).UTC(),
		UpdatedAt:      time.UnixMilli(d.num("uat")).UTC(),
		RequestID:      f["rid"],
		Trace:          f["tc"],
	}
	switch rec.Status {
	case dedupe.StatusInProgress:
	case dedupe.StatusCompleted:
		if f["ro"] == "1" {
			rec.ResultOmitted = true
			break
		}
		r := dedupe.Result{StatusCode: int(d.num("rs"))}
		if b, ok := f["rb"]; ok {
			r.Body = []byte(b)
		}
		if h := f["rh"]; h != "" {
			var err error
			if r.Headers, err = headerenc.Decode([]byte(h)); err != nil {
				d.fail("rh", err)
			}
		}
		rec.Result = &r
	default:
		d.fail("st", fmt.Errorf("unknown status %q", rec.Status))
	}
	if d.err != nil {
		return dedupe.Record{}, d.err
	}
	return rec, nil
}

// decoder reads required fields from a hash, keeping the first error.
type decoder struct {
	f   map[string]string
	err error
}

func (d *decoder) fail(field string, err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: field %s: %v", ErrMalformedRecord, field, err)
	}
}

func (d *decoder) str(field string) string {
	v, ok := d.f[field]
	if !ok {
		d.fail(field, fmt.Errorf("missing"))
	}
	return v
}

func (d *decoder) num(field string) int64 {
	v, ok := d.f[field]
	if !ok {
		d.fail(field, fmt.Errorf("missing"))
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		d.fail(field, err)
	}
	return n
}
