package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/localtest/capacity"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// Capacity is the DynamoDB capacity units of one request, by scenario and
// mode, computed by AWS's rules from the items actually written
// (localtest/capacity), as DynamoDB bills them: the meter hands a failed
// claim its existing item (ALL_OLD) on servers that do not, so no
// fallback read is counted.
type Capacity struct {
	Mode       string  `json:"mode"`
	Scenario   string  `json:"scenario"`
	Read       float64 `json:"readUnits"`
	Write      float64 `json:"writeUnits"`
	IndexWrite float64 `json:"indexWriteUnits"`
}

// CheckCost is the cold-start cost of New's global-table check.
type CheckCost struct {
	CheckedP50ms   float64 `json:"checkedP50ms"`
	UncheckedP50ms float64 `json:"uncheckedP50ms"`
}

// capacityUnits measures each scenario n times per mode and averages.
func capacityUnits(ctx context.Context, c *dynamodb.Client, table string, n int) ([]Capacity, error) {
	var out []Capacity
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, lean := range []bool{false, true} {
		mode := "default"
		if lean {
			mode = "lean"
		}
		m := capacity.New(c, capacity.DefaultSchema(), true)
		store, err := dynamostore.New(m, dynamostore.Options{Table: table, Lean: lean})
		if err != nil {
			return nil, err
		}
		// Outside Lambda a guard needs its prefix (dedupe.New refuses
		// none): the bench's, as every other scenario's.
		cfg := &dedupe.Config{Prefix: "bench"}
		h := dedupe.HTTPAPI(dedupe.New(store, cfg), nil, bare)
		measure := func(scenario string, req func(i int) events.APIGatewayV2HTTPRequest) {
			m.Reset()
			for i := range n {
				h(ctx, req(i))
			}
			u := m.Units().Div(n)
			out = append(out, Capacity{Mode: mode, Scenario: scenario, Read: u.Read, Write: u.Write, IndexWrite: u.IndexWrite})
		}
		prefix := "cu-" + mode + run
		measure("fresh", func(i int) events.APIGatewayV2HTTPRequest { return request(prefix + "-" + strconv.Itoa(i)) })
		measure("replay", func(int) events.APIGatewayV2HTTPRequest { return request(prefix + "-0") })
		// A conflict: the key is held in flight by an owner that waits
		// until the scenario is over.
		held := prefix + "-held"
		release, holding, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			dedupe.HTTPAPI(dedupe.New(store, cfg), nil, func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				close(holding)
				<-release
				return bare(ctx, request(held))
			})(ctx, request(held))
		}()
		<-holding
		measure("conflict", func(int) events.APIGatewayV2HTTPRequest { return request(held) })
		close(release)
		<-done
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
			if _, err := dynamostore.New(c, dynamostore.Options{Table: table, GlobalTables: mode}); err != nil {
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
	fmt.Fprintln(w, "\nDynamoDB capacity units per request, by AWS's rules from the items written (index writes included; docs/cost.md):")
	fmt.Fprintf(w, "  %-8s %-10s %8s %8s %8s %12s\n", "mode", "scenario", "read", "write", "index", "WRU per 1M")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-8s %-10s %8.2f %8.2f %8.2f %12.0f\n", r.Mode, r.Scenario, r.Read, r.Write, r.IndexWrite, (r.Write+r.IndexWrite)*1e6)
	}
	fmt.Fprintf(w, "New's global-table check (one DescribeTable per cold start): p50 %.2f ms, against %.3f ms unchecked\n", cc.CheckedP50ms, cc.UncheckedP50ms)
}
