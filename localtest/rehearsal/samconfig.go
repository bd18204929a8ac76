package rehearsal

import (
	"fmt"
	"os"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// SAMConfig is what the rehearsal reads from samconfig.toml's default
// environment.
type SAMConfig struct {
	// StackName is the stack's name (global, deploy or delete parameters).
	StackName string
	// BuildInSource is build's build_in_source.
	BuildInSource bool
	// S3Prefix is deploy's s3_prefix.
	S3Prefix string
	// Capabilities is deploy's capabilities, split on spaces.
	Capabilities []string
	// Parameters is deploy's parameter_overrides (Name=Value pairs).
	Parameters map[string]string
}

// samconfigFile is the subset of samconfig.toml (version 0.1) the
// rehearsal reads.
type samconfigFile struct {
	Default map[string]struct {
		Parameters map[string]any `toml:"parameters"`
	} `toml:"default"`
}

// LoadSAMConfig reads the default environment of the samconfig.toml at
// path.
func LoadSAMConfig(path string) (SAMConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return SAMConfig{}, fmt.Errorf("read samconfig: %w", err)
	}
	var f samconfigFile
	if err := toml.Unmarshal(data, &f); err != nil {
		return SAMConfig{}, fmt.Errorf("parse %s: %w", path, err)
	}
	get := func(cmd, key string) any { return f.Default[cmd].Parameters[key] }
	str := func(cmd, key string) string { s, _ := get(cmd, key).(string); return s }
	c := SAMConfig{Parameters: map[string]string{}}
	for _, cmd := range []string{"global", "deploy"} {
		if s := str(cmd, "stack_name"); s != "" {
			c.StackName = s
		}
	}
	c.BuildInSource, _ = get("build", "build_in_source").(bool)
	c.S3Prefix = str("deploy", "s3_prefix")
	c.Capabilities = strings.Fields(str("deploy", "capabilities"))
	for _, kv := range strings.Fields(str("deploy", "parameter_overrides")) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return SAMConfig{}, fmt.Errorf("%s: parameter_overrides %q: want Name=Value", path, kv)
		}
		c.Parameters[k] = strings.Trim(v, `"`)
	}
	if c.StackName == "" {
		return SAMConfig{}, fmt.Errorf("%s: no stack_name in the default environment", path)
	}
	return c, nil
}
