package infra_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	cfndynamodb "github.com/awslabs/goformation/v7/cloudformation/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// policyStatement is one statement of a policy document.
type policyStatement struct {
	Sid       string
	Effect    string
	Action    []string
	Resource  []string
	Condition map[string]any
}

// TestTemplateOperatorPolicy checks the operators' managed policy: reads
// (GetItem on the table, Query on its two indexes), the two fenced
// writes of the dedupe command (UpdateItem, DeleteItem on the table) and
// the read of large responses (GetObject under the store's object
// prefix, show --body), on a created table and on an existing one;
// nothing else, no wildcard but the objects' prefix.
func TestTemplateOperatorPolicy(t *testing.T) {
	const existingArn = "arn:aws:dynamodb:us-east-1:123456789012:table/" + existingTable
	// The objects of LargeResults under its default prefix, as the API
	// function writes them.
	const largeObjects = "${LargeResponseBucket.Arn}/" + dynamostore.DefaultObjectPrefix + "*"
	tests := []struct {
		name    string
		params  map[string]string
		table   string
		classic bool // IdempotencyTableKeySchema classic: FindRef queries the ref index
	}{
		{"created table", nil, "${IdempotencyTable.Arn}", false},
		{"existing table", map[string]string{"ExistingIdempotencyTableName": existingTable}, existingArn, false},
		{"created classic table", map[string]string{"IdempotencyTableKeySchema": "classic"}, "${IdempotencyTable.Arn}", true},
		{"existing classic table", map[string]string{"ExistingIdempotencyTableName": existingTable, "IdempotencyTableKeySchema": "classic"}, existingArn, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := load(t, &infra.Options{Parameters: tt.params})
			p, err := tpl.GetIAMManagedPolicyWithName("IdempotencyOperatorPolicy")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(p.PolicyDocument)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct{ Statement []policyStatement }
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatalf("policy document: %v\n%s", err, raw)
			}
			got := map[string][]string{}
			for _, s := range doc.Statement {
				if s.Effect != "Allow" || len(s.Action) == 0 || len(s.Resource) == 0 {
					t.Errorf("statement %q: effect %q, %d actions, %d resources; want Allow with both", s.Sid, s.Effect, len(s.Action), len(s.Resource))
				}
				for _, r := range s.Resource {
					if strings.Contains(r, "*") && r != largeObjects {
						t.Errorf("statement %q: wildcard resource %q", s.Sid, r)
					}
					for _, a := range s.Action {
						if strings.Contains(a, "*") {
							t.Errorf("statement %q: wildcard action %q", s.Sid, a)
						}
						got[r] = append(got[r], a)
					}
				}
			}
			for r := range got {
				sort.Strings(got[r])
			}
			want := map[string][]string{
				tt.table:                     {"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"},
				tt.table + "/index/inflight": {"dynamodb:Query"},
				largeObjects:                 {"s3:GetObject"},
			}
			if tt.classic {
				want[tt.table] = []string{"dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}
				want[tt.table+"/index/ref"] = []string{"dynamodb:Query"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("operator permissions:\ngot  %v\nwant %v", got, want)
			}
		})
	}
	// The ref index the command's show queries on a classic table is the
	// store's default, keyed on the store's ref attribute, and projects
	// keys only.
	tpl := load(t, &infra.Options{Parameters: map[string]string{"IdempotencyTableKeySchema": "classic"}})
	tbl, err := tpl.GetDynamoDBTableWithName("IdempotencyTable")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(tbl.GlobalSecondaryIndexes, func(g cfndynamodb.Table_GlobalSecondaryIndex) bool { return g.IndexName == dynamostore.DefaultRefIndex })
	if i < 0 {
		t.Fatalf("no index %q on the idempotency table", dynamostore.DefaultRefIndex)
	}
	g := tbl.GlobalSecondaryIndexes[i]
	if len(g.KeySchema) != 1 || g.KeySchema[0].AttributeName != dynamostore.DefaultAttributes().Ref || deref(g.Projection.ProjectionType) != "KEYS_ONLY" {
		t.Errorf("index %q: keys %+v, projection %v; want HASH %q, KEYS_ONLY", g.IndexName, g.KeySchema, deref(g.Projection.ProjectionType), dynamostore.DefaultAttributes().Ref)
	}
}

