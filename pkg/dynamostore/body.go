package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/internal/dynamoitem"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// A response body that would push the completed record past one write
// unit (WriteUnitBytes) is stored in an item of its own, the body item,
// so that the record stays small: a replay's failed claim is charged by
// the record's size, one write unit, and the body costs read units (one
// per 4 KB), whatever its size. Bodies small enough stay inline, and
// bodies too large for any item go to S3 (LargeResults) or are omitted,
// as before.
//
// Complete writes the body item first, then completes the record with
// the usual owner condition, storing the body's size and SHA-256 in
// Attributes.ResItem instead of the body:
//
//	claim (record, IN_PROGRESS)   body item put       complete (record)
//	   |-------------------------------|-------------------|
//	                                   name unique to the  owner = :token;
//	                                   claim: key hash and res_item = size,
//	                                   owner token         sha256
//
// The body item's key (BodyItemKey) is unique to the claim, so no two
// owners ever write the same body item, and the completion's condition is
// what makes it the answer: the body item of an owner that lost its key
// is never referenced, and expires. A reader checks the size and SHA-256,
// so a body item that is missing or is not the one the record names is
// never answered (dedupe.ErrResultOmitted); a read that fails for now is
// dedupe.ErrResultUnreadable. The body item expires bodyItemMargin after
// the record, so that a reader whose clock is behind DynamoDB's still
// finds it while it takes the record for live.

// bodyItemEncoding prefixes the Attributes.ResEncoding of a record whose
// body is in a body item ("item:gzip", "item:identity"): a version without
// body items reads it as an unknown encoding and refuses the record
// (ErrMalformedItem) instead of replaying an empty body.
const bodyItemEncoding = "item:"

// bodyItemMargin is how much longer a body item lives than its record.
const bodyItemMargin = time.Hour

// BodyItemKey returns the partition key of the body item that holds the
// response body of the claim of key by token: a NUL, "body", a NUL, the
// first 32 hex digits of the SHA-256 of key, a NUL and token. Keys the
// guard makes never start with a NUL; a store key that does and equals
// a body item's key is refused loudly by either write, never answered
// with the other's data.
func BodyItemKey(key, token string) string {
	k := sha256.Sum256([]byte(key))
	return "\x00body\x00" + hex.EncodeToString(k[:])[:32] + "\x00" + token
}

// itemRef is what a record holds of its body item (Attributes.ResItem).
type itemRef struct {
	size   int64
	sha256 []byte
}

// attribute returns the Attributes.ResItem value of r.
func (r itemRef) attribute() types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		objSize:   num(r.size),
		objSHA256: &types.AttributeValueMemberB{Value: r.sha256},
	}}
}

// decodeItemRef reads the Attributes.ResItem map v.
func decodeItemRef(v types.AttributeValue) (itemRef, error) {
	m, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return itemRef{}, fmt.Errorf("got %T, want M", v)
	}
	d := decoder{item: m.Value}
	ref := itemRef{size: d.num(objSize), sha256: d.bin(objSHA256)}
	if d.err != nil {
		return itemRef{}, d.err
	}
	if len(ref.sha256) != sha256.Size || ref.size < 0 {
		return itemRef{}, errors.New("bad size or sha256")
	}
	return ref, nil
}

// bodyKey returns the primary key of the body item of key's claim by
// token.
func (s *Store) bodyKey(key, token string) map[string]types.AttributeValue {
	return s.key(BodyItemKey(key, token))
}

// putBody writes res's body to the body item of req's claim. A resent
// write finds its own item (the same owner) and is applied again.
func (s *Store) putBody(ctx context.Context, req dedupe.CompleteRequest, body []byte) error {
	a := s.attr
	item := s.bodyKey(req.Key, req.Token)
	item[a.ResBody] = &types.AttributeValueMemberB{Value: body}
	item[a.Owner] = str(req.Token)
	item[a.ExpiresAt] = num(req.ExpiresAt.Add(bodyItemMargin).Unix())
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR (#owner = :tok AND attribute_not_exists(#status))"),
		ExpressionAttributeNames:  map[string]string{"#pk": a.PartitionKey, "#owner": a.Owner, "#status": a.Status},
		ExpressionAttributeValues: map[string]types.AttributeValue{":tok": str(req.Token)},
	})
	if err != nil {
		return wrapErr("complete", req.Key, err)
	}
	return nil
}

