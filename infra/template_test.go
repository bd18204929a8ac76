package infra_test

// The offline proof that template.yaml deploys what the project needs: it is
// loaded through infra.Load (goformation's resource models) and every
// property that matters is asserted. We cannot reach AWS from CI; AWS's own tools, cfn-lint
// and the SAM transform, run offline in transformed_test.go.

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	cfndynamodb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
)

// templatePath is the project's template, relative to this package.
var templatePath = filepath.Join("..", "template.yaml")

// existingTable is the name used to test ExistingIdempotencyTableName.
const existingTable = "orders-idem"

func load(t *testing.T, opts *infra.Options) *infra.Template {
	t.Helper()
	tpl, err := infra.LoadWithOptions(templatePath, opts)
	if err != nil {
		t.Fatalf("load %s: %v", templatePath, err)
	}
	return tpl
}

func functionsByID(t *testing.T, tpl *infra.Template) map[string]infra.Function {
	t.Helper()
	fns, err := infra.Functions(tpl)
	if err != nil {
		t.Fatalf("Functions: %v", err)
	}
	m := make(map[string]infra.Function, len(fns))
	for _, f := range fns {
		m[f.LogicalID] = f
	}
	return m
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestTemplateGlobalsAndFunctions(t *testing.T) {
	tpl := load(t, nil)
	g, err := tpl.GetServerlessGlobalFunction()
	if err != nil {
		t.Fatalf("Globals.Function: %v", err)
	}
	fns := functionsByID(t, tpl)
	api, reaper := fns["ApiFunction"], fns["ReaperFunction"]
	apiRes, err := tpl.GetServerlessFunctionWithName("ApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	reaperRes, err := tpl.GetServerlessFunctionWithName("ReaperFunction")
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		got, want any
	}{
		{"transform", tpl.Transform, []string{"AWS::Serverless-2016-10-31"}},
		{"functions", slices.Sorted(maps.Keys(fns)), []string{"ApiFunction", "ReaperFunction"}},
		{"globals runtime", deref(g.Runtime), "provided.al2023"},
		{"globals architectures", deref(g.Architectures), []string{"arm64"}},
		{"globals handler", deref(g.Handler), "bootstrap"},
		{"globals tracing", deref(g.Tracing), "Active"},
		{"globals memory", deref(g.MemorySize), 256},
		{"api build method", apiRes.AWSCloudFormationMetadata["BuildMethod"], "makefile"},
		{"reaper build method", reaperRes.AWSCloudFormationMetadata["BuildMethod"], "makefile"},
		{"api code uri", api.CodeURI, "."},
		{"reaper code uri", reaper.CodeURI, "."},
		{"api runtime", api.Runtime, "provided.al2023"},
		{"reaper runtime", reaper.Runtime, "provided.al2023"},
		{"api architectures", api.Architectures, []string{"arm64"}},
		{"reaper architectures", reaper.Architectures, []string{"arm64"}},
		{"api handler", api.Handler, "bootstrap"},
		{"reaper handler", reaper.Handler, "bootstrap"},
		// Short enough that tok_timeout, which outlives it, is testable locally.
		{"api timeout", api.Timeout, 10 * time.Second},
		{"reaper timeout", reaper.Timeout, 60 * time.Second},
		{"api memory", api.MemorySize, 256},
		{"api tracing", api.Tracing, "Active"},
		{"api routes (by event name)", routeKeys(api.Routes), []string{"POST /payments", "GET /payments/{id}", "GET /payments"}},
		{"api payload format", payloadFormats(api.Routes), []string{"2.0"}},
		{"api integration timeout", api.Routes[0].Timeout, 30 * time.Second},
		{"api schedules", api.Schedules, []infra.Schedule(nil)},
		{"reaper routes", reaper.Routes, []infra.Route(nil)},
		{"reaper schedule", reaper.Schedules, []infra.Schedule{{Event: "Sweep", Expression: "rate(5 minutes)", Enabled: true}}},
		{"api env", api.Env, map[string]string{
			"IDEMPOTENCY_TABLE": "IdempotencyTable",
			"PAYMENTS_TABLE":    "PaymentsTable",
			"LOG_LEVEL":         "INFO",
			"RETENTION":         "24h",
			// pkg/dynamostore LargeResults.
			"LARGE_RESPONSE_BUCKET":          "LargeResponseBucket",
			"LARGE_RESPONSE_EXPIRATION_DAYS": "2",
		}},
		{"reaper env", reaper.Env, map[string]string{
			"IDEMPOTENCY_TABLE": "IdempotencyTable",
			"PAYMENTS_TABLE":    "PaymentsTable",
			"LOG_LEVEL":         "INFO",
			"RETENTION":         "24h",
			"REAPER_SHARDS":     "8",
			"REAPER_GRACE":      "30s",
			"REAPER_WARN_AGE":   "15m",
		}},
		{"FunctionEnv", infra.FunctionEnv(tpl, "ReaperFunction"), reaper.Env},
		{"FunctionEnv of nothing", infra.FunctionEnv(tpl, "NoSuchFunction"), map[string]string(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}

	// The reaper's Go settings must parse as the reaper will parse them.
	for _, k := range []string{"REAPER_GRACE", "REAPER_WARN_AGE", "RETENTION"} {
		if _, err := time.ParseDuration(reaper.Env[k]); err != nil {
			t.Errorf("%s=%q: %v", k, reaper.Env[k], err)
		}
	}
	if every, err := reaper.Schedules[0].Rate(); err != nil || every != 5*time.Minute {
		t.Errorf("reaper rate: got %v, %v, want 5m0s", every, err)
	}
}

func routeKeys(rs []infra.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.RouteKey())
	}
	return out
}

func payloadFormats(rs []infra.Route) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r.PayloadFormatVersion) {
			out = append(out, r.PayloadFormatVersion)
		}
	}
	return out
}

