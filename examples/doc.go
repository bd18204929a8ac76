// Package examples holds runnable examples of dedupe in Lambda functions
// other than the payments demo, one main package per kind of function,
// each a thin main.go beside a handler tested on memstore and on a local
// DynamoDB-compatible server:
//
//   - sqs-orders: an SQS consumer keyed by a business field;
//   - eventbridge-invoices: an EventBridge consumer;
//   - kinesis-clicks: a Kinesis consumer with partial batch failures;
//   - rest-proxy: a REST API behind an ANY /{proxy+} resource;
//   - alb-payments: the Lambda target of an Application Load Balancer
//     that authenticates users (verified user claims), with its
//     CloudFormation template;
//   - container: a net/http server in a container (Middleware, lease
//     renewal);
//   - activity-payment: a workflow activity passing its key to a payment
//     processor;
//   - race: duplicates racing as processes, a naive check beside the
//     guard (make race).
package examples
