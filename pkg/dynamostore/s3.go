package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// S3Client is the subset of *s3.Client that LargeResults calls. A
// *s3.Client satisfies it; tests and wrappers may stand in for it.
type S3Client interface {
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

var _ S3Client = (*s3.Client)(nil)

// DefaultObjectPrefix is the object name prefix of LargeResults when its
// Prefix is empty.
const DefaultObjectPrefix = "dedupe/"

// LargeResults stores results that do not fit in a DynamoDB item, even
// gzip-compressed, as S3 objects, so that they replay byte for byte
// instead of completing without their result (res_omitted). The zero
// value stores no objects: a result too large for an item is then
// omitted, as without this option.
//
// Set both Client and Bucket, or neither: New refuses one without the
// other (and a Prefix without them), with ErrInvalidOptions.
//
// What Complete does with a result whose item would exceed
// Options.MaxItemBytes:
//
//  1. it writes the body (gzip-compressed when that helps, as in an
//     item) to the object Prefix + hex(SHA-256(key)) + "/" +
//     hex(SHA-256(owner token))[:32]: the name reveals nothing of the key
//     but its hash, as dedupe.KeyRef does, and is unique to the claim, so
//     no two owners ever write the same object;
//  2. only then, it completes the record with the usual owner condition,
//     storing the object's bucket, name, size and SHA-256 in
//     Attributes.ResObject instead of the body. That condition is what
//     makes the object the answer: the object of an owner that lost its
//     key (a late invocation after a takeover) is written under its own
//     name and never referenced, so it is never read, and its lifecycle
//     expires it.
//
// A replay (Claim or Get of the completed record) reads the object,
// checks its size and SHA-256 against the record and answers its bytes.
// When it cannot, the record is still the answer: Claim and Get return it
// without its Result (see dedupe.Store), with an error wrapping
//
//   - dedupe.ErrResultUnreadable when a retry may read it: S3 throttled
//     (SlowDown) or failed (5xx), the call timed out or its connection
//     broke, the transfer was cut mid-body (io.ErrUnexpectedEOF); the
//     guard answers 503 with Retry-After;
//   - dedupe.ErrResultOmitted and ErrObjectInvalid when it never will:
//     the object is missing or its size or hash differ from the record's
//     (never a wrong body), the role may not read it (AccessDenied), the
//     record names another bucket, or the store has no LargeResults; the
//     guard answers 409 response unavailable.
//
// Neither is dedupe.ErrStoreUnavailable, so Config.FailOpen never runs a
// request whose record is completed, and a different request still gets
// the mismatch.
//
// If S3 refuses or fails the upload after the handler ran (a bucket that
// is missing, a Prefix the role may not write, or S3 still failing after
// the SDK's retries), Complete completes the record without its result,
// as for a result too large for an item, and returns an error wrapping
// dedupe.ErrResultTooLarge that names LargeResults.Bucket and Prefix:
// retries get dedupe.ErrResultOmitted, and a finished request never runs
// again. Only a failure of DynamoDB itself leaves the record in flight
// (dedupe.ErrNotStored). An object written by a completion that then
// failed is never referenced.
//
// New does not check the bucket: a probe would cost an S3 request (and an
// object, or s3:ListBucket for HeadBucket) per cold start, and could not
// tell a missing bucket from a blip at init any better than a completion
// can. The first large response tells instead, with its error.
//
// The bucket's lifecycle must keep objects at least as long as the
// records that reference them (the guard's Retention): S3 expires whole
// days, so expire after ceil(Retention/24h)+1 days. template.yaml does.
type LargeResults struct {
	// Client writes and reads the objects. Nil (with an empty Bucket)
	// means no objects are stored.
	Client S3Client
	// Bucket is the bucket that holds the objects. Records name their
	// bucket; a record naming another bucket is not read (ErrObjectInvalid).
	Bucket string
	// Prefix starts every object name. Empty means DefaultObjectPrefix.
	Prefix string
}

// check refuses a half-configured LargeResults.
func (l LargeResults) check() error {
	switch {
	case l.Client != nil && l.Bucket == "":
		return fmt.Errorf("%w: LargeResults.Client is set without LargeResults.Bucket; name the bucket, or leave both unset to omit results too large for an item", ErrInvalidOptions)
	case l.Client == nil && l.Bucket != "":
		return fmt.Errorf("%w: LargeResults.Bucket %q is set without LargeResults.Client; pass an *s3.Client, or leave both unset to omit results too large for an item", ErrInvalidOptions, l.Bucket)
	case l.Client == nil && l.Prefix != "":
		return fmt.Errorf("%w: LargeResults.Prefix is set without LargeResults.Client and Bucket", ErrInvalidOptions)
	}
	return nil
}

func (l LargeResults) enabled() bool { return l.Client != nil }

func (l LargeResults) prefix() string {
	if l.Prefix == "" {
		return DefaultObjectPrefix
	}
	return l.Prefix
}

// objectRef is where a result body lives in S3, as a record holds it.
type objectRef struct {
	bucket string
	name   string
	size   int64
	sha256 []byte
}

// Names of the fields of the Attributes.ResObject map.
const (
	objBucket = "bucket"
	objName   = "key"
	objSize   = "size"
	objSHA256 = "sha256"
)

// ObjectName returns the S3 object name under which LargeResults with
// prefix stores the result of the claim of key by token: prefix, the
// SHA-256 of key in hex, a slash, and the first 32 hex digits of the
// SHA-256 of token. An operator finds a key's objects by listing
// prefix + the hex SHA-256 of the stored key (dedupe.KeyRef shows its
// first 12 digits).
func ObjectName(prefix, key, token string) string {
	k := sha256.Sum256([]byte(key))
	t := sha256.Sum256([]byte(token))
	return prefix + hex.EncodeToString(k[:]) + "/" + hex.EncodeToString(t[:])[:32]
}

// attribute returns the Attributes.ResObject value of r.
func (r objectRef) attribute() types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		objBucket: str(r.bucket),
		objName:   str(r.name),
		objSize:   num(r.size),
		objSHA256: &types.AttributeValueMemberB{Value: r.sha256},
	}}
}

