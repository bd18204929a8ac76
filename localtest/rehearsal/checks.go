package rehearsal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	cwltypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/lambda-dedupe/dedupe/infra"
)

// declared loads template.yaml as deployed: with the stack's parameters,
// and with every resource of the template that the stack created named by
// its physical id, so that references resolve to what moto created.
func (r *rehearsal) declared() (*infra.Template, error) {
	tpl, err := infra.Load(r.tplPath)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for id := range tpl.Resources {
		if p, ok := r.physical[id]; ok {
			names[id] = p
		}
	}
	return infra.LoadWithOptions(r.tplPath, &infra.Options{Parameters: r.params, Names: names})
}

// checkTables compares each table with its declaration.
func (r *rehearsal) checkTables(ctx context.Context) error {
	tpl, err := r.declared()
	if err != nil {
		return err
	}
	tables, err := infra.Tables(tpl)
	if err != nil {
		return err
	}
	for _, t := range tables {
		id, name := t.LogicalID, aws.ToString(t.Input.TableName)
		out, err := r.c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			r.report.fail(id+" describe", err)
			continue
		}
		d := out.Table
		r.report.eq(id+" key schema", keySchema(d.KeySchema), keySchema(t.Input.KeySchema))
		r.report.eq(id+" attribute definitions", attrDefs(d.AttributeDefinitions), attrDefs(t.Input.AttributeDefinitions))
		var billing ddbtypes.BillingMode
		if d.BillingModeSummary != nil {
			billing = d.BillingModeSummary.BillingMode
		}
		r.report.eq(id+" billing mode", billing, t.Input.BillingMode)
		r.report.eq(id+" global secondary indexes", gsis(d.GlobalSecondaryIndexes), declaredGSIs(t.Input.GlobalSecondaryIndexes))

		ttl, err := r.c.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil {
			r.report.fail(id+" TTL", err)
		} else {
			got := strings.TrimSpace(string(ttl.TimeToLiveDescription.TimeToLiveStatus) + " " + aws.ToString(ttl.TimeToLiveDescription.AttributeName))
			want := string(ddbtypes.TimeToLiveStatusDisabled)
			if t.TTLAttribute != "" {
				want = string(ddbtypes.TimeToLiveStatusEnabled) + " " + t.TTLAttribute
			}
			r.report.gapOr(id+" TTL", got, want, string(ddbtypes.TimeToLiveStatusDisabled), "moto's CloudFormation ignores TimeToLiveSpecification (its DynamoDB has the TTL API)")
		}

		src, err := tpl.GetDynamoDBTableWithName(id)
		if err != nil {
			return err
		}
		wantPITR := src.PointInTimeRecoverySpecification != nil && aws.ToBool(src.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled)
		if cb, err := r.c.ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)}); err != nil {
			r.report.fail(id+" point-in-time recovery", err)
		} else {
			got := cb.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == ddbtypes.PointInTimeRecoveryStatusEnabled
			r.report.gapOr(id+" point-in-time recovery", got, wantPITR, false, "moto's CloudFormation ignores PointInTimeRecoverySpecification")
		}
		wantSSE := src.SSESpecification != nil && src.SSESpecification.SSEEnabled
		gotSSE := d.SSEDescription != nil && d.SSEDescription.Status == ddbtypes.SSEStatusEnabled
		r.report.gapOr(id+" server-side encryption", gotSSE, wantSSE, false, "moto's CloudFormation ignores SSESpecification")
	}
	return nil
}

