package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// The metrics the reaper emits; template.yaml's StrandedRecordsAlarm
// watches MetricStrandedFound in this namespace, by FunctionName.
const (
	metricNamespace       = "Dedupe"
	metricDimension       = "FunctionName"
	metricStrandedFound   = "StrandedFound"
	metricStrandedCleared = "StrandedCleared"
	metricStrandedSkipped = "StrandedSkipped"
	metricReapErrors      = "ReapErrors"
)

// emfMetric declares one metric in the _aws metadata.
type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emfDirective tells CloudWatch which members of the line are metrics, in
// which namespace, under which dimensions.
type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

// emfLine is one CloudWatch Embedded Metric Format log line: the metadata
// under _aws, then the dimension and metric values as top-level members.
type emfLine struct {
	AWS struct {
		Timestamp         int64          `json:"Timestamp"`
		CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	FunctionName    string `json:"FunctionName"`
	StrandedFound   int    `json:"StrandedFound"`
	StrandedCleared int    `json:"StrandedCleared"`
	StrandedSkipped int    `json:"StrandedSkipped"`
	ReapErrors      int    `json:"ReapErrors"`
}

// writeMetrics writes r's counts to w as one EMF line (CloudWatch Logs
// turns it into metrics), dimensioned by functionName, at time at.
func writeMetrics(w io.Writer, functionName string, at time.Time, r dynamostore.ReapReport) error {
	var line emfLine
	line.AWS.Timestamp = at.UnixMilli()
	d := emfDirective{Namespace: metricNamespace, Dimensions: [][]string{{metricDimension}}}
	for _, name := range []string{metricStrandedFound, metricStrandedCleared, metricStrandedSkipped, metricReapErrors} {
		d.Metrics = append(d.Metrics, emfMetric{Name: name, Unit: "Count"})
	}
	line.AWS.CloudWatchMetrics = []emfDirective{d}
	line.FunctionName = functionName
	line.StrandedFound = r.Found
	line.StrandedCleared = r.Cleared
	line.StrandedSkipped = r.Skipped
	line.ReapErrors = r.Errors
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}
