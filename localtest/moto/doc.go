// Package moto provides the test rig's second AWS implementation: it starts
// moto_server (https://github.com/getmoto/moto, `pip install
// 'moto[server]'`) in memory on a loopback port. One moto_server answers
// every AWS service it models on that port: DynamoDB for the store tests,
// and CloudFormation, S3, IAM, Lambda, EventBridge, CloudWatch and Logs for
// the deploy rehearsal (package
// github.com/lambda-dedupe/dedupe/localtest/rehearsal).
//
// Where moto's DynamoDB differs from dynalite, which the store tests must
// name (see [github.com/lambda-dedupe/dedupe/localtest/dynamoserver.Server]):
//
//   - moto honours ReturnValuesOnConditionCheckFailure: a failed
//     conditional write carries the existing item (ALL_OLD), as DynamoDB
//     does, so a duplicate costs the store one call; on dynalite it costs
//     two (the fallback GetItem);
//   - moto has the TTL API (DescribeTimeToLive, UpdateTimeToLive); dynalite
//     has none. Neither deletes expired items on its own;
//   - moto creates tables ACTIVE at once; dynalite after a short delay;
//   - moto serves requests on several threads and does not lock an item
//     between checking a ConditionExpression and writing: two concurrent
//     conditional PutItems on one absent key can both succeed, which
//     DynamoDB never allows (dynalite, single-threaded, does not either).
//     [Start] therefore puts a loopback proxy in front of moto_server that
//     passes one request at a time, unless [Options.Concurrent] is set.
//     S3 requests pass through it unchanged (path-style addressing, as an
//     s3.Client with UsePathStyle sends them; streamed and checksummed
//     PutObject bodies included): pkg/dynamostore's LargeResults tests run
//     on the same endpoint.
//
// moto is a Python program. [Start] reports [ErrNotInstalled] when
// moto_server is not on PATH.
package moto
