package infra

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// TableAPI is the part of *dynamodb.Client that EnsureTables uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// TableResult says what EnsureTables did for one table.
type TableResult struct {
	// TableName is the table's name.
	TableName string
	// Created is true when EnsureTables created the table, false when the
	// table already existed and was kept as it was.
	Created bool
	// TTLAttribute is the TTL attribute the template declares, "" when it
	// declares none (and the other TTL fields are zero).
	TTLAttribute string
	// TTLEnabled is true when TTL is on for TTLAttribute: it was enabled
	// now, or already was.
	TTLEnabled bool
	// TTLUnsupported is the server's error when it has no TTL API, as
	// dynalite has not. The table is usable, but nothing expires on its
	// own: expired records stay until something deletes them.
	TTLUnsupported error
}

// Polling of DescribeTable while a table or index is being created: about
// 30 seconds in all, which is far more than dynalite or DynamoDB Local take.
const (
	pollAttempts = 40
	pollFirst    = 20 * time.Millisecond
	pollMax      = time.Second
)

// EnsureTables creates each table and waits until it and its indexes are
// ACTIVE. It is idempotent: a table that already exists is kept, after
// checking that its key schema and indexes match (an error wrapping
// [ErrSchemaMismatch] otherwise). When the table declares a TTL attribute,
// EnsureTables enables TTL on it unless it is already on; a server without
// a TTL API (dynalite) is tolerated and reported in
// [TableResult].TTLUnsupported.
//
// It returns one result per table in order, up to the first error. A table
// still not ACTIVE after about 30 seconds of polling is an error wrapping
// [ErrNotActive]; ctx bounds the whole call.
func EnsureTables(ctx context.Context, client TableAPI, tables []Table) ([]TableResult, error) {
	results := make([]TableResult, 0, len(tables))
	for _, tbl := range tables {
		res, err := ensureTable(ctx, client, tbl)
		if err != nil {
			return results, err
		}
		results = append(results, res)
	}
	return results, nil
}

// ensureTable creates one table, or checks the one that exists.
func ensureTable(ctx context.Context, client TableAPI, tbl Table) (TableResult, error) {
	name := aws.ToString(tbl.Input.TableName)
	res := TableResult{TableName: name, TTLAttribute: tbl.TTLAttribute}

	_, err := client.CreateTable(ctx, tbl.Input)
	var inUse *types.ResourceInUseException
	switch {
	case err == nil:
		res.Created = true
	case errors.As(err, &inUse):
		// It exists (or is being created by someone else): keep it.
	default:
		return res, fmt.Errorf("create table %s: %w", name, err)
	}

	desc, err := waitActive(ctx, client, name)
	if err != nil {
		return res, err
	}
	if !res.Created {
		if err := sameSchema(tbl.Input, desc); err != nil {
			return res, fmt.Errorf("table %s: %w", name, err)
		}
	}
	if tbl.TTLAttribute != "" {
		if err := ensureTTL(ctx, client, name, tbl.TTLAttribute, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// waitActive polls DescribeTable until the table and all its global
// secondary indexes are ACTIVE.
func waitActive(ctx context.Context, client TableAPI, name string) (*types.TableDescription, error) {
	delay := pollFirst
	for attempt := 1; ; attempt++ {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		var notFound *types.ResourceNotFoundException
		switch {
		case err == nil && active(out.Table):
			return out.Table, nil
		case err != nil && !errors.As(err, &notFound):
			// Not found right after CreateTable is eventual consistency:
			// poll again. Anything else is final.
			return nil, fmt.Errorf("describe table %s: %w", name, err)
		}
		if attempt == pollAttempts {
			return nil, fmt.Errorf("table %s after %d polls: %w", name, attempt, ErrNotActive)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("wait for table %s: %w", name, ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, pollMax)
	}
}

// active reports whether a table and its global secondary indexes are
// ACTIVE.
func active(d *types.TableDescription) bool {
	if d == nil || d.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// sameSchema checks that an existing table has the key schema, key
// attribute types and indexes the input declares. Billing mode and
// projections of a kept table are not compared: they do not change what
// the code can read and write.
func sameSchema(want *dynamodb.CreateTableInput, got *types.TableDescription) error {
	types1 := func(defs []types.AttributeDefinition) map[string]types.ScalarAttributeType {
		m := make(map[string]types.ScalarAttributeType, len(defs))
		for _, d := range defs {
			m[aws.ToString(d.AttributeName)] = d.AttributeType
		}
		return m
	}
	wantTypes, gotTypes := types1(want.AttributeDefinitions), types1(got.AttributeDefinitions)
	keyString := func(ks []types.KeySchemaElement, attrTypes map[string]types.ScalarAttributeType) string {
		s := ""
		for _, k := range ks {
			n := aws.ToString(k.AttributeName)
			s += fmt.Sprintf("%s %s(%s) ", k.KeyType, n, attrTypes[n])
		}
		return s
	}
	if w, g := keyString(want.KeySchema, wantTypes), keyString(got.KeySchema, gotTypes); w != g {
		return fmt.Errorf("key schema is %q, want %q: %w", g, w, ErrSchemaMismatch)
	}
	gotIndexes := make(map[string]string)
	for _, g := range got.GlobalSecondaryIndexes {
		gotIndexes[aws.ToString(g.IndexName)] = keyString(g.KeySchema, gotTypes)
	}
	for _, l := range got.LocalSecondaryIndexes {
		gotIndexes[aws.ToString(l.IndexName)] = keyString(l.KeySchema, gotTypes)
	}
	check := func(name string, ks []types.KeySchemaElement) error {
		g, ok := gotIndexes[name]
		if !ok {
			return fmt.Errorf("index %q is missing: %w", name, ErrSchemaMismatch)
		}
		if w := keyString(ks, wantTypes); g != w {
			return fmt.Errorf("index %q key schema is %q, want %q: %w", name, g, w, ErrSchemaMismatch)
		}
		return nil
	}
	for _, g := range want.GlobalSecondaryIndexes {
		if err := check(aws.ToString(g.IndexName), g.KeySchema); err != nil {
			return err
		}
	}
	for _, l := range want.LocalSecondaryIndexes {
		if err := check(aws.ToString(l.IndexName), l.KeySchema); err != nil {
			return err
		}
	}
	return nil
}

// ensureTTL enables TTL on attr unless it is on already.
func ensureTTL(ctx context.Context, client TableAPI, name, attr string, res *TableResult) error {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if unsupported(err) {
		res.TTLUnsupported = err
		return nil
	}
	if err != nil {
		return fmt.Errorf("describe TTL of table %s: %w", name, err)
	}
	if d := out.TimeToLiveDescription; d != nil {
		on := d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling
		switch current := aws.ToString(d.AttributeName); {
		case on && current == attr:
			res.TTLEnabled = true
			return nil
		case on:
			return fmt.Errorf("table %s has TTL on %q, want %q: %w", name, current, attr, ErrSchemaMismatch)
		}
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attr),
			Enabled:       aws.Bool(true),
		},
	})
	if unsupported(err) {
		res.TTLUnsupported = err
		return nil
	}
	if err != nil {
		return fmt.Errorf("enable TTL on table %s: %w", name, err)
	}
	res.TTLEnabled = true
	return nil
}

// unsupported reports whether err says the server lacks the operation.
func unsupported(err error) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode() {
	case "UnknownOperationException", "NotImplemented", "NotImplementedException":
		return true
	}
	return false
}
