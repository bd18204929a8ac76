package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

func TestWriteMetrics(t *testing.T) {
	var buf bytes.Buffer
	at := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	report := dynamostore.ReapReport{Found: 5, Cleared: 3, Skipped: 1, Errors: 1}
	if err := writeMetrics(&buf, "dedupe-ReaperFunction-abc", at, report); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 1 || !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
		t.Fatalf("got %q, want exactly one line", buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"FunctionName", line["FunctionName"], "dedupe-ReaperFunction-abc"},
		{"StrandedFound", line["StrandedFound"], 5.0},
		{"StrandedCleared", line["StrandedCleared"], 3.0},
		{"StrandedSkipped", line["StrandedSkipped"], 1.0},
		{"ReapErrors", line["ReapErrors"], 1.0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}

	var meta struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.AWS.Timestamp != at.UnixMilli() {
		t.Errorf("Timestamp: got %d, want %d", meta.AWS.Timestamp, at.UnixMilli())
	}
	if len(meta.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("got %d directives, want 1", len(meta.AWS.CloudWatchMetrics))
	}
	d := meta.AWS.CloudWatchMetrics[0]
	if d.Namespace != "Dedupe" || len(d.Dimensions) != 1 || !slices.Equal(d.Dimensions[0], []string{"FunctionName"}) {
		t.Errorf("directive: got %+v, want namespace Dedupe, dimensions [[FunctionName]]", d)
	}
	var names []string
	for _, m := range d.Metrics {
		if m.Unit != "Count" {
			t.Errorf("%s: unit %q, want Count", m.Name, m.Unit)
		}
		if _, ok := line[m.Name]; !ok {
			t.Errorf("metric %s declared but has no value", m.Name)
		}
		names = append(names, m.Name)
	}
	if want := []string{"StrandedFound", "StrandedCleared", "StrandedSkipped", "ReapErrors"}; !slices.Equal(names, want) {
		t.Errorf("metrics: got %v, want %v", names, want)
	}
}

// TestMetricsMatchAlarm checks the alarm of template.yaml watches a metric
// the reaper emits, in its namespace and with its dimension.
func TestMetricsMatchAlarm(t *testing.T) {
	tpl := loadTemplate(t)
	alarm, err := tpl.GetCloudWatchAlarmWithName("StrandedRecordsAlarm")
	if err != nil {
		t.Fatal(err)
	}
	if got := deref(alarm.Namespace); got != metricNamespace {
		t.Errorf("alarm namespace: got %q, want %q", got, metricNamespace)
	}
	if got := deref(alarm.MetricName); got != metricStrandedFound {
		t.Errorf("alarm metric: got %q, want %q", got, metricStrandedFound)
	}
	if len(alarm.Dimensions) != 1 || alarm.Dimensions[0].Name != metricDimension || alarm.Dimensions[0].Value != "ReaperFunction" {
		t.Errorf("alarm dimensions: got %+v, want FunctionName = the reaper function", alarm.Dimensions)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
