package infra_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
)

func ExampleLoad() {
	tpl, err := infra.Load("../template.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	on, _ := tpl.Condition("CreateIdempotencyTable")
	fmt.Println("creates the idempotency table:", on)
	fmt.Println("API URL:", tpl.Outputs["ApiUrl"].Value)
	// Output:
	// creates the idempotency table: true
	// API URL: https://${ServerlessHttpApi}.execute-api.us-east-1.amazonaws.com/
}

func ExampleTables() {
	tpl, err := infra.LoadWithOptions("../template.yaml", &infra.Options{
		Names: map[string]string{"IdempotencyTable": "local-idem"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tables {
		in := t.Input
		fmt.Printf("%s: %s key %s, %d index(es), TTL %q\n", t.LogicalID, aws.ToString(in.TableName),
			aws.ToString(in.KeySchema[0].AttributeName), len(in.GlobalSecondaryIndexes), t.TTLAttribute)
	}
	// Output:
	// IdempotencyTable: local-idem key ref, 1 index(es), TTL "expires_at"
	// PaymentsTable: PaymentsTable key id, 0 index(es), TTL ""
}

func ExampleFunctions() {
	tpl, err := infra.Load("../template.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range fns {
		fmt.Printf("%s (%s, timeout %v, IDEMPOTENCY_TABLE=%s)\n", f.LogicalID, f.Architectures[0], f.Timeout, f.Env["IDEMPOTENCY_TABLE"])
		for _, r := range f.Routes {
			fmt.Println("  route", r.RouteKey())
		}
		for _, s := range f.Schedules {
			fmt.Println("  schedule", s.Expression)
		}
	}
	// Output:
	// ApiFunction (arm64, timeout 10s, IDEMPOTENCY_TABLE=IdempotencyTable)
	//   route POST /payments
	//   route GET /payments/{id}
	//   route GET /payments
	// ReaperFunction (arm64, timeout 1m0s, IDEMPOTENCY_TABLE=IdempotencyTable)
	//   schedule rate(5 minutes)
}

// EnsureTables creates the template's tables on the endpoint in
// AWS_ENDPOINT_URL_DYNAMODB (dynalite, DynamoDB Local), keeping any that
// exist.
func ExampleEnsureTables() {
	ctx := context.Background()
	path, err := infra.FindTemplate()
	if err != nil {
		fmt.Println(err)
		return
	}
	tpl, err := infra.Load(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	results, err := infra.EnsureTables(ctx, dynamodb.NewFromConfig(cfg), tables)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Printf("%s created=%v", r.TableName, r.Created)
		if r.TTLUnsupported != nil {
			fmt.Print(" (no TTL on this server: expired records stay)")
		}
		fmt.Println()
	}
}

func ExampleMakeBuildEnv() {
	env := infra.MakeBuildEnv([]string{"HOME=/home/me", "MAKEFLAGS=n", "MAKELEVEL=1"}, "/tmp/artifacts")
	fmt.Println(env)
	// Output: [HOME=/home/me ARTIFACTS_DIR=/tmp/artifacts]
}
