package infra_test

// AWS's own view of template.yaml: cfn-lint on it and on its SAM
// transform, and assertions on the transformed CloudFormation, where SAM
// has expanded the events, policies and roles. These need cfn-lint and
// aws-sam-translator; without them the tests skip, and fail when CI is set.

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// needTools skips t when err says that cfn-lint or aws-sam-translator is
// missing (it wraps infra.ErrToolMissing), or fails it when CI is set. The
// tests call the tools and then ask: infra.Transform and infra.Lint name
// what is missing themselves, and asking infra.Tools first would start
// Python once more, a second or more of CPU, to learn the same.
func needTools(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, infra.ErrToolMissing) {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("required in CI: %v", err)
	}
	t.Skip(err)
}

// transformed returns template.yaml after the SAM transform, decoded.
func transformed(t *testing.T, opts infra.TransformOptions) map[string]any {
	t.Helper()
	out, err := infra.Transform(t.Context(), templatePath, opts)
	needTools(t, err)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// resources returns the transformed template's resources of type typ, by
// logical id.
func resources(doc map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range doc["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] == typ {
			props, _ := r["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

// jsonString renders v compactly, for comparing intrinsic functions.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// make validate's run on template.yaml is infra/cmd/validate's
// TestValidate.

func TestLintFails(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	// A template with an error cfn-lint knows (a Lambda runtime that does
	// not exist) must fail, so that a passing Validate means something.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	src := "Resources:\n  F:\n    Type: AWS::Lambda::Function\n    Properties:\n      Runtime: go0.1\n      Handler: bootstrap\n      Role: arn:aws:iam::123456789012:role/r\n      Code:\n        ZipFile: x\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	err := infra.Lint(t.Context(), filepath.Dir(bad), bad)
	needTools(t, err)
	if !errors.Is(err, infra.ErrLint) {
		t.Errorf("got %v, want %v", err, infra.ErrLint)
	}
}

// The managed policies SAM attaches itself: the basic execution role (logs)
// and, for Tracing: Active, X-Ray write access. They are AWS-owned and hold
// "*" resources; they are the only place the stack grants "*".
var samManagedPolicies = []string{
	"arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
	"arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
}

// TestTransformed asserts the facts that matter on the transformed
// template, transformed once.
func TestTransformed(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	doc := transformed(t, infra.TransformOptions{})
	t.Run("roles", func(t *testing.T) { checkTransformedRoles(t, doc) })
	t.Run("routes", func(t *testing.T) { checkTransformedRoutes(t, doc) })
	t.Run("schedule", func(t *testing.T) { checkTransformedSchedule(t, doc) })
	t.Run("alarm", func(t *testing.T) { checkTransformedAlarm(t, doc) })
}

func checkTransformedRoles(t *testing.T, doc map[string]any) {
	roles := resources(doc, "AWS::IAM::Role")
	// The only standalone policy is the operators' (operator_test.go),
	// attached to no role of the template.
	if len(resources(doc, "AWS::IAM::Policy")) != 0 || !slices.Equal(slices.Sorted(maps.Keys(resources(doc, "AWS::IAM::ManagedPolicy"))), []string{"IdempotencyOperatorPolicy"}) {
		t.Errorf("standalone IAM policies: want only IdempotencyOperatorPolicy, the functions' roles inline")
	}
	// Sid -> actions, per role: the exact grant.
	want := map[string]map[string][]string{
		"ApiFunctionRole": {
			"IdempotencyRecords": {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"},
			"Payments":           {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Scan"},
			"LargeResponses":     {"s3:GetObject", "s3:PutObject"},
			"GlobalTableCheck":   {"dynamodb:DescribeTable"},
		},
		"ReaperFunctionRole": {
			"FindStranded":     {"dynamodb:Query"},
			"RetireStranded":   {"dynamodb:UpdateItem"},
			"GlobalTableCheck": {"dynamodb:DescribeTable"},
		},
	}
	if got := slices.Sorted(maps.Keys(roles)); !slices.Equal(got, []string{"ApiFunctionRole", "ReaperFunctionRole"}) {
		t.Fatalf("roles: got %v, want ApiFunctionRole and ReaperFunctionRole", got)
	}
	for id, props := range roles {
		t.Run(id, func(t *testing.T) {
			var managed []string
			for _, a := range props["ManagedPolicyArns"].([]any) {
				managed = append(managed, a.(string))
			}
			sort.Strings(managed)
			if !slices.Equal(managed, samManagedPolicies) {
				t.Errorf("managed policies: got %v, want %v", managed, samManagedPolicies)
			}
			if got := jsonString(t, props["AssumeRolePolicyDocument"]); !strings.Contains(got, `"Service":["lambda.amazonaws.com"]`) || strings.Count(got, `"Action"`) != 1 {
				t.Errorf("trust policy: got %s, want lambda.amazonaws.com only", got)
			}
			got := map[string][]string{}
			for _, p := range props["Policies"].([]any) {
				stmts := p.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)
				for _, s := range stmts {
					s := s.(map[string]any)
					sid, _ := s["Sid"].(string)
					if s["Effect"] != "Allow" {
						t.Errorf("statement %s: effect %v, want Allow", sid, s["Effect"])
					}
					for _, r := range s["Resource"].([]any) {
						rs := jsonString(t, r)
						// The one wildcard: S3 objects under the store's
						// prefix in the large-response bucket.
						if sid == "LargeResponses" && rs == `{"Fn::Sub":"${LargeResponseBucket.Arn}/dedupe/*"}` {
							continue
						}
						if strings.Contains(rs, `"*"`) || strings.Contains(rs, `:*`) || strings.HasSuffix(rs, `*"`) {
							t.Errorf("statement %s: wildcard resource %s", sid, rs)
						}
					}
					var actions []string
					for _, a := range s["Action"].([]any) {
						actions = append(actions, a.(string))
					}
					sort.Strings(actions)
					got[sid] = actions
				}
			}
			if !reflect.DeepEqual(got, want[id]) {
				t.Errorf("inline grants: got %v, want %v", got, want[id])
			}
		})
	}
}

func checkTransformedRoutes(t *testing.T, doc map[string]any) {
	apis := resources(doc, "AWS::ApiGatewayV2::Api")
	api, ok := apis["ServerlessHttpApi"]
	if !ok || len(apis) != 1 {
		t.Fatalf("HTTP APIs: got %v, want ServerlessHttpApi only", slices.Sorted(maps.Keys(apis)))
	}
	const integration = `{"Fn::Sub":"arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${ApiFunction.Arn}/invocations"}`
	var routes []string
	for path, item := range api["Body"].(map[string]any)["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			in := op.(map[string]any)["x-amazon-apigateway-integration"].(map[string]any)
			routes = append(routes, strings.ToUpper(method)+" "+path)
			if in["type"] != "aws_proxy" || in["payloadFormatVersion"] != "2.0" || jsonString(t, in["uri"]) != integration {
				t.Errorf("%s %s: integration %v, want aws_proxy 2.0 to ApiFunction", method, path, in)
			}
		}
	}
	sort.Strings(routes)
	if want := []string{"GET /payments", "GET /payments/{id}", "POST /payments"}; !slices.Equal(routes, want) {
		t.Errorf("routes: got %v, want %v", routes, want)
	}
	// One invoke permission per route, for API Gateway only.
	perms := 0
	for id, p := range resources(doc, "AWS::Lambda::Permission") {
		if strings.HasPrefix(id, "ApiFunction") {
			perms++
			if p["Principal"] != "apigateway.amazonaws.com" || p["Action"] != "lambda:InvokeFunction" {
				t.Errorf("%s: got %v, want lambda:InvokeFunction for apigateway.amazonaws.com", id, p)
			}
		}
	}
	if perms != 3 {
		t.Errorf("API invoke permissions: got %d, want 3", perms)
	}
	stages := resources(doc, "AWS::ApiGatewayV2::Stage")
	if s, ok := stages["ServerlessHttpApiApiGatewayDefaultStage"]; !ok || s["StageName"] != "$default" || s["AutoDeploy"] != true {
		t.Errorf("stage: got %v, want the auto-deployed $default stage", stages)
	}
}

func checkTransformedSchedule(t *testing.T, doc map[string]any) {
	rules := resources(doc, "AWS::Events::Rule")
	r, ok := rules["ReaperFunctionSweep"]
	if !ok || len(rules) != 1 {
		t.Fatalf("rules: got %v, want ReaperFunctionSweep only", slices.Sorted(maps.Keys(rules)))
	}
	targets := r["Targets"].([]any)
	tests := []struct {
		name      string
		got, want any
	}{
		{"expression", r["ScheduleExpression"], "rate(5 minutes)"},
		{"state", r["State"], "ENABLED"},
		{"targets", len(targets), 1},
		{"target", jsonString(t, targets[0].(map[string]any)["Arn"]), `{"Fn::GetAtt":["ReaperFunction","Arn"]}`},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	p := resources(doc, "AWS::Lambda::Permission")["ReaperFunctionSweepPermission"]
	if p["Principal"] != "events.amazonaws.com" || jsonString(t, p["SourceArn"]) != `{"Fn::GetAtt":["ReaperFunctionSweep","Arn"]}` {
		t.Errorf("sweep permission: got %v, want events.amazonaws.com from the rule", p)
	}
}

func checkTransformedAlarm(t *testing.T, doc map[string]any) {
	alarms := resources(doc, "AWS::CloudWatch::Alarm")
	a, ok := alarms["StrandedRecordsAlarm"]
	if got := slices.Sorted(maps.Keys(alarms)); !ok || !slices.Equal(got, []string{"ReaperErrorsAlarm", "StrandedRecordsAlarm"}) {
		t.Fatalf("alarms: got %v, want ReaperErrorsAlarm (operator_test.go) and StrandedRecordsAlarm", got)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"namespace", a["Namespace"], "Dedupe"},
		{"metric", a["MetricName"], "StrandedFound"},
		{"dimensions", jsonString(t, a["Dimensions"]), `[{"Name":"FunctionName","Value":{"Ref":"ReaperFunction"}}]`},
		{"statistic", a["Statistic"], "Sum"},
		{"period", a["Period"], 900.0},
		{"threshold", a["Threshold"], 0.0},
		{"comparison", a["ComparisonOperator"], "GreaterThanThreshold"},
		{"missing data", a["TreatMissingData"], "notBreaching"},
		{"actions", jsonString(t, a["AlarmActions"]), `{"Fn::If":["HasAlarmTopic",[{"Ref":"AlarmTopicArn"}],{"Ref":"AWS::NoValue"}]}`},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestTransformCode(t *testing.T) {
	t.Parallel() // each starts Python: let two overlap
	doc := transformed(t, infra.TransformOptions{Code: map[string]string{"ApiFunction": "s3://artifacts/api.zip"}})
	fns := resources(doc, "AWS::Lambda::Function")
	if got := jsonString(t, fns["ApiFunction"]["Code"]); got != `{"S3Bucket":"artifacts","S3Key":"api.zip"}` {
		t.Errorf("ApiFunction code: got %s, want the given location", got)
	}
	if got := jsonString(t, fns["ReaperFunction"]["Code"]); got != `{"S3Bucket":"sam-artifacts-offline","S3Key":"ReaperFunction.zip"}` {
		t.Errorf("ReaperFunction code: got %s, want the placeholder", got)
	}
}

// TestTransformToolMissing: Transform names a missing python3, or missing
// modules, with ErrToolMissing, from the script's own failure (it does not
// start Python twice to check first).
func TestTransformToolMissing(t *testing.T) {
	for _, tt := range []struct {
		name, python string // python is python3's script; "" means none on PATH
	}{
		{"no python3", ""},
		{"no modules", "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'samtranslator'\" >&2\nexit 1\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			if tt.python != "" {
				if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(tt.python), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin)
			_, err := infra.Transform(t.Context(), templatePath, infra.TransformOptions{})
			if !errors.Is(err, infra.ErrToolMissing) {
				t.Fatalf("got %v, want %v", err, infra.ErrToolMissing)
			}
		})
	}
}

// TestToolsMissing: Tools names each missing tool and wraps
// ErrToolMissing. (Its answer with both tools present is asked by the
// rehearsal's test, as cmd/rehearse asks it.)
func TestToolsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := infra.Tools(t.Context())
	if !errors.Is(err, infra.ErrToolMissing) || !strings.Contains(err.Error(), "cfn-lint") || !strings.Contains(err.Error(), "python3") {
		t.Fatalf("got %v, want %v naming cfn-lint and python3", err, infra.ErrToolMissing)
	}
}
