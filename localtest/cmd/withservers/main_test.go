package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
)

// helperEnv makes the test binary act as the child command: it prints the
// two URLs it sees as JSON, and what answered at them, and exits with the
// code in WITHSERVERS_HELPER.
const helperEnv = "WITHSERVERS_HELPER"

func TestMain(m *testing.M) {
	if code := os.Getenv(helperEnv); code != "" {
		helper(code)
	}
	os.Exit(m.Run())
}

func helper(code string) {
	seen := map[string]string{
		"DATABASE_URL":      os.Getenv("DATABASE_URL"),
		"REDIS_URL":         os.Getenv("REDIS_URL"),
		"REDIS_CLUSTER_URL": os.Getenv("REDIS_CLUSTER_URL"),
		"PGBOUNCER_URL":     os.Getenv("PGBOUNCER_URL"),
	}
	if os.Getenv("WITHSERVERS_PING") != "" {
		seen["postgres"], seen["redis"], seen["cluster"], seen["pgbouncer"] = "down", "down", "down", "down"
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // generous: a busy machine
		defer cancel()
		if c, err := pgconn.Connect(ctx, seen["DATABASE_URL"]); err == nil {
			seen["postgres"] = "up"
			c.Close(ctx)
		}
		if alive(seen["REDIS_URL"]) {
			seen["redis"] = "up"
		}
		if c, err := redis.ParseClusterURL(seen["REDIS_CLUSTER_URL"]); err == nil {
			cc := redis.NewClusterClient(c)
			if info, err := cc.ClusterInfo(ctx).Result(); err == nil && strings.Contains(info, "cluster_state:ok") && len(c.Addrs) == 3 {
				seen["cluster"] = "up"
			}
			cc.Close()
		}
		if c, err := pgconn.Connect(ctx, seen["PGBOUNCER_URL"]); err == nil {
			seen["pgbouncer"] = "up"
			c.Close(ctx)
		}
	}
	json.NewEncoder(os.Stdout).Encode(seen)
	if code == "3" {
		os.Exit(3)
	}
	os.Exit(0)
}

// alive reports whether a TCP server accepts connections at a redis URL.
func alive(redisURL string) bool {
	u, err := url.Parse(redisURL)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
}

func TestRun(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("preset variables start nothing", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		env := append(baseEnv(), helperEnv+"=3", "DATABASE_URL=postgres://db.example/x", "REDIS_URL=redis://cache.example:6379/0",
			"REDIS_CLUSTER_URL=redis://cache.example:7000?addr=cache.example:7001", "PGBOUNCER_URL=postgres://bouncer.example/x")
		if code := run([]string{"--", self}, env, nil, &stdout, &stderr); code != 3 {
			t.Errorf("exit code: got %d, want 3 (stderr %s)", code, &stderr)
		}
		var seen map[string]string
		if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
			t.Fatalf("child output %q: %v", &stdout, err)
		}
		if seen["DATABASE_URL"] != "postgres://db.example/x" || seen["REDIS_URL"] != "redis://cache.example:6379/0" ||
			seen["REDIS_CLUSTER_URL"] != "redis://cache.example:7000?addr=cache.example:7001" || seen["PGBOUNCER_URL"] != "postgres://bouncer.example/x" {
			t.Errorf("child saw %v, want the preset URLs", seen)
		}
	})
	t.Run("unset variables start every server", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		env := append(baseEnv(), helperEnv+"=0", "WITHSERVERS_PING=1")
		if code := run([]string{"--", self}, env, nil, &stdout, &stderr); code != 0 {
			t.Fatalf("exit code: got %d, want 0 (stderr %s)", code, &stderr)
		}
		if strings.Contains(stderr.String(), "not started") {
			if os.Getenv("CI") != "" {
				t.Fatalf("servers required in CI: %s", &stderr)
			}
			t.Skip(stderr.String())
		}
		var seen map[string]string
		if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
			t.Fatalf("child output %q: %v", &stdout, err)
		}
		if seen["postgres"] != "up" || seen["redis"] != "up" || seen["cluster"] != "up" || seen["pgbouncer"] != "up" {
			t.Fatalf("child saw %v, want every server up", seen)
		}
		if !strings.Contains(seen["DATABASE_URL"], "@127.0.0.1:") || !strings.HasPrefix(seen["REDIS_URL"], "redis://127.0.0.1:") {
			t.Errorf("child saw %v, want loopback URLs", seen)
		}
		for _, name := range []string{"REDIS_URL", "REDIS_CLUSTER_URL", "PGBOUNCER_URL"} {
			if alive(seen[name]) {
				t.Errorf("%s %s still answers after run returned", name, seen[name])
			}
		}
	})
	t.Run("no command", func(t *testing.T) {
		var stderr bytes.Buffer
		if code := run(nil, baseEnv(), nil, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "usage") {
			t.Errorf("got %d %q, want 2 and usage", code, &stderr)
		}
	})
	t.Run("command not found", func(t *testing.T) {
		var stderr bytes.Buffer
		env := append(baseEnv(), "DATABASE_URL=x", "REDIS_URL=y", "REDIS_CLUSTER_URL=z", "PGBOUNCER_URL=w")
		if code := run([]string{"--", "withservers-no-such-command"}, env, nil, &bytes.Buffer{}, &stderr); code != 127 {
			t.Errorf("got %d, want 127 (stderr %s)", code, &stderr)
		}
	})
}
