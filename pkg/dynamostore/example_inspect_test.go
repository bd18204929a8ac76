package dynamostore_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// An operator's tool reads a record without the response body kept in S3,
// then reads the body from the bucket the record names.
func ExampleStore_Inspect() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Println("load AWS config:", err)
		return
	}
	db := dynamodb.NewFromConfig(cfg)
	table := os.Getenv("IDEMPOTENCY_TABLE")
	// No LargeResults: Inspect never reads S3.
	store, err := dynamostore.New(db, dynamostore.Options{Table: table, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef})
	if err != nil {
		fmt.Println(err)
		return
	}
	key := os.Getenv("STORED_KEY")
	rec, err := store.Inspect(ctx, key, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	if rec.Object == nil {
		fmt.Printf("%s, body in the item\n", rec.Status)
		return
	}
	fmt.Printf("%s, body in s3://%s/%s\n", rec.Status, rec.Object.Bucket, rec.Object.Name)
	reader, err := dynamostore.New(db, dynamostore.Options{Table: table, GlobalTables: dynamostore.GlobalTablesUnchecked, KeySchema: dynamostore.KeySchemaByRef,
		LargeResults: dynamostore.LargeResults{Client: s3.NewFromConfig(cfg), Bucket: rec.Object.Bucket}})
	if err != nil {
		fmt.Println(err)
		return
	}
	full, err := reader.Get(ctx, key, time.Now()) // checks the object's size and SHA-256
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(full.Result.Body), "bytes")
}