// TestTemplateReaperErrorsAlarm checks the alarm on the reaper's own
// failures: failed invocations (AWS/Lambda Errors) plus the reaper's
// ReapErrors metric, both for the reaper function, beside the
// stranded-records alarm and with the same actions.
func TestTemplateReaperErrorsAlarm(t *testing.T) {
	for _, params := range []map[string]string{nil, {"AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:ops"}} {
		tpl := load(t, &infra.Options{Parameters: params})
		alarm, err := tpl.GetCloudWatchAlarmWithName("ReaperErrorsAlarm")
		if err != nil {
			t.Fatal(err)
		}
		stranded, err := tpl.GetCloudWatchAlarmWithName("StrandedRecordsAlarm")
		if err != nil {
			t.Fatal(err)
		}
		metrics := map[string]string{}
		var expr string
		for _, m := range alarm.Metrics {
			switch {
			case m.MetricStat != nil:
				ms := m.MetricStat
				if len(ms.Metric.Dimensions) != 1 || ms.Metric.Dimensions[0].Name != "FunctionName" || ms.Metric.Dimensions[0].Value != "ReaperFunction" {
					t.Errorf("metric %s: dimensions %+v, want FunctionName = the reaper", m.Id, ms.Metric.Dimensions)
				}
				if ms.Stat != "Sum" || ms.Period != 900 || deref(m.ReturnData) != false {
					t.Errorf("metric %s: %s over %d, returned %v; want Sum over 900, not returned", m.Id, ms.Stat, ms.Period, deref(m.ReturnData))
				}
				metrics[m.Id] = deref(ms.Metric.Namespace).(string) + "/" + deref(ms.Metric.MetricName).(string)
			case m.Expression != nil:
				expr = *m.Expression
			}
		}
		want := map[string]string{"invocationErrors": "AWS/Lambda/Errors", "reapErrors": "Dedupe/ReapErrors"}
		if !reflect.DeepEqual(metrics, want) {
			t.Errorf("metrics = %v, want %v", metrics, want)
		}
		if expr != "FILL(invocationErrors, 0) + FILL(reapErrors, 0)" {
			t.Errorf("expression = %q", expr)
		}
		if alarm.ComparisonOperator != "GreaterThanThreshold" || deref(alarm.Threshold) != 0.0 || alarm.EvaluationPeriods != 1 {
			t.Errorf("alarm fires on %s %v over %d periods; want > 0 in one", alarm.ComparisonOperator, deref(alarm.Threshold), alarm.EvaluationPeriods)
		}
		if !reflect.DeepEqual(alarm.AlarmActions, stranded.AlarmActions) {
			t.Errorf("actions = %v, want the stranded alarm's %v", alarm.AlarmActions, stranded.AlarmActions)
		}
	}
}

// TestTemplateReaperShards checks that the reaper queries as many
// in-flight shards as the functions write: the API function builds its
// store without Options.Shards (dynamostore.DefaultShards) and sets no
// shard variable, so the reaper's REAPER_SHARDS must be that default.
// The reaper also refuses, at run time, a record filed under a shard its
// count would not give (see dynamostore.ErrShardMismatch).
func TestTemplateReaperShards(t *testing.T) {
	fns := functionsByID(t, load(t, nil))
	if got, want := fns["ReaperFunction"].Env["REAPER_SHARDS"], strconv.Itoa(dynamostore.DefaultShards); got != want {
		t.Errorf("REAPER_SHARDS = %q, want %q (the API function's dynamostore.DefaultShards)", got, want)
	}
	for id, f := range fns {
		if id == "ReaperFunction" {
			continue
		}
		for k := range f.Env {
			if strings.Contains(k, "SHARD") {
				t.Errorf("%s sets %s: make the reaper's REAPER_SHARDS follow it, and this test", id, k)
			}
		}
	}
}