// permissions flattens a function's statements into resource → sorted
// actions, failing on anything but plain Allow statements.
// largeResponses is the resource of the API's LargeResponses statement.
const largeResponses = "${LargeResponseBucket.Arn}/dedupe/*"

func permissions(t *testing.T, f infra.Function) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, s := range f.Statements {
		if s.Effect != "Allow" {
			t.Errorf("%s statement %q: effect %q, want Allow", f.LogicalID, s.Sid, s.Effect)
		}
		if len(s.Actions) == 0 || len(s.Resources) == 0 {
			t.Errorf("%s statement %q lists no actions or no resources (NotAction/NotResource are not allowed)", f.LogicalID, s.Sid)
		}
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				t.Errorf("%s statement %q: wildcard action %q", f.LogicalID, s.Sid, a)
			}
		}
		for _, r := range s.Resources {
			// The one wildcard: S3 objects under the store's prefix in the
			// large-response bucket.
			if strings.Contains(r, "*") && (s.Sid != "LargeResponses" || r != largeResponses) {
				t.Errorf("%s statement %q: wildcard resource %q", f.LogicalID, s.Sid, r)
			}
			for _, a := range s.Actions {
				if !slices.Contains(out[r], a) {
					out[r] = append(out[r], a)
				}
			}
		}
	}
	for r := range out {
		sort.Strings(out[r])
	}
	return out
}

