package dynamostore

import "github.com/lambda-dedupe/dedupe/internal/dynamoitem"

// Defaults applied by New for zero fields of Options. They match the
// deployed schema in template.yaml; infra tests cross-check them.
const (
	// DefaultIndex is the name of the sparse global secondary index that
	// holds in-flight records only (partition key Attributes.InflightShard,
	// sort key Attributes.LeaseExpiresAt).
	DefaultIndex = "inflight"

	// DefaultRefIndex is the name of the KEYS_ONLY global secondary index
	// on Attributes.Ref through which FindRef finds a record from its
	// dedupe.KeyRef on a classic table (ClassicTableInput).
	DefaultRefIndex = "ref"

	// DefaultShards is the number of inflight_shard values a key hashes to.
	DefaultShards = 8

	// DefaultCompressAbove is the body size, in bytes, above which a result
	// body is stored gzip-compressed.
	DefaultCompressAbove = dynamoitem.CompressAbove

	// DefaultMaxItemBytes bounds the estimated size of a completed item:
	// DynamoDB's 400 KB item limit (409,600 bytes) minus a 2 KiB margin for
	// what Complete does not see (the fingerprint) and for rounding in the
	// estimate.
	DefaultMaxItemBytes = dynamoitem.MaxItemBytes
)

// Encodings stored in the Attributes.ResEncoding attribute.
const (
	// EncodingIdentity marks a body stored as is.
	EncodingIdentity = dynamoitem.EncodingIdentity
	// EncodingGzip marks a body stored gzip-compressed.
	EncodingGzip = dynamoitem.EncodingGzip
)

// Attributes names the item attributes the store reads and writes. A zero
// field means the name from DefaultAttributes.
type Attributes struct {
	// PartitionKey holds the full key (S): the partition key of a classic
	// table, the sort key of one keyed by reference (see KeySchema).
	// Default "pk".
	PartitionKey string
	// Status holds IN_PROGRESS or COMPLETED (S). Default "status".
	Status string
	// Fingerprint holds the request fingerprint (S). Default "fingerprint".
	Fingerprint string
	// Owner holds the owner token (S). Default "owner".
	Owner string
	// LeaseExpiresAt holds the lease end in epoch milliseconds (N), and is
	// the sort key of the in-flight index. Default "lease_expires_at".
	LeaseExpiresAt string
	// ExpiresAt holds the record's expiry in epoch seconds (N), the TTL
	// attribute. Default "expires_at".
	ExpiresAt string
	// CreatedAt holds the claim time in epoch milliseconds (N).
	// Default "created_at".
	CreatedAt string
	// UpdatedAt holds the last write in epoch milliseconds (N).
	// Default "updated_at".
	UpdatedAt string
	// ResStatus holds the result's status code (N). Default "res_status".
	ResStatus string
	// ResHeaders holds the result's headers, binary-safe (B: a version
	// byte, then length-prefixed names and values); absent when there are
	// none. Records written by versions before 2026-12 hold a JSON object
	// of string arrays (S) instead, which is still read. Default
	// "res_headers".
	ResHeaders string
	// ResBody holds the result body (B); absent when it is empty.
	// Default "res_body".
	ResBody string
	// ResEncoding holds EncodingGzip or EncodingIdentity (S).
	// Default "res_encoding".
	ResEncoding string
	// ResOmitted is true on a COMPLETED record whose result did not fit
	// (BOOL). Default "res_omitted".
	ResOmitted string
	// FirstToken holds the token of the claim that started the record's
	// life (S, dedupe.Record.FirstToken); absent on records written before
	// it existed. Default "first_token".
	FirstToken string
	// ResObject holds, instead of ResBody, where a result body too large
	// for the item is stored in S3 (Options.LargeResults): a map (M) of
	// bucket (S), key (S), size (N) and sha256 (B). Default "res_object".
	ResObject string
	// ResItem holds, instead of ResBody, the size (N) and sha256 (B), in a
	// map (M), of a result body stored in an item of its own because it
	// would have pushed the record past one write unit (see BodyItemKey).
	// Default "res_item".
	ResItem string
	// InflightShard holds hash(key) mod Shards (N) while the record is
	// IN_PROGRESS, and is the partition key of the in-flight index.
	// Default "inflight_shard".
	InflightShard string
	// Ref holds dedupe.KeyRef of the key (S), written at every claim: the
	// partition key of a table keyed by reference, and on a classic table
	// that of the KEYS_ONLY ref index (Options.RefIndex), through which an
	// operator finds a record from a log line. Default "ref".
	Ref string
	// RequestID holds the request ID of the execution the record belongs
	// to (S, dedupe.Record.RequestID); absent when none. Default
	// "request_id".
	RequestID string
	// Trace holds that execution's trace context (S, dedupe.Record.Trace);
	// absent when none. Default "trace".
	Trace string
	// LongKey holds, on a table keyed by reference (KeySchemaByRef), the
	// full stored key (S) of a record whose key is longer than
	// MaxPlainSortKey bytes, which its sort key PartitionKey holds
	// shortened; absent otherwise. Default "long_key".
	LongKey string
}

