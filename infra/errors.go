package infra

import "errors"

// Errors returned by this package. Check them with errors.Is; the returned
// errors wrap them with details.
var (
	// ErrNoModuleRoot means FindTemplate found no go.mod file at or above
	// the working directory.
	ErrNoModuleRoot = errors.New("infra: no go.mod at or above the working directory")

	// ErrUnknownParameter means Options.Parameters named a parameter the
	// template does not declare.
	ErrUnknownParameter = errors.New("infra: unknown template parameter")

	// ErrUnresolved means the template uses something that cannot be
	// evaluated offline: a parameter without a default and without a value
	// in Options.Parameters, or a condition that does not evaluate to a
	// boolean.
	ErrUnresolved = errors.New("infra: cannot resolve template value")

	// ErrInvalidTable means an AWS::DynamoDB::Table resource cannot be
	// turned into a CreateTableInput, for example because a key attribute
	// has no attribute definition.
	ErrInvalidTable = errors.New("infra: invalid table definition")

	// ErrSchemaMismatch means a table that already exists has a key
	// schema, index or TTL attribute other than the template declares.
	ErrSchemaMismatch = errors.New("infra: existing table does not match the template")

	// ErrNotActive means a table or one of its indexes did not become
	// ACTIVE within EnsureTables' bounded number of polls.
	ErrNotActive = errors.New("infra: table did not become active")

	// ErrToolMissing means a tool that Transform, Lint or Validate runs is
	// not installed: cfn-lint, python3 or aws-sam-translator.
	ErrToolMissing = errors.New("infra: tool not installed")

	// ErrLint means cfn-lint or sam validate reported a finding that the
	// project's .cfnlintrc.yaml does not waive.
	ErrLint = errors.New("infra: template has lint findings")
)
