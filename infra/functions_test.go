package infra_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
)

// dump renders a value for a failure message.
func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func TestFunctionsResolution(t *testing.T) {
	tpl, err := infra.LoadWithOptions(filepath.Join("testdata", "resolve.yaml"), &infra.Options{
		Parameters: map[string]string{"Stage": "dev", "Shards": "16"},
		Names:      map[string]string{"Orders": "local-orders"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		t.Fatal(err)
	}
	want := []infra.Function{{
		LogicalID:  "Conditional",
		Runtime:    "provided.al2023",
		Handler:    "bootstrap",
		Timeout:    5 * time.Second,
		MemorySize: infra.DefaultMemorySize,
		Env:        map[string]string{"STAGE": "dev", "DROPPED": "from-globals"},
	}, {
		LogicalID:  "Worker",
		Runtime:    "provided.al2023",
		Handler:    "bootstrap",
		CodeURI:    "s3://bucket/key.zip",
		Timeout:    5 * time.Second,
		MemorySize: infra.DefaultMemorySize,
		Env: map[string]string{
			"STAGE":   "dev",
			"SHARDS":  "16",
			"TABLE":   "dev-named", // Ref to a table with a TableName
			"ORDERS":  "local-orders",
			"LITERAL": "${NotAVar}-aws-dev",
			"MAPPED":  "dev/${Orders.Arn}/${Unknown}",
			"ARN":     "${Orders.StreamArn}",
			"IF":      "named",
		},
		Routes: []infra.Route{
			{Event: "Everything", Method: "ANY", PayloadFormatVersion: "2.0", Timeout: 30 * time.Second},
			{Event: "Proxy", Method: "ANY", Path: "/{proxy+}", PayloadFormatVersion: "1.0", Timeout: 5 * time.Second},
		},
		Schedules: []infra.Schedule{{Event: "Nightly", Expression: "cron(0 3 * * ? *)", Enabled: false}},
		Statements: []infra.Statement{{
			Effect:    "Allow",
			Actions:   []string{"sqs:SendMessage"},
			Resources: []string{"arn:aws:sqs:us-east-1:123456789012:q"},
		}},
		ManagedPolicies: []string{"AWSLambdaBasicExecutionRole", "DynamoDBCrudPolicy"},
	}}
	if !reflect.DeepEqual(fns, want) {
		t.Errorf("got %s, want %s", dump(fns), dump(want))
	}
	if got := fns[1].Routes[0].RouteKey(); got != "$default" {
		t.Errorf("catch-all route key: got %q, want %q", got, "$default")
	}
}

func TestFunctionsSkipsConditional(t *testing.T) {
	tpl, err := infra.LoadWithOptions(filepath.Join("testdata", "resolve.yaml"), &infra.Options{
		Parameters: map[string]string{"Stage": "dev", "UseNamedTable": "no"},
	})
	if err != nil {
		t.Fatal(err)
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range fns {
		ids = append(ids, f.LogicalID)
	}
	if want := []string{"Worker"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("got %v, want %v", ids, want)
	}
	if env := infra.FunctionEnv(tpl, "Conditional"); env != nil {
		t.Errorf("FunctionEnv of a function not created: got %v, want nil", env)
	}
	if got := infra.FunctionEnv(tpl, "Worker")["IF"]; got != "unnamed" {
		t.Errorf("Fn::If with a false condition: got %q, want %q", got, "unnamed")
	}
}

func TestLoadUnresolvedParameter(t *testing.T) {
	_, err := infra.Load(filepath.Join("testdata", "resolve.yaml")) // Stage has no default
	if !errors.Is(err, infra.ErrUnresolved) {
		t.Errorf("got %v, want %v", err, infra.ErrUnresolved)
	}
}

func TestScheduleRate(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    time.Duration
		wantErr bool
	}{
		{"minutes", "rate(5 minutes)", 5 * time.Minute, false},
		{"one minute", "rate(1 minute)", time.Minute, false},
		{"hours", "rate(2 hours)", 2 * time.Hour, false},
		{"day", "rate(1 day)", 24 * time.Hour, false},
		{"cron", "cron(0 3 * * ? *)", 0, true},
		{"zero", "rate(0 minutes)", 0, true},
		{"seconds", "rate(30 seconds)", 0, true},
		{"garbage", "rate(five minutes)", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := infra.Schedule{Expression: tt.expr}.Rate()
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("got %v, %v, want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMakeBuildEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "MAKEFLAGS=n", "MFLAGS=-n", "MAKELEVEL=1", "ARTIFACTS_DIR=/old", "MAKEFLAGSX=kept"}
	got := infra.MakeBuildEnv(environ, "/art")
	want := []string{"PATH=/bin", "MAKEFLAGSX=kept", "ARTIFACTS_DIR=/art"}
	if !slices.Equal(got, want) {
		t.Errorf("MakeBuildEnv = %q, want %q", got, want)
	}
	if environ[1] != "MAKEFLAGS=n" {
		t.Errorf("MakeBuildEnv modified its argument: %q", environ)
	}
}