// TestTemplateLeastPrivilege: each function's inline statements allow
// exactly, resource by resource, what its roles need on dedupe's table,
// index and objects (the permissions table, infra.PermissionsFile) and the
// demo's own grants on the payments table, and nothing else.
func TestTemplateLeastPrivilege(t *testing.T) {
	const (
		table       = "${IdempotencyTable.Arn}"
		payments    = "${PaymentsTable.Arn}"
		bucket      = "${LargeResponseBucket.Arn}"
		existingArn = "arn:aws:dynamodb:us-east-1:123456789012:table/" + existingTable
	)
	apiPayments := []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Scan"}
	tests := []struct {
		name     string
		params   map[string]string
		function string
		table    string
		roles    []string
		own      map[string][]string // the demo's grants beside dedupe's
	}{
		{"api", nil, "ApiFunction", table, []string{"guarded function", "large responses"}, map[string][]string{payments: apiPayments}},
		{"reaper", nil, "ReaperFunction", table, []string{"reaper"}, nil},
		{"api on an existing table", map[string]string{"ExistingIdempotencyTableName": existingTable}, "ApiFunction", existingArn,
			[]string{"guarded function", "large responses"}, map[string][]string{payments: apiPayments}},
		{"reaper on an existing table", map[string]string{"ExistingIdempotencyTableName": existingTable}, "ReaperFunction", existingArn, []string{"reaper"}, nil},
	}
	tbl := permissionsTable(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := functionsByID(t, load(t, &infra.Options{Parameters: tt.params}))[tt.function]
			if !ok {
				t.Fatalf("no function %s", tt.function)
			}
			// No managed policies and no SAM policy templates such as
			// DynamoDBCrudPolicy: only the inline statements below.
			if len(f.ManagedPolicies) != 0 {
				t.Errorf("managed policies: got %v, want none", f.ManagedPolicies)
			}
			if got := infra.FunctionRoles(f); !slices.Equal(got, tt.roles) {
				t.Errorf("roles %v, want %v", got, tt.roles)
			}
			grants, err := tbl.Grants(tt.roles...)
			if err != nil {
				t.Fatal(err)
			}
			want := maps.Clone(tt.own)
			if want == nil {
				want = map[string][]string{}
			}
			for _, g := range grants {
				res := tt.table
				switch {
				case strings.HasPrefix(g.On, infra.OnIndexPrefix):
					res += "/" + g.On
				case strings.HasPrefix(g.On, infra.OnObjectsPrefix):
					res = bucket + "/" + strings.TrimPrefix(g.On, infra.OnObjectsPrefix)
				}
				want[res] = append(want[res], g.Action)
			}
			for r := range want {
				sort.Strings(want[r])
			}
			if got := permissions(t, f); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestTemplateIdempotencyTable(t *testing.T) {
	tpl := load(t, nil)
	tbl, err := tpl.GetDynamoDBTableWithName("IdempotencyTable")
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]string{}
	for _, a := range tbl.AttributeDefinitions {
		attrs[a.AttributeName] = a.AttributeType
	}
	// inflight (the reaper's); keyed by reference, the table needs no ref
	// index (a classic one's is checked in operator_test.go).
	if len(tbl.GlobalSecondaryIndexes) != 1 {
		t.Fatalf("global secondary indexes: got %d, want 1", len(tbl.GlobalSecondaryIndexes))
	}
	gsi := tbl.GlobalSecondaryIndexes[0]

	tests := []struct {
		name      string
		got, want any
	}{
		{"condition", tbl.AWSCloudFormationCondition, "CreateIdempotencyTable"},
		{"created by default", tpl.Creates("IdempotencyTable"), true},
		{"billing", deref(tbl.BillingMode), "PAY_PER_REQUEST"},
		{"attribute definitions", attrs, map[string]string{"pk": "S", "inflight_shard": "N", "lease_expires_at": "N", "ref": "S"}},
		{"key schema", keySchema(tbl.KeySchema), []string{"ref HASH", "pk RANGE"}},
		{"ttl attribute", deref(tbl.TimeToLiveSpecification.AttributeName), "expires_at"},
		{"ttl enabled", tbl.TimeToLiveSpecification.Enabled, true},
		{"index name", gsi.IndexName, "inflight"},
		{"index keys", keySchema(gsi.KeySchema), []string{"inflight_shard HASH", "lease_expires_at RANGE"}},
		{"index projection", deref(gsi.Projection.ProjectionType), "INCLUDE"},
		{"index projected attributes", gsi.Projection.NonKeyAttributes, []string{"owner", "status", "created_at", "long_key"}},
		{"index throughput", gsi.ProvisionedThroughput == nil, true},
		{"pitr", deref(tbl.PointInTimeRecoverySpecification.PointInTimeRecoveryEnabled), true},
		{"sse", tbl.SSESpecification.SSEEnabled, true},
		{"no fixed name", tbl.TableName == nil, true},
		{"no local indexes", len(tbl.LocalSecondaryIndexes), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

// keySchema formats a key schema as "name KEYTYPE" entries.
func keySchema(ks []cfndynamodb.Table_KeySchema) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.AttributeName+" "+k.KeyType)
	}
	return out
}

func TestTemplatePaymentsTable(t *testing.T) {
	tbl, err := load(t, nil).GetDynamoDBTableWithName("PaymentsTable")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"billing", deref(tbl.BillingMode), "PAY_PER_REQUEST"},
		{"key schema", keySchema(tbl.KeySchema), []string{"id HASH"}},
		{"attribute", tbl.AttributeDefinitions[0].AttributeName + " " + tbl.AttributeDefinitions[0].AttributeType, "id S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestTemplateAlarmAndOutputs(t *testing.T) {
	tpl := load(t, nil)
	alarm, err := tpl.GetCloudWatchAlarmWithName("StrandedRecordsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		// The reaper must emit exactly this (EMF): namespace Dedupe, metric
		// StrandedFound, one dimension FunctionName = its function name.
		{"namespace", deref(alarm.Namespace), "Dedupe"},
		{"metric", deref(alarm.MetricName), "StrandedFound"},
		{"dimensions", alarm.Dimensions[0].Name + "=" + alarm.Dimensions[0].Value, "FunctionName=ReaperFunction"},
		{"dimension count", len(alarm.Dimensions), 1},
		{"statistic", deref(alarm.Statistic), "Sum"},
		{"period", deref(alarm.Period), 900},
		{"evaluation periods", alarm.EvaluationPeriods, 1},
		{"threshold", deref(alarm.Threshold), 0.0},
		{"comparison", alarm.ComparisonOperator, "GreaterThanThreshold"},
		{"missing data", deref(alarm.TreatMissingData), "notBreaching"},
		{"no actions by default", alarm.AlarmActions, []string(nil)},
		{"api url", tpl.Outputs["ApiUrl"].Value, "https://${ServerlessHttpApi}.execute-api.us-east-1.amazonaws.com/"},
		{"idempotency table output", tpl.Outputs["IdempotencyTableName"].Value, "IdempotencyTable"},
		{"payments table output", tpl.Outputs["PaymentsTableName"].Value, "PaymentsTable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}

	withTopic := load(t, &infra.Options{Parameters: map[string]string{"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops"}})
	alarm, err = withTopic.GetCloudWatchAlarmWithName("StrandedRecordsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"arn:aws:sns:us-east-1:123456789012:ops"}; !reflect.DeepEqual(alarm.AlarmActions, want) {
		t.Errorf("alarm actions with a topic: got %v, want %v", alarm.AlarmActions, want)
	}
}

func TestTemplateExistingTable(t *testing.T) {
	tpl := load(t, &infra.Options{Parameters: map[string]string{"ExistingIdempotencyTableName": existingTable}})
	tables, err := infra.Tables(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tbl := range tables {
		names = append(names, tbl.LogicalID)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"table not created", tpl.Creates("IdempotencyTable"), false},
		{"tables", names, []string{"PaymentsTable"}},
		{"api env", infra.FunctionEnv(tpl, "ApiFunction")["IDEMPOTENCY_TABLE"], existingTable},
		{"reaper env", infra.FunctionEnv(tpl, "ReaperFunction")["IDEMPOTENCY_TABLE"], existingTable},
		{"output", tpl.Outputs["IdempotencyTableName"].Value, existingTable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.got, tt.want) {
				t.Errorf("got %#v, want %#v", tt.got, tt.want)
			}
		})
	}
}

func TestTemplateParameters(t *testing.T) {
	tpl := load(t, nil)
	tests := []struct {
		name, param string
		want        any
	}{
		{"retention", "Retention", "24h"},
		{"log level", "LogLevel", "INFO"},
		{"existing table", "ExistingIdempotencyTableName", ""},
		{"alarm topic", "AlarmTopicArn", ""},
		{"log retention", "LogRetentionDays", 14.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := tpl.Parameters[tt.param]
			if !ok {
				t.Fatalf("no parameter %s", tt.param)
			}
			if got := p.Default; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}

	// Retention's AllowedPattern admits exactly what time.ParseDuration
	// reads, among the values a user would type.
	pattern := regexp.MustCompile(tpl.Parameters["Retention"].AllowedPattern)
	for _, v := range []string{"24h", "90m", "1h30m", "0.5h", "3600s", "24", "1d", "-1h", "h", ""} {
		_, perr := time.ParseDuration(v)
		valid := perr == nil && !strings.HasPrefix(v, "-")
		if got := pattern.MatchString(v); got != valid {
			t.Errorf("Retention %q: pattern match got %v, want %v", v, got, valid)
		}
	}
}

func TestLoadWithOptionsErrors(t *testing.T) {
	tests := []struct {
		name string
		path string
		opts *infra.Options
		want error
	}{
		{"unknown parameter", templatePath, &infra.Options{Parameters: map[string]string{"NoSuchParam": "x"}}, infra.ErrUnknownParameter},
		{"not a number", templatePath, &infra.Options{Parameters: map[string]string{"LogRetentionDays": "two weeks"}}, nil},
		{"missing file", filepath.Join(t.TempDir(), "template.yaml"), nil, fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := infra.LoadWithOptions(tt.path, tt.opts)
			if err == nil {
				t.Fatalf("got nil error, want one")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestFindTemplate(t *testing.T) {
	want, err := filepath.Abs(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("from a package directory", func(t *testing.T) {
		got, err := infra.FindTemplate()
		if err != nil || got != want {
			t.Errorf("got %q, %v, want %q", got, err, want)
		}
	})
	t.Run("outside any module", func(t *testing.T) {
		t.Chdir(t.TempDir())
		if _, err := os.Stat("go.mod"); err == nil {
			t.Skip("the temporary directory is inside a module")
		}
		_, err := infra.FindTemplate()
		if !errors.Is(err, infra.ErrNoModuleRoot) {
			t.Errorf("got %v, want %v", err, infra.ErrNoModuleRoot)
		}
	})
}

// TestLoadRefusesUnknownProperty: a misspelled property of a resource type
// infra reads fails Load, instead of reading as absent.
func TestLoadRefusesUnknownProperty(t *testing.T) {
	for _, tt := range []struct{ name, resource string }{
		{"table", "Type: AWS::DynamoDB::Table\n    Properties:\n      BilingMode: PAY_PER_REQUEST\n"},
		{"function", "Type: AWS::Serverless::Function\n    Properties:\n      Runtim: provided.al2023\n"},
		{"no type", "Properties: {}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "template.yaml")
			src := "Transform: AWS::Serverless-2016-10-31\nResources:\n  R:\n    " + tt.resource
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := infra.Load(path); err == nil {
				t.Errorf("Load accepted:\n%s", src)
			}
		})
	}
	t.Run("known properties", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "template.yaml")
		src := "Transform: [AWS::Serverless-2016-10-31]\nResources:\n  R:\n    Type: AWS::DynamoDB::Table\n    Properties:\n      BillingMode: PAY_PER_REQUEST\n"
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		tpl, err := infra.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(tpl.Transform, []string{"AWS::Serverless-2016-10-31"}) {
			t.Errorf("Transform = %q", tpl.Transform)
		}
	})
}
