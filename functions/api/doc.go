// Command api is the payments demo Lambda function: the routes of package
// functions/api/internal/payments behind dedupe.HTTPAPI, with idempotency
// records in DynamoDB (pkg/dynamostore) and payments in a second table.
//
// Environment, as template.yaml sets it:
//
//	IDEMPOTENCY_TABLE          the idempotency table (required)
//	PAYMENTS_TABLE             the payments table (required)
//	RETENTION                  how long responses are replayed, a Go duration (default 24h)
//	LOG_LEVEL                  DEBUG, INFO, WARN or ERROR (default INFO)
//	AWS_ENDPOINT_URL_DYNAMODB  a local DynamoDB endpoint (read by the AWS SDK)
package main
