// Package rehearsal provides the deploy rehearsal: what `sam build` and `sam
// deploy` would do with template.yaml and samconfig.toml, done against
// moto_server (package github.com/lambda-dedupe/dedupe/localtest/moto) on
// a loopback port instead of an AWS account, and checked.
//
// [Run] goes through the deployment as SAM would:
//
//  1. build: for each function with Metadata BuildMethod makefile, run
//     `make build-<LogicalId>` with ARTIFACTS_DIR set, in the CodeUri
//     directory itself when samconfig.toml sets build_in_source (as `sam
//     build --build-in-source` does); zip the artifacts directory; check
//     the zip holds one executable bootstrap, a static linux/arm64 ELF
//     binary;
//  2. package: upload each zip to a bucket, under the samconfig s3_prefix
//     and the zip's MD5, as `sam package` does;
//  3. transform: apply the SAM transform offline (infra.Transform) with the
//     code locations;
//  4. deploy: create the stack (samconfig stack_name, capabilities) through
//     the CloudFormation API and wait for CREATE_COMPLETE;
//  5. check what the stack created against what the template declares
//     (see [Report]);
//  6. update the stack with changed parameters and check the change
//     reached the functions;
//  7. delete the stack and check its resources are gone.
//
// What it proves: the template survives the real SAM transform and
// CloudFormation's resource model; the Makefile targets SAM calls build
// the artifacts; the artifact that reaches Lambda is the one built; the
// tables, roles and their inline policies (with every Ref and GetAtt
// resolved to real ARNs), functions, schedule and log groups come out as
// declared; updates and deletes go through. What it cannot prove, and only
// a real account can: that the functions run when invoked (moto has no
// invoke without Docker), the HTTP API and its integration (moto's
// CloudFormation does not model AWS::ApiGatewayV2), the alarm (nor
// AWS::CloudWatch::Alarm), and IAM's real evaluation of the policies.
//
// Where moto does not model a declared property, the check is recorded as
// a [Gap] naming the difference, not as a pass, and a value that is
// neither the declared one nor moto's known stand-in fails the run.
package rehearsal
