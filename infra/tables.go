package infra

import (
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	cfndynamodb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"
)

// Table is one AWS::DynamoDB::Table of the template, ready to create on a
// DynamoDB-compatible endpoint.
type Table struct {
	// LogicalID is the table's logical id, e.g. "IdempotencyTable".
	LogicalID string

	// Input creates the table: its name (see [Options.Names]), attribute
	// definitions, key schema, billing mode, and global and local secondary
	// indexes with their projections. What only matters once deployed
	// (server-side encryption, point-in-time recovery, streams, tags, table
	// class, deletion protection) is left out, so that local servers
	// without those features accept it.
	Input *dynamodb.CreateTableInput

	// TTLAttribute is the attribute of the table's TimeToLiveSpecification
	// when it is enabled, "" when the template declares no enabled TTL.
	TTLAttribute string
}

// Tables returns a Table for every AWS::DynamoDB::Table the template
// creates (see [Template.Creates]), sorted by logical id. A table whose key
// or index attributes lack an attribute definition, or whose billing mode
// is provisioned without a throughput, is an error wrapping
// [ErrInvalidTable].
func Tables(t *Template) ([]Table, error) {
	var ids []string
	for id, res := range t.Resources {
		if res.Type == typeTable && t.Creates(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)

	out := make([]Table, 0, len(ids))
	for _, id := range ids {
		src, err := t.GetDynamoDBTableWithName(id)
		if err != nil {
			return nil, err
		}
		tbl, err := table(t, id, src)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", id, err)
		}
		out = append(out, tbl)
	}
	return out, nil
}

// table converts one table resource.
func table(t *Template, id string, src *cfndynamodb.Table) (Table, error) {
	name, _ := t.physicalName(id).(string)
	in := &dynamodb.CreateTableInput{TableName: aws.String(name)}

	defined := make(map[string]bool, len(src.AttributeDefinitions))
	for _, a := range src.AttributeDefinitions {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.AttributeName),
			AttributeType: types.ScalarAttributeType(a.AttributeType),
		})
		defined[a.AttributeName] = true
	}
	keys := func(what string, ks []cfndynamodb.Table_KeySchema) ([]types.KeySchemaElement, error) {
		if len(ks) == 0 {
			return nil, fmt.Errorf("%s has no key schema: %w", what, ErrInvalidTable)
		}
		out := make([]types.KeySchemaElement, 0, len(ks))
		for _, k := range ks {
			if !defined[k.AttributeName] {
				return nil, fmt.Errorf("%s key %q has no attribute definition: %w", what, k.AttributeName, ErrInvalidTable)
			}
			out = append(out, types.KeySchemaElement{
				AttributeName: aws.String(k.AttributeName),
				KeyType:       types.KeyType(k.KeyType),
			})
		}
		return out, nil
	}
	var err error
	if in.KeySchema, err = keys("the table", src.KeySchema); err != nil {
		return Table{}, err
	}

	provisioned := src.BillingMode == nil || *src.BillingMode == string(types.BillingModeProvisioned)
	throughput := func(what string, p *cfndynamodb.Table_ProvisionedThroughput) (*types.ProvisionedThroughput, error) {
		if !provisioned {
			return nil, nil
		}
		if p == nil {
			return nil, fmt.Errorf("%s is provisioned but has no ProvisionedThroughput: %w", what, ErrInvalidTable)
		}
		return &types.ProvisionedThroughput{
			ReadCapacityUnits:  aws.Int64(int64(p.ReadCapacityUnits)),
			WriteCapacityUnits: aws.Int64(int64(p.WriteCapacityUnits)),
		}, nil
	}
	if provisioned {
		in.BillingMode = types.BillingModeProvisioned
		if in.ProvisionedThroughput, err = throughput("the table", src.ProvisionedThroughput); err != nil {
			return Table{}, err
		}
	} else {
		in.BillingMode = types.BillingModePayPerRequest
	}

	for _, g := range src.GlobalSecondaryIndexes {
		what := fmt.Sprintf("index %q", g.IndexName)
		gsi := types.GlobalSecondaryIndex{IndexName: aws.String(g.IndexName), Projection: projection(g.Projection)}
		if gsi.KeySchema, err = keys(what, g.KeySchema); err != nil {
			return Table{}, err
		}
		if gsi.ProvisionedThroughput, err = throughput(what, g.ProvisionedThroughput); err != nil {
			return Table{}, err
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
	}
	for _, l := range src.LocalSecondaryIndexes {
		lsi := types.LocalSecondaryIndex{IndexName: aws.String(l.IndexName), Projection: projection(l.Projection)}
		if lsi.KeySchema, err = keys(fmt.Sprintf("index %q", l.IndexName), l.KeySchema); err != nil {
			return Table{}, err
		}
		in.LocalSecondaryIndexes = append(in.LocalSecondaryIndexes, lsi)
	}

	tbl := Table{LogicalID: id, Input: in}
	if ttl := src.TimeToLiveSpecification; ttl != nil && ttl.Enabled && ttl.AttributeName != nil {
		tbl.TTLAttribute = *ttl.AttributeName
	}
	return tbl, nil
}

// projection converts an index projection; a missing one projects keys
// only, as CloudFormation's default does.
func projection(p *cfndynamodb.Table_Projection) *types.Projection {
	out := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
	if p == nil {
		return out
	}
	if p.ProjectionType != nil {
		out.ProjectionType = types.ProjectionType(*p.ProjectionType)
	}
	if len(p.NonKeyAttributes) > 0 {
		out.NonKeyAttributes = append([]string(nil), p.NonKeyAttributes...)
	}
	return out
}

// physicalName returns what a Ref to the resource resolves to.
func (t *Template) physicalName(logicalID string) any {
	return (&resolver{names: t.names}).lookup(logicalID, t.doc)
}