// DefaultAttributes returns the attribute names of the deployed schema
// (template.yaml).
func DefaultAttributes() Attributes {
	return Attributes{
		PartitionKey:   "pk",
		Status:         "status",
		Fingerprint:    "fingerprint",
		Owner:          "owner",
		LeaseExpiresAt: "lease_expires_at",
		ExpiresAt:      "expires_at",
		CreatedAt:      "created_at",
		UpdatedAt:      "updated_at",
		ResStatus:      "res_status",
		ResHeaders:     "res_headers",
		ResBody:        "res_body",
		ResEncoding:    "res_encoding",
		ResOmitted:     "res_omitted",
		FirstToken:     "first_token",
		ResObject:      "res_object",
		ResItem:        "res_item",
		InflightShard:  "inflight_shard",
		Ref:            "ref",
		RequestID:      "request_id",
		Trace:          "trace",
		LongKey:        "long_key",
	}
}

// names returns every attribute name of a, beside its field's name
// ("Attributes.PartitionKey").
func (a Attributes) names() [][2]string {
	return [][2]string{
		{"Attributes.PartitionKey", a.PartitionKey}, {"Attributes.Status", a.Status}, {"Attributes.Fingerprint", a.Fingerprint}, {"Attributes.Owner", a.Owner},
		{"Attributes.LeaseExpiresAt", a.LeaseExpiresAt}, {"Attributes.ExpiresAt", a.ExpiresAt}, {"Attributes.CreatedAt", a.CreatedAt}, {"Attributes.UpdatedAt", a.UpdatedAt},
		{"Attributes.ResStatus", a.ResStatus}, {"Attributes.ResHeaders", a.ResHeaders}, {"Attributes.ResBody", a.ResBody}, {"Attributes.ResEncoding", a.ResEncoding},
		{"Attributes.ResOmitted", a.ResOmitted}, {"Attributes.FirstToken", a.FirstToken}, {"Attributes.ResObject", a.ResObject}, {"Attributes.ResItem", a.ResItem},
		{"Attributes.InflightShard", a.InflightShard}, {"Attributes.Ref", a.Ref}, {"Attributes.RequestID", a.RequestID}, {"Attributes.Trace", a.Trace}, {"Attributes.LongKey", a.LongKey},
	}
}

// withDefaults returns a with every empty name replaced by its default.
func (a Attributes) withDefaults() Attributes {
	d := DefaultAttributes()
	for _, f := range []struct {
		dst *string
		def string
	}{
		{&a.PartitionKey, d.PartitionKey},
		{&a.Status, d.Status},
		{&a.Fingerprint, d.Fingerprint},
		{&a.Owner, d.Owner},
		{&a.LeaseExpiresAt, d.LeaseExpiresAt},
		{&a.ExpiresAt, d.ExpiresAt},
		{&a.CreatedAt, d.CreatedAt},
		{&a.UpdatedAt, d.UpdatedAt},
		{&a.ResStatus, d.ResStatus},
		{&a.ResHeaders, d.ResHeaders},
		{&a.ResBody, d.ResBody},
		{&a.ResEncoding, d.ResEncoding},
		{&a.ResOmitted, d.ResOmitted},
		{&a.FirstToken, d.FirstToken},
		{&a.ResObject, d.ResObject},
		{&a.ResItem, d.ResItem},
		{&a.InflightShard, d.InflightShard},
		{&a.Ref, d.Ref},
		{&a.RequestID, d.RequestID},
		{&a.Trace, d.Trace},
		{&a.LongKey, d.LongKey},
	} {
		if *f.dst == "" {
			*f.dst = f.def
		}
	}
	return a
}

// SortKey is the fixed sort key of a single-table design: every record the
// store writes carries Name = Value (S) beside its partition key.
type SortKey struct {
	// Name is the sort key attribute name. Empty means the table has no
	// sort key.
	Name string
	// Value is the fixed value stored under Name, e.g. "IDEMPOTENCY".
	Value string
}