// bodyItemSize returns the size of the body item of req's claim holding
// a body of n bytes.
func (s *Store) bodyItemSize(req dedupe.CompleteRequest, n int) int {
	a := s.attr
	size := len(a.PartitionKey) + len(BodyItemKey(req.Key, req.Token)) + len(a.ResBody) + n +
		len(a.Owner) + len(req.Token) + len(a.ExpiresAt) + dynamoitem.MaxNumberSize
	if s.sortKey.Name != "" {
		size += len(s.sortKey.Name) + len(s.sortKey.Value)
	}
	if s.byRef() {
		size += len(a.Ref) + len(dedupe.KeyRef(""))
	}
	return size
}

// splitBody writes res's body to its own item and returns res naming
// that item instead of holding the body, or ok false when the write
// failed: the record is then completed with its body inline, as it fits
// an item (the handler ran, and its result must be kept).
func (s *Store) splitBody(ctx context.Context, req dedupe.CompleteRequest, res encodedResult) (_ encodedResult, ok bool) {
	if res.encoding == EncodingIdentity && s.compressAbove >= 0 {
		// Not above CompressAbove, but in an item of its own: compressed
		// when that saves a write unit (each replay's read then costs
		// less too).
		overhead := s.bodyItemSize(req, 0)
		if gz, enc := dynamoitem.Compress(res.body, 0); enc == EncodingGzip && WriteUnits(overhead+len(gz)) < WriteUnits(overhead+len(res.body)) {
			res.body, res.encoding = gz, enc
		}
	}
	if err := s.putBody(ctx, req, res.body); err != nil {
		return res, false
	}
	sum := sha256.Sum256(res.body)
	res.item = &itemRef{size: int64(len(res.body)), sha256: sum[:]}
	res.body = nil
	return res, true
}

// fetchBody reads and verifies the body item of the record of key
// completed by token: an eventually consistent GetItem, and a strongly
// consistent one when that did not find the body the record names. Its errors wrap dedupe.ErrResultUnreadable when a
// retry may succeed, else dedupe.ErrResultOmitted and ErrObjectInvalid;
// never dedupe.ErrStoreUnavailable: the record has been read, it is an
// answer.
func (s *Store) fetchBody(ctx context.Context, op, key, token string, ref itemRef) ([]byte, error) {
	prefix := fmt.Sprintf("dynamostore: %s %s", op, dedupe.KeyRef(key))
	lost := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s: %w: %w", prefix, fmt.Sprintf(format, args...), ErrObjectInvalid, dedupe.ErrResultOmitted)
	}
	// A body item never changes once written (only its owner writes it,
	// before completing, the same bytes if the write is resent), so an
	// eventually consistent read, half the read units, is the answer when
	// it matches the record; one that finds nothing or something else
	// (written a moment ago, not yet everywhere) is read again strongly.
	var why error
	for _, consistent := range []bool{false, true} {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            s.bodyKey(key, token),
			ConsistentRead: aws.Bool(consistent),
		})
		if err != nil {
			return nil, fmt.Errorf("%s: read the body item: %w: %v", prefix, dedupe.ErrResultUnreadable, err)
		}
		b, ok := out.Item[s.attr.ResBody].(*types.AttributeValueMemberB)
		switch {
		case len(out.Item) == 0:
			why = lost("its body item is missing")
		case !ok:
			why = lost("its body item holds no body")
		case int64(len(b.Value)) != ref.size:
			why = lost("body item has %d bytes, its record says %d", len(b.Value), ref.size)
		default:
			if sum := sha256.Sum256(b.Value); !bytes.Equal(sum[:], ref.sha256) {
				why = lost("body item's SHA-256 differs from its record's")
				continue
			}
			return b.Value, nil
		}
	}
	return nil, why
}
