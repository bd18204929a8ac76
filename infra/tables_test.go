package infra_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambda-dedupe/dedupe/infra"
)

func tablesByID(t *testing.T, tpl *infra.Template) map[string]infra.Table {
	t.Helper()
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatalf("Tables: %v", err)
	}
	m := map[string]infra.Table{}
	for _, tbl := range tables {
		m[tbl.LogicalID] = tbl
	}
	return m
}

func TestTablesFromTemplate(t *testing.T) {
	want := map[string]infra.Table{
		"IdempotencyTable": {
			LogicalID:    "IdempotencyTable",
			TTLAttribute: "expires_at",
			Input: &dynamodb.CreateTableInput{
				TableName:   aws.String("IdempotencyTable"),
				BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{
					{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
					{AttributeName: aws.String("inflight_shard"), AttributeType: types.ScalarAttributeTypeN},
					{AttributeName: aws.String("lease_expires_at"), AttributeType: types.ScalarAttributeTypeN},
					{AttributeName: aws.String("ref"), AttributeType: types.ScalarAttributeTypeS},
				},
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String("ref"), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String("pk"), KeyType: types.KeyTypeRange},
				},
				GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
					IndexName: aws.String("inflight"),
					KeySchema: []types.KeySchemaElement{
						{AttributeName: aws.String("inflight_shard"), KeyType: types.KeyTypeHash},
						{AttributeName: aws.String("lease_expires_at"), KeyType: types.KeyTypeRange},
					},
					Projection: &types.Projection{
						ProjectionType:   types.ProjectionTypeInclude,
						NonKeyAttributes: []string{"owner", "status", "created_at", "long_key"},
					},
				}},
			},
		},
		"PaymentsTable": {
			LogicalID: "PaymentsTable",
			Input: &dynamodb.CreateTableInput{
				TableName:   aws.String("PaymentsTable"),
				BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{
					{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
				},
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash},
				},
			},
		},
	}
	got := tablesByID(t, load(t, nil))
	if len(got) != len(want) {
		t.Errorf("got %d tables, want %d", len(got), len(want))
	}
	for id, w := range want {
		t.Run(id, func(t *testing.T) {
			if g := got[id]; !reflect.DeepEqual(g, w) {
				t.Errorf("got %s, want %s", dump(g), dump(w))
			}
		})
	}
}

func TestTablesNames(t *testing.T) {
	tpl := load(t, &infra.Options{Names: map[string]string{"IdempotencyTable": "local-idem"}})
	tables := tablesByID(t, tpl)
	tests := []struct {
		name      string
		got, want string
	}{
		{"mapped table", aws.ToString(tables["IdempotencyTable"].Input.TableName), "local-idem"},
		{"unmapped table", aws.ToString(tables["PaymentsTable"].Input.TableName), "PaymentsTable"},
		{"env follows the mapping", infra.FunctionEnv(tpl, "ApiFunction")["IDEMPOTENCY_TABLE"], "local-idem"},
		{"env of an unmapped table", infra.FunctionEnv(tpl, "ApiFunction")["PAYMENTS_TABLE"], "PaymentsTable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestTablesOtherShapes(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]string
		want   map[string]infra.Table
	}{
		{"named provisioned table and local index", map[string]string{"Stage": "dev"}, map[string]infra.Table{
			"NamedTable": {LogicalID: "NamedTable", Input: &dynamodb.CreateTableInput{
				TableName:   aws.String("dev-named"),
				BillingMode: types.BillingModeProvisioned,
				ProvisionedThroughput: &types.ProvisionedThroughput{
					ReadCapacityUnits: aws.Int64(2), WriteCapacityUnits: aws.Int64(3),
				},
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: "S"}},
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: "HASH"}},
			}},
			"Orders": {LogicalID: "Orders", Input: &dynamodb.CreateTableInput{
				TableName:   aws.String("Orders"),
				BillingMode: types.BillingModePayPerRequest,
				AttributeDefinitions: []types.AttributeDefinition{
					{AttributeName: aws.String("customer"), AttributeType: "S"},
					{AttributeName: aws.String("placed"), AttributeType: "N"},
					{AttributeName: aws.String("total"), AttributeType: "N"},
				},
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String("customer"), KeyType: "HASH"},
					{AttributeName: aws.String("placed"), KeyType: "RANGE"},
				},
				LocalSecondaryIndexes: []types.LocalSecondaryIndex{{
					IndexName: aws.String("by-total"),
					KeySchema: []types.KeySchemaElement{
						{AttributeName: aws.String("customer"), KeyType: "HASH"},
						{AttributeName: aws.String("total"), KeyType: "RANGE"},
					},
					Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
				}},
			}}, // TTL declared but disabled: no TTLAttribute.
		}},
		{"conditional table left out", map[string]string{"Stage": "dev", "UseNamedTable": "no"}, map[string]infra.Table{
			"Orders": {},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := infra.LoadWithOptions(filepath.Join("testdata", "resolve.yaml"), &infra.Options{Parameters: tt.params})
			if err != nil {
				t.Fatal(err)
			}
			got := tablesByID(t, tpl)
			if len(got) != len(tt.want) {
				t.Errorf("got %d tables, want %d", len(got), len(tt.want))
			}
			for id, w := range tt.want {
				if _, ok := got[id]; !ok {
					t.Errorf("table %s missing", id)
				} else if w.Input != nil && !reflect.DeepEqual(got[id], w) {
					t.Errorf("%s: got %s, want %s", id, dump(got[id]), dump(w))
				}
			}
		})
	}
}

func TestTablesInvalid(t *testing.T) {
	tpl, err := infra.Load(filepath.Join("testdata", "badtable.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := infra.Tables(tpl); !errors.Is(err, infra.ErrInvalidTable) {
		t.Errorf("got %v, want %v", err, infra.ErrInvalidTable)
	}
}
