package dedupeotel_test

import (
	"context"
	"strconv"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
	"github.com/lambda-dedupe/dedupe/pkg/dedupe/dedupeotel"
	"github.com/lambda-dedupe/dedupe/pkg/memstore"
)

// BenchmarkGuard measures what the package adds to a guarded call on
// memstore (a fresh key each time: claim, run, complete): "none" is the
// guard without a Tracer or Metrics, "noop" the Telemetry over no-op
// providers (what a function pays with OpenTelemetry wired but disabled),
// "sdk" over the SDK's providers, sampling every span, with nothing
// exported. docs/opentelemetry.md states the figures.
func BenchmarkGuard(b *testing.B) {
	noop, err := dedupeotel.New(&dedupeotel.Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	if err != nil {
		b.Fatal(err)
	}
	sdk, err := dedupeotel.New(&dedupeotel.Config{
		TracerProvider: sdktrace.NewTracerProvider(),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tel  *dedupeotel.Telemetry
	}{{"none", nil}, {"noop", noop}, {"sdk", sdk}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := &dedupe.Config{Prefix: "bench"}
			if tc.tel != nil {
				cfg.Tracer, cfg.Metrics = tc.tel, tc.tel
			}
			g := dedupe.New(memstore.New(), cfg)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := g.Do(ctx, dedupe.Call{Key: strconv.Itoa(i), Fingerprint: "fp"}, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