// checkRoles compares each function's role with the transformed template:
// the trust policy, the inline policies with their resources resolved to
// the stack's real ARNs, and the managed policies.
func (r *rehearsal) checkRoles(ctx context.Context) error {
	tpl, err := r.declared()
	if err != nil {
		return err
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		return err
	}
	arns, err := r.tableARNs(ctx)
	if err != nil {
		return err
	}
	res := r.doc["Resources"].(map[string]any)
	for _, fn := range fns {
		roleID := fn.LogicalID + "Role"
		props, _ := res[roleID].(map[string]any)["Properties"].(map[string]any)
		name := r.physical[roleID]
		role, err := r.c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if err != nil {
			r.report.fail(roleID+" get", err)
			continue
		}
		trust, _ := url.QueryUnescape(aws.ToString(role.Role.AssumeRolePolicyDocument))
		r.report.that(roleID+" trust policy", strings.Contains(trust, "lambda.amazonaws.com") && strings.Count(trust, "sts:AssumeRole") == 1, trust, "lambda.amazonaws.com may assume it")

		var wantNames []string
		for _, p := range props["Policies"].([]any) {
			wantNames = append(wantNames, p.(map[string]any)["PolicyName"].(string))
		}
		listed, err := r.c.iam.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(name)})
		if err != nil {
			r.report.fail(roleID+" inline policies", err)
			continue
		}
		r.report.eq(roleID+" inline policy names", sortedCopy(listed.PolicyNames), sortedCopy(wantNames))

		want := map[string]string{}
		for _, s := range fn.Statements {
			var resources []string
			for _, rs := range s.Resources {
				resources = append(resources, resolveARN(rs, arns))
			}
			want[s.Sid] = s.Effect + " " + strings.Join(sortedCopy(s.Actions), ",") + " on " + strings.Join(sortedCopy(resources), ",")
		}
		got := map[string]string{}
		for _, pn := range listed.PolicyNames {
			p, err := r.c.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(pn)})
			if err != nil {
				r.report.fail(roleID+" policy "+pn, err)
				continue
			}
			stmts, repr, err := policyStatements(aws.ToString(p.PolicyDocument))
			if err != nil {
				r.report.fail(roleID+" policy "+pn, err)
				continue
			}
			if repr {
				r.report.Gaps = append(r.report.Gaps, Gap{Step: r.report.step, What: roleID + " policy " + pn + " document", Want: "URL-encoded JSON", Got: "a Python dict repr",
					Why: "moto's CloudFormation stores an inline policy document as Python's repr of it; decoded as such"})
			}
			for _, s := range stmts {
				got[s.Sid] = s.Effect + " " + strings.Join(sortedCopy(s.Action), ",") + " on " + strings.Join(sortedCopy(s.Resource), ",")
			}
		}
		r.report.eq(roleID+" inline grants", got, want)

		var wantManaged []string
		for _, a := range props["ManagedPolicyArns"].([]any) {
			wantManaged = append(wantManaged, a.(string))
		}
		attached, err := r.c.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(name)})
		if err != nil {
			r.report.fail(roleID+" managed policies", err)
			continue
		}
		gotManaged := []string{}
		for _, a := range attached.AttachedPolicies {
			gotManaged = append(gotManaged, aws.ToString(a.PolicyArn))
		}
		r.report.gapOr(roleID+" managed policies", sortedCopy(gotManaged), sortedCopy(wantManaged), []string{},
			"moto's CloudFormation does not attach a role's ManagedPolicyArns")
	}
	return nil
}

// statement is an IAM policy statement whose Action and Resource may each
// be a string or a list.
type statement struct {
	Sid      string
	Effect   string
	Action   stringList
	Resource stringList
}

// stringList decodes a JSON string or list of strings.
type stringList []string

// UnmarshalJSON implements json.Unmarshaler.
func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*l = many
	return nil
}

// policyStatements decodes a policy document as IAM returns it
// (URL-encoded JSON). repr reports that it was moto's Python repr of the
// document instead, which it decodes by turning its quotes into JSON's;
// the project's policies hold no quote characters.
func policyStatements(doc string) (stmts []statement, repr bool, err error) {
	if u, err := url.QueryUnescape(doc); err == nil {
		doc = u
	}
	if strings.HasPrefix(doc, "{'") {
		repr = true
		doc = strings.ReplaceAll(doc, "'", `"`)
	}
	var p struct{ Statement []statement }
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return nil, repr, fmt.Errorf("decode policy document %q: %w", doc, err)
	}
	return p.Statement, repr, nil
}

// tableARNs returns the ARN of each table and bucket of the stack, by
// logical id.
func (r *rehearsal) tableARNs(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for id, typ := range r.types {
		if typ == "AWS::S3::Bucket" {
			out[id] = "arn:aws:s3:::" + r.physical[id] // a bucket's ARN is its name
			continue
		}
		if typ != "AWS::DynamoDB::Table" {
			continue
		}
		d, err := r.c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.physical[id])})
		if err != nil {
			return nil, fmt.Errorf("describe table %s: %w", id, err)
		}
		out[id] = aws.ToString(d.Table.TableArn)
	}
	return out, nil
}

