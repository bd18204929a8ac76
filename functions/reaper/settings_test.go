package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/lambda-dedupe/dedupe/infra"
)

func TestLoadSettings(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    settings
		wantErr bool
	}{
		{"defaults", map[string]string{"IDEMPOTENCY_TABLE": "t"},
			settings{Table: "t", Shards: 8, Grace: 30 * time.Second, WarnAge: 15 * time.Minute, Level: slog.LevelInfo}, false},
		{"all set", map[string]string{"IDEMPOTENCY_TABLE": "t", "REAPER_SHARDS": "16", "REAPER_GRACE": "1m",
			"REAPER_WARN_AGE": "1h", "LOG_LEVEL": "debug"},
			settings{Table: "t", Shards: 16, Grace: time.Minute, WarnAge: time.Hour, Level: slog.LevelDebug}, false},
		{"no table", map[string]string{}, settings{}, true},
		{"bad shards", map[string]string{"IDEMPOTENCY_TABLE": "t", "REAPER_SHARDS": "0"}, settings{}, true},
		{"bad grace", map[string]string{"IDEMPOTENCY_TABLE": "t", "REAPER_GRACE": "30"}, settings{}, true},
		{"negative warn age", map[string]string{"IDEMPOTENCY_TABLE": "t", "REAPER_WARN_AGE": "-1m"}, settings{}, true},
		{"bad level", map[string]string{"IDEMPOTENCY_TABLE": "t", "LOG_LEVEL": "LOUD"}, settings{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadSettings(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestTemplateEnvironment loads the reaper's environment as template.yaml
// sets it and checks that it parses.
func TestTemplateEnvironment(t *testing.T) {
	tpl := loadTemplate(t)
	env := infra.FunctionEnv(tpl, "ReaperFunction")
	for _, k := range []string{"IDEMPOTENCY_TABLE", "REAPER_SHARDS", "REAPER_GRACE", "REAPER_WARN_AGE", "LOG_LEVEL"} {
		if env[k] == "" {
			t.Errorf("template sets no %s for ReaperFunction", k)
		}
	}
	s, err := loadSettings(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("template environment: %v", err)
	}
	t.Logf("template settings: %+v", s)
}

func loadTemplate(t *testing.T) *infra.Template {
	t.Helper()
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := infra.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}