// size returns the attribute's size in DynamoDB's accounting.
func (r objectRef) attrSize(name string) int {
	return len(name) + 3 +
		len(objBucket) + len(r.bucket) + 1 +
		len(objName) + len(r.name) + 1 +
		len(objSize) + dynamoitem.MaxNumberSize + 1 +
		len(objSHA256) + len(r.sha256) + 1
}

// decodeObjectRef reads the Attributes.ResObject map v.
func decodeObjectRef(v types.AttributeValue) (objectRef, error) {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return objectRef{}, fmt.Errorf("got %T, want M", v)
	}
	d := decoder{item: m.Value}
	ref := objectRef{
		bucket: d.str(objBucket, true),
		name:   d.str(objName, true),
		size:   d.num(objSize),
		sha256: d.bin(objSHA256),
	}
	if d.err != nil {
		return objectRef{}, d.err
	}
	if len(ref.sha256) != sha256.Size || ref.size < 0 {
		return objectRef{}, errors.New("bad size or sha256")
	}
	return ref, nil
}

// completeLarge stores res's body as an object, then completes the record
// referencing it. The item it then writes holds no body; if even that is
// too large (huge headers), the record is completed without its result.
func (s *Store) completeLarge(ctx context.Context, req dedupe.CompleteRequest, res encodedResult) error {
	sum := sha256.Sum256(res.body)
	ref := objectRef{
		bucket: s.large.Bucket,
		name:   ObjectName(s.large.prefix(), req.Key, req.Token),
		size:   int64(len(res.body)),
		sha256: sum[:],
	}
	_, err := s.large.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:            aws.String(ref.bucket),
		Key:               aws.String(ref.name),
		Body:              bytes.NewReader(res.body),
		ContentLength:     aws.Int64(ref.size),
		ContentType:       aws.String("application/octet-stream"),
		ChecksumAlgorithm: s3types.ChecksumAlgorithmSha256,
		ChecksumSHA256:    aws.String(base64.StdEncoding.EncodeToString(ref.sha256)),
	})
	if err != nil {
		// The handler ran: never leave its record in flight for S3's sake
		// (a retry after the lease would run it again). Record it without
		// its result, as a result too large for an item is.
		why := fmt.Sprintf("LargeResults could not store the result in S3 (PutObject in bucket %q under prefix %q: %v): "+
			"check that LargeResults.Bucket exists in the function's Region and that the role may s3:PutObject under LargeResults.Prefix",
			ref.bucket, s.large.prefix(), err)
		if transientS3(err) {
			why = fmt.Sprintf("LargeResults could not store the result in S3 (PutObject in bucket %q still failing after the SDK's retries: %v)", ref.bucket, err)
		}
		return s.completeOmitted(ctx, req, why)
	}
	res.body, res.object = nil, &ref
	if size := s.completedSize(req, res); size > s.maxItemBytes {
		return s.completeOmitted(ctx, req, fmt.Sprintf("item of about %d bytes without its body exceeds %d", size, s.maxItemBytes))
	}
	err = s.update(ctx, req, res)
	if isItemTooLarge(err) {
		return s.completeOmitted(ctx, req, "DynamoDB refused the item as too large")
	}
	return err
}

