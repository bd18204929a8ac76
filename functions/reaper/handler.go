package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/lambda-dedupe/dedupe/pkg/dynamostore"
)

// localFunctionName is the metrics dimension when the function name is
// unknown (a run outside Lambda).
const localFunctionName = "reaper-local"

// reaperStore is what the handler needs of a *dynamostore.Store.
type reaperStore interface {
	Reap(ctx context.Context, opts dynamostore.ReapOptions) (dynamostore.ReapReport, error)
}

// handler runs one reap per invocation.
type handler struct {
	store        reaperStore
	opts         dynamostore.ReapOptions
	logger       *slog.Logger
	metrics      io.Writer
	functionName string
	now          func() time.Time
}

// newHandler returns the handler for store with settings s, logging to
// logger and writing EMF metrics to metrics under functionName.
func newHandler(store reaperStore, s settings, logger *slog.Logger, metrics io.Writer, functionName string) *handler {
	if functionName == "" {
		functionName = localFunctionName
	}
	return &handler{
		store:        store,
		opts:         dynamostore.ReapOptions{Grace: s.Grace, WarnAge: s.WarnAge, Logger: logger},
		logger:       logger,
		metrics:      metrics,
		functionName: functionName,
		now:          time.Now,
	}
}

// Handle reaps once, stopping before the invocation's deadline, emits the
// counts as metrics and returns the report as the invocation's result. The
// event (the EventBridge schedule's, or anything for a manual run) is
// ignored. A failed query or update makes the invocation fail after the
// metrics are written; whatever the run cleared stays cleared.
func (h *handler) Handle(ctx context.Context, _ json.RawMessage) (dynamostore.ReapReport, error) {
	report, err := h.store.Reap(ctx, h.opts)
	if merr := writeMetrics(h.metrics, h.functionName, h.now(), report); merr != nil {
		h.logger.ErrorContext(ctx, "reaper: metrics not written", "err", merr)
	}
	level := slog.LevelInfo
	if err != nil || report.Truncated {
		level = slog.LevelWarn
	}
	h.logger.Log(ctx, level, "reaper: run done",
		"found", report.Found, "cleared", report.Cleared, "skipped", report.Skipped,
		"errors", report.Errors, "pages", report.Pages, "items_read", report.ItemsRead,
		"truncated", report.Truncated, "shards_left", report.ShardsLeft)
	if err != nil {
		return report, fmt.Errorf("reap: %w", err)
	}
	return report, nil
}
