// Package infra provides what the project derives from its SAM template,
// template.yaml, so that the template stays the single source of truth.
//
// [Load] parses the template and resolves its intrinsic functions offline
// (see [Load] for exactly what a Ref, Fn::GetAtt, Fn::Sub or Fn::If
// becomes), with goformation's intrinsic processor; the Get...WithName
// methods decode one resource into goformation's model of its type. Only
// those resource types are compiled in, not goformation's model of every
// CloudFormation resource, which was most of a minute of `make test`'s
// compiling. From the result:
//
//   - [Tables] turns every AWS::DynamoDB::Table into a CreateTableInput, and
//     [EnsureTables] creates those tables on a DynamoDB-compatible endpoint
//     (dynalite, DynamoDB Local), keeping tables that already exist. The local
//     stack and the tests create their tables this way, so the local schema
//     cannot drift from the deployed one.
//   - [Functions] lists each AWS::Serverless::Function with its settings
//     (Globals merged in), environment, HttpApi routes, schedules and inline
//     IAM statements: what a local API Gateway needs to run the functions as
//     AWS would, and what the offline template tests assert.
//
// [FindTemplate] locates template.yaml at the module root.
package infra
