package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Capacity is the DynamoDB capacity units and calls of one request, by
// mode (default, lean, and Powertools' idempotency utility modelled by
// its calls), scenario (fresh, replay, failure, retry) and response size,
// computed by AWS's rules from the items actually written
// (localtest/capacity.Measure), as DynamoDB bills them: the meter hands a
// failed conditional write its existing item (ALL_OLD) on servers that do
// not, so no fallback read is counted.
type Capacity struct {
	Mode       string  `json:"mode"`
	Scenario   string  `json:"scenario"`
	SizeBytes  int     `json:"responseBytes"`
	Read       float64 `json:"readUnits"`
	Write      float64 `json:"writeUnits"`
	IndexWrite float64 `json:"indexWriteUnits"`
	Calls      int     `json:"calls"`
}

// CheckCost is the cold-start cost of New's global-table check.
type CheckCost struct {
	CheckedP50ms   float64 `json:"checkedP50ms"`
	UncheckedP50ms float64 `json:"uncheckedP50ms"`
}

// capacityUnits measures every scenario, mode and size once: the units
// are computed from the items, so one run is the figure.
func capacityUnits(ctx context.Context, c *dynamodb.Client, table, classic string) ([]Capacity, error) {
	rows, err := capacity.Measure(ctx, c, table, classic, true)
	if err != nil {
		return nil, err
	}
	out := make([]Capacity, len(rows))
	for i, r := range rows {
		out[i] = Capacity{Mode: r.Mode, Scenario: r.Scenario, SizeBytes: r.Size, Read: r.Units.Read, Write: r.Units.Write, IndexWrite: r.Units.IndexWrite, Calls: r.Calls}
	}
	return out, nil
}

// checkCost times New with and without its global-table check.
func checkCost(c *dynamodb.Client, table string) (CheckCost, error) {
	const n = 20
	p50 := func(mode dynamostore.GlobalTables) (float64, error) {
		lat := make([]time.Duration, n)
		for i := range lat {
			start := time.Now()
			opts := dynamostore.Options{Table: table, GlobalTables: mode}
			if mode == dynamostore.GlobalTablesUnchecked {
				opts.KeySchema = dynamostore.KeySchemaByRef
			}
			if _, err := dynamostore.New(c, opts); err != nil {
				return 0, err
			}
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		return ms(lat[n/2]), nil
	}
	var cc CheckCost
	var err error
	if cc.CheckedP50ms, err = p50(dynamostore.GlobalTablesRefuseEventual); err != nil {
		return cc, err
	}
	cc.UncheckedP50ms, err = p50(dynamostore.GlobalTablesUnchecked)
	return cc, err
}

// printCapacity writes the capacity table.
func printCapacity(w io.Writer, rows []Capacity, cc CheckCost) {
	fmt.Fprintln(w, "\nDynamoDB capacity units per request, by AWS's rules from the items written (index writes included; docs/cost.md);")
	fmt.Fprintln(w, "powertools is the calls of Powertools' idempotency utility, metered alike. $ per 1M at on-demand prices (us-east-1):")
	fmt.Fprintf(w, "  %-12s %-7s %-8s %6s %6s %6s %5s %9s\n", "mode", "size", "scenario", "write", "index", "read", "calls", "$ per 1M")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-12s %-7s %-8s %6g %6g %6g %5d %9.2f\n", r.Mode, capacity.SizeName(r.SizeBytes), r.Scenario, r.Write, r.IndexWrite, r.Read, r.Calls,
			capacity.PerMillion(capacity.Units{Read: r.Read, Write: r.Write, IndexWrite: r.IndexWrite}))
	}
	fmt.Fprintf(w, "New's global-table check (one DescribeTable per cold start): p50 %.2f ms, against %.3f ms unchecked\n", cc.CheckedP50ms, cc.UncheckedP50ms)
}