// fetch reads and verifies the object ref names. Its errors wrap
// dedupe.ErrResultUnreadable when a retry may succeed, else
// dedupe.ErrResultOmitted and ErrObjectInvalid (see LargeResults); never
// dedupe.ErrStoreUnavailable: the record has been read, it is an answer.
func (s *Store) fetch(ctx context.Context, op, key string, ref objectRef) ([]byte, error) {
	prefix := fmt.Sprintf("dynamostore: %s %s", op, dedupe.KeyRef(key))
	lost := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %w: %w", prefix, fmt.Sprintf(format, args...), ErrObjectInvalid, dedupe.ErrResultOmitted)
	}
	switch {
	case !s.large.enabled():
		return nil, lost("the result is stored in S3, but Options.LargeResults is not set: set it to the bucket %q", ref.bucket)
	case ref.bucket != s.large.Bucket:
		return nil, lost("the result is stored in bucket %q, not in LargeResults.Bucket %q", ref.bucket, s.large.Bucket)
	}
	out, err := s.large.Client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(ref.bucket),
		Key:    aws.String(ref.name),
	})
	if err != nil {
		return nil, wrapS3(prefix+": get object", err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, ref.size+1))
	if err != nil {
		// A transfer cut mid-body (io.ErrUnexpectedEOF, a reset, a
		// timeout): the object is intact, the next read may get it all.
		return nil, fmt.Errorf("%s: read object: %w: %w", prefix, dedupe.ErrResultUnreadable, err)
	}
	if int64(len(b)) != ref.size {
		return nil, lost("object has %d bytes, its record says %d", len(b), ref.size)
	}
	if sum := sha256.Sum256(b); !bytes.Equal(sum[:], ref.sha256) {
		return nil, lost("object's SHA-256 differs from its record's")
	}
	return b, nil
}

// s3Unavailable are the S3 error codes that mean "try again later", beside
// the ones DynamoDB shares (unavailableCodes) and any 5xx status.
var s3Unavailable = map[string]bool{
	"SlowDown":             true,
	"InternalError":        true,
	"ServiceUnavailable":   true,
	"RequestTimeout":       true,
	"RequestTimeTooSkewed": true,
	"ExpiredToken":         true,
	"TokenRefreshRequired": true,
	"503":                  true,
	"500":                  true,
}

// transientS3 reports whether an S3 call's err is worth retrying later:
// an unavailable code or a 5xx status, and any failure that is not S3's
// answer at all (a network error, a timeout, a cancelled call).
func transientS3(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return true
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() >= 500 {
		return true
	}
	return s3Unavailable[apiErr.ErrorCode()] || unavailableCodes[apiErr.ErrorCode()]
}

// wrapS3 wraps the error of a GetObject whose record has been read:
// dedupe.ErrResultUnreadable when it is transient, else
// dedupe.ErrResultOmitted and ErrObjectInvalid (a missing object, access
// denied, a bucket gone).
func wrapS3(prefix string, err error) error {
	var nsk *s3types.NoSuchKey
	switch {
	case errors.As(err, &nsk) || !transientS3(err):
		return fmt.Errorf("%s: %w: %w: %w", prefix, ErrObjectInvalid, dedupe.ErrResultOmitted, err)
	}
	return fmt.Errorf("%s: %w: %w", prefix, dedupe.ErrResultUnreadable, err)
}
