package main

import (
	"io"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
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

// writeMetrics writes r's counts to w as one EMF line (CloudWatch Logs
// turns it into metrics), dimensioned by functionName, at time at, with the
// same emitter the guard's request metrics use.
func writeMetrics(w io.Writer, functionName string, at time.Time, r dynamostore.ReapReport) error {
	emf := &dedupe.EMF{W: w, Namespace: metricNamespace, Now: func() time.Time { return at }}
	return emf.Write(map[string]string{metricDimension: functionName}, []dedupe.Metric{
		{Name: metricStrandedFound, Unit: "Count", Value: float64(r.Found)},
		{Name: metricStrandedCleared, Unit: "Count", Value: float64(r.Cleared)},
		{Name: metricStrandedSkipped, Unit: "Count", Value: float64(r.Skipped)},
		{Name: metricReapErrors, Unit: "Count", Value: float64(r.Errors)},
	})
}
