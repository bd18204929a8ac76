// Command validate checks template.yaml with AWS's own tools, offline; `make
// validate` runs it.
//
// Usage:
//
//	go run ./infra/cmd/validate [-o build/template.transformed.json] [TEMPLATE]
//
// With the AWS SAM CLI on PATH it runs `sam validate --lint`. Without it, it
// applies the SAM transform with aws-sam-translator (infra/sam/transform.py,
// no AWS calls) and writes the resulting CloudFormation template to the -o
// path. Then it runs cfn-lint, with dedupe's rules (infra/cfnlint), on the
// template (cfn-lint transforms it itself). Each finding is printed once, as
// file:line:column, its rule and its message (dedupe's name the fix). Any
// finding not waived in .cfnlintrc.yaml fails the command (exit 1); missing
// tools exit 3 with what to install.
package main