// resolveARN replaces infra's "${Table.Arn}" placeholder with the table's
// real ARN.
func resolveARN(s string, arns map[string]string) string {
	for id, arn := range arns {
		s = strings.ReplaceAll(s, "${"+id+".Arn}", arn)
	}
	return s
}

// checkFunctions compares each function with its declaration, and its
// code with the artifact built.
func (r *rehearsal) checkFunctions(ctx context.Context) error {
	tpl, err := r.declared()
	if err != nil {
		return err
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		return err
	}
	for _, fn := range fns {
		id := fn.LogicalID
		out, err := r.c.lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(r.physical[id])})
		if err != nil {
			r.report.fail(id+" get", err)
			continue
		}
		c := out.Configuration
		r.report.eq(id+" runtime", string(c.Runtime), fn.Runtime)
		r.report.eq(id+" handler", aws.ToString(c.Handler), fn.Handler)
		r.report.eq(id+" memory", int(aws.ToInt32(c.MemorySize)), fn.MemorySize)
		r.report.eq(id+" timeout", int(aws.ToInt32(c.Timeout)), int(fn.Timeout.Seconds()))
		var env map[string]string
		if c.Environment != nil {
			env = c.Environment.Variables
		}
		r.report.eq(id+" environment", env, fn.Env)
		if role, err := r.c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r.physical[id+"Role"])}); err != nil {
			r.report.fail(id+" role", err)
		} else {
			r.report.eq(id+" role", aws.ToString(c.Role), aws.ToString(role.Role.Arn))
		}
		var arch []string
		for _, a := range c.Architectures {
			arch = append(arch, string(a))
		}
		r.report.gapOr(id+" architectures", arch, fn.Architectures, []string{"x86_64"}, "moto's CloudFormation ignores Architectures (x86_64 always)")
		var tracing string
		if c.TracingConfig != nil {
			tracing = string(c.TracingConfig.Mode)
		}
		r.report.gapOr(id+" tracing", tracing, fn.Tracing, "PassThrough", "moto's CloudFormation ignores TracingConfig")
		a := r.artifacts[id]
		r.report.eq(id+" code SHA-256 (the artifact built)", aws.ToString(c.CodeSha256), a.SHA256)
		r.report.eq(id+" code size", c.CodeSize, int64(len(a.Zip)))
	}
	return nil
}

// checkSchedules checks each Schedule event's EventBridge rule and target.
func (r *rehearsal) checkSchedules(ctx context.Context) error {
	for _, fn := range r.fns {
		fnOut, err := r.c.lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(r.physical[fn.LogicalID])})
		if err != nil {
			r.report.fail(fn.LogicalID+" get", err)
			continue
		}
		for _, s := range fn.Schedules {
			id := fn.LogicalID + s.Event
			rule, err := r.c.events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(r.physical[id])})
			if err != nil {
				r.report.fail(id+" rule", err)
				continue
			}
			r.report.eq(id+" schedule", aws.ToString(rule.ScheduleExpression), s.Expression)
			wantState := "DISABLED"
			if s.Enabled {
				wantState = "ENABLED"
			}
			r.report.eq(id+" state", string(rule.State), wantState)
			targets, err := r.c.events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(r.physical[id])})
			if err != nil {
				r.report.fail(id+" targets", err)
				continue
			}
			var got []string
			for _, t := range targets.Targets {
				got = append(got, aws.ToString(t.Arn))
			}
			r.report.eq(id+" targets", got, []string{aws.ToString(fnOut.Configuration.FunctionArn)})
		}
	}
	return nil
}

// checkAlarm checks the stranded-records alarm, where moto created it.
func (r *rehearsal) checkAlarm(ctx context.Context) error {
	const id = "StrandedRecordsAlarm"
	name, ok := r.physical[id]
	if !ok {
		return nil // checkResources recorded the gap
	}
	out, err := r.c.cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNames: []string{name}})
	if err != nil {
		r.report.fail(id, err)
		return nil
	}
	if !r.report.eq(id+" found", len(out.MetricAlarms), 1) {
		return nil
	}
	a := out.MetricAlarms[0]
	r.report.eq(id+" metric", aws.ToString(a.Namespace)+"/"+aws.ToString(a.MetricName), "Dedupe/StrandedFound")
	var dims []string
	for _, d := range a.Dimensions {
		dims = append(dims, aws.ToString(d.Name)+"="+aws.ToString(d.Value))
	}
	r.report.eq(id+" dimensions", dims, []string{"FunctionName=" + r.physical["ReaperFunction"]})
	return nil
}

