// Command api is the payments demo Lambda function: the routes of package
// functions/api/internal/payments behind dedupe.HTTPAPI, with idempotency
// records in DynamoDB (pkg/dynamostore; or in Redis or PostgreSQL, see
// DEDUPE_STORE) and payments in a second DynamoDB table.
//
// Environment, as template.yaml sets it:
//
//	DEDUPE_STORE               dynamodb (default), redis or postgres: where idempotency records live
//	IDEMPOTENCY_TABLE          the idempotency table (required for dynamodb)
//	REDIS_URL                  redis://host:6379/0 or rediss:// (required for redis)
//	DATABASE_URL               postgres://user@host/db (required for postgres); the table
//	                           dedupe_records is created at cold start if missing
//	PAYMENTS_TABLE             the payments table (required)
//	RETENTION                  how long responses are replayed, a Go duration (default 24h)
//	LOG_LEVEL                  DEBUG, INFO, WARN or ERROR (default INFO)
//	AWS_ENDPOINT_URL_DYNAMODB  a local DynamoDB endpoint (read by the AWS SDK)
package main
