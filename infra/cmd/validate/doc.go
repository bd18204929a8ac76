// Command validate checks template.yaml with AWS's own tools, offline; `make
// validate` runs it.
//
// Usage:
//
//	go run ./infra/cmd/validate [-o build/template.transformed.json] [TEMPLATE]
//
// With the AWS SAM CLI on PATH it runs `sam validate --lint`. Without it, it
// applies the SAM transform with aws-sam-translator (infra/sam/transform.py,
// no AWS calls), writes the resulting CloudFormation template to the -o path,
// and runs cfn-lint on both the template and its transform. Any finding not
// waived in .cfnlintrc.yaml fails the command (exit 1); missing tools exit 3
// with what to install.
package main
