// Package dynamoitem provides DynamoDB's size rule for the completed
// records of pkg/dynamostore: which bodies are stored gzip-compressed and
// how large the item is in DynamoDB's accounting. pkg/dynamostore decides
// with it which results to omit, and pkg/memstore applies the same rule
// with the default attribute names, so code tested on memstore omits
// exactly the results production omits. It imports no AWS SDK.
package dynamoitem

import (
	"bytes"
	"compress/gzip"
)

// Defaults of pkg/dynamostore's Options.
const (
	// CompressAbove is the body size, in bytes, above which a body is
	// stored gzip-compressed when that makes it smaller.
	CompressAbove = 4 << 10

	// MaxItemBytes bounds the estimated size of a completed item:
	// DynamoDB's 400 KB item limit (409,600 bytes) minus a 2 KiB margin
	// for what Complete does not see (the fingerprint) and for rounding
	// in the estimate.
	MaxItemBytes = 400<<10 - 2<<10
)

// Body encodings, stored beside a body.
const (
	// EncodingIdentity marks a body stored as is.
	EncodingIdentity = "identity"
	// EncodingGzip marks a body stored gzip-compressed.
	EncodingGzip = "gzip"
)

// MaxNumberSize is the most a number attribute value can take in
// DynamoDB's size accounting (38 significant digits).
const MaxNumberSize = 21

// Names are the attribute names that count toward an item's size.
type Names struct {
	PartitionKey, Status, Owner, FirstToken                 string
	LeaseExpiresAt, ExpiresAt, CreatedAt, UpdatedAt         string
	ResStatus, ResHeaders, ResBody, ResEncoding, ResOmitted string
	// RequestID, Trace and Ref name the provenance attributes and the
	// key's dedupe.KeyRef (the ref index's key).
	RequestID, Trace, Ref string
	// SortKey and SortValue are the fixed sort key of a single-table
	// design; empty SortKey means none.
	SortKey, SortValue string
}

// DefaultNames returns the names of pkg/dynamostore's DefaultAttributes,
// without a sort key.
func DefaultNames() Names {
	return Names{
		PartitionKey: "pk", Status: "status", Owner: "owner", FirstToken: "first_token",
		LeaseExpiresAt: "lease_expires_at", ExpiresAt: "expires_at", CreatedAt: "created_at", UpdatedAt: "updated_at",
		ResStatus: "res_status", ResHeaders: "res_headers", ResBody: "res_body", ResEncoding: "res_encoding", ResOmitted: "res_omitted",
		RequestID: "request_id", Trace: "trace", Ref: "ref",
	}
}

// Compress returns body as it is stored: gzip-compressed (encoding
// EncodingGzip) when above is not negative, body is longer than above and
// compression makes it smaller; else body itself (EncodingIdentity).
func Compress(body []byte, above int) ([]byte, string) {
	if above < 0 || len(body) <= above {
		return body, EncodingIdentity
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	// Writes to a bytes.Buffer cannot fail.
	zw.Write(body)
	zw.Close()
	if buf.Len() < len(body) {
		return buf.Bytes(), EncodingGzip
	}
	return body, EncodingIdentity
}

// Completed is what a completed item holds beyond its fixed attributes.
type Completed struct {
	// Key is the stored key, Token the owner token (the first token is
	// counted as long as it).
	Key, Token string
	// RequestID and Trace are the execution's provenance; Ref is the
	// key's dedupe.KeyRef. Empty ones are not stored.
	RequestID, Trace, Ref string
	// Headers and Body are the stored result, Body as Compress returned
	// it with its Encoding.
	Headers, Body []byte
	Encoding      string
}

// CompletedSize estimates the size of a completed item, in DynamoDB's
// accounting (attribute name lengths plus value sizes): key, status,
// owner token, first token (counted as long as the owner's), the number
// attributes at their largest, res_omitted, the provenance and ref when
// not empty, and the stored headers and body (with its encoding) when not
// empty. The fingerprint is left to the margin in MaxItemBytes.
func CompletedSize(n Names, c Completed) int {
	size := len(n.PartitionKey) + len(c.Key) +
		len(n.Status) + len("IN_PROGRESS") +
		len(n.Owner) + len(c.Token) +
		len(n.FirstToken) + len(c.Token) +
		len(n.ResOmitted) + 1
	if n.SortKey != "" {
		size += len(n.SortKey) + len(n.SortValue)
	}
	for _, name := range []string{n.LeaseExpiresAt, n.ExpiresAt, n.CreatedAt, n.UpdatedAt, n.ResStatus} {
		size += len(name) + MaxNumberSize
	}
	for _, a := range [][2]string{{n.RequestID, c.RequestID}, {n.Trace, c.Trace}, {n.Ref, c.Ref}} {
		if a[1] != "" {
			size += len(a[0]) + len(a[1])
		}
	}
	if len(c.Headers) > 0 {
		size += len(n.ResHeaders) + len(c.Headers)
	}
	if len(c.Body) > 0 {
		size += len(n.ResBody) + len(c.Body) + len(n.ResEncoding) + len(c.Encoding)
	}
	return size
}