// checkLogGroups checks each function's log group name and retention.
func (r *rehearsal) checkLogGroups(ctx context.Context) error {
	// The template's default, unless samconfig overrides it.
	initial, want := int32(14), int32(14)
	if v, ok := r.cfg.Parameters["LogRetentionDays"]; ok {
		if _, err := fmt.Sscan(v, &initial); err != nil {
			return fmt.Errorf("LogRetentionDays %q: %w", v, err)
		}
	}
	want = initial
	if v, ok := r.params["LogRetentionDays"]; ok {
		if _, err := fmt.Sscan(v, &want); err != nil {
			return fmt.Errorf("LogRetentionDays %q: %w", v, err)
		}
	}
	for _, fn := range r.fns {
		name := "/aws/lambda/" + r.physical[fn.LogicalID]
		out, err := r.c.logs.DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(name)})
		if err != nil {
			r.report.fail(fn.LogicalID+" log group", err)
			continue
		}
		i := slices.IndexFunc(out.LogGroups, func(g cwltypes.LogGroup) bool { return aws.ToString(g.LogGroupName) == name })
		if !r.report.that(fn.LogicalID+" log group", i >= 0, name, name) {
			continue
		}
		r.report.gapOr(fn.LogicalID+" log retention days", aws.ToInt32(out.LogGroups[i].RetentionInDays), want, initial,
			"moto's CloudFormation does not apply an update of AWS::Logs::LogGroup RetentionInDays (it sets it on create)")
	}
	return nil
}

// checkOutputs checks the stack's outputs that moto can resolve.
func (r *rehearsal) checkOutputs(ctx context.Context) error {
	out, err := r.c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(r.stackID)})
	if err != nil {
		return fmt.Errorf("describe stack: %w", err)
	}
	got := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		got[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	want := map[string]string{
		"IdempotencyTableName": r.physical["IdempotencyTable"],
		"PaymentsTableName":    r.physical["PaymentsTable"],
		"ReaperFunctionName":   r.physical["ReaperFunction"],
	}
	for _, k := range slices.Sorted(keys(want)) {
		r.report.eq("output "+k, got[k], want[k])
	}
	api := "https://${ServerlessHttpApi}.execute-api." + r.opts.Region + ".amazonaws.com/"
	r.report.gapOr("output ApiUrl", got["ApiUrl"], "https://<api id>.execute-api."+r.opts.Region+".amazonaws.com/", api,
		"no HTTP API to substitute: moto's CloudFormation does not model AWS::ApiGatewayV2::Api")
	r.report.gapOr("output StrandedRecordsAlarmName", got["StrandedRecordsAlarmName"], "the alarm's name", "",
		"no alarm: moto's CloudFormation does not model AWS::CloudWatch::Alarm, and drops the output")
	return nil
}

// keySchema formats a key schema as "name TYPE" strings.
func keySchema(ks []ddbtypes.KeySchemaElement) []string {
	out := []string{}
	for _, k := range ks {
		out = append(out, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
	}
	return out
}

// attrDefs formats attribute definitions as sorted "name TYPE" strings.
func attrDefs(ds []ddbtypes.AttributeDefinition) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, aws.ToString(d.AttributeName)+" "+string(d.AttributeType))
	}
	return sortedCopy(out)
}

// gsis formats described indexes as sorted strings: name, keys,
// projection.
func gsis(ds []ddbtypes.GlobalSecondaryIndexDescription) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, gsiString(aws.ToString(d.IndexName), d.KeySchema, d.Projection))
	}
	return sortedCopy(out)
}

// declaredGSIs formats declared indexes as gsis does.
func declaredGSIs(ds []ddbtypes.GlobalSecondaryIndex) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, gsiString(aws.ToString(d.IndexName), d.KeySchema, d.Projection))
	}
	return sortedCopy(out)
}

func gsiString(name string, ks []ddbtypes.KeySchemaElement, p *ddbtypes.Projection) string {
	s := name + " " + strings.Join(keySchema(ks), ",")
	if p != nil {
		s += " " + string(p.ProjectionType) + " " + strings.Join(sortedCopy(p.NonKeyAttributes), ",")
	}
	return s
}
