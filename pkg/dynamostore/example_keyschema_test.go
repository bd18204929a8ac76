package dynamostore_test

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// New tables are keyed by reference (TableInput); ClassicTableInput makes
// the schema of versions before v0.2.0, which existing tables keep.
func ExampleClassicTableInput() {
	for _, in := range []*dynamodb.CreateTableInput{dynamostore.TableInput("idem"), dynamostore.ClassicTableInput("idem")} {
		for _, k := range in.KeySchema {
			fmt.Print(k.KeyType, " ", aws.ToString(k.AttributeName), "; ")
		}
		fmt.Println(len(in.GlobalSecondaryIndexes), "index(es)")
	}
	// Output:
	// HASH ref; RANGE pk; 1 index(es)
	// HASH pk; 2 index(es)
}

// A store that calls no DescribeTable (GlobalTablesUnchecked) is told the
// table's key schema; without one, New refuses rather than guess.
func ExampleKeySchema() {
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	_, err := dynamostore.New(client, dynamostore.Options{Table: "idem", GlobalTables: dynamostore.GlobalTablesUnchecked})
	fmt.Println(errors.Is(err, dynamostore.ErrInvalidOptions))
	s, err := dynamostore.New(client, dynamostore.Options{Table: "idem", GlobalTables: dynamostore.GlobalTablesUnchecked,
		KeySchema: dynamostore.KeySchemaClassic})
	fmt.Println(s.KeySchema(), err)
	// Output:
	// true
	// KeySchemaClassic <nil>
}
