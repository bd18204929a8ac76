package goflavour

import (
	"debug/buildinfo"
	"fmt"
	"runtime/debug"
)

// Flavour is the set of go build settings that decide how every package of
// a program is compiled. Two builds of the same packages share compiled
// packages in Go's build cache only if their flavours are equal.
type Flavour struct {
	// Race is go build -race.
	Race bool
	// Trimpath is go build -trimpath.
	Trimpath bool
	// CGO is the CGO_ENABLED setting, "0" or "1"; "" leaves it to the
	// go command's default.
	CGO string
}

// Own returns the flavour of the running program. A program without build
// information gives the zero Flavour: go build's defaults.
func Own() Flavour {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return Flavour{}
	}
	return fromSettings(info.Settings)
}

// Of returns the flavour of the Go binary at path.
func Of(path string) (Flavour, error) {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return Flavour{}, fmt.Errorf("goflavour: %w", err)
	}
	return fromSettings(info.Settings), nil
}

// fromSettings reads a Flavour from a binary's build settings.
func fromSettings(settings []debug.BuildSetting) Flavour {
	var f Flavour
	for _, s := range settings {
		switch s.Key {
		case "-race":
			f.Race = s.Value == "true"
		case "-trimpath":
			f.Trimpath = s.Value == "true"
		case "CGO_ENABLED":
			f.CGO = s.Value
		}
	}
	return f
}

// Args returns the go build flags of f: -race and -trimpath where set.
func (f Flavour) Args() []string {
	var args []string
	if f.Race {
		args = append(args, "-race")
	}
	if f.Trimpath {
		args = append(args, "-trimpath")
	}
	return args
}

// Env returns the environment settings of f, to append to a go command's
// environment: CGO_ENABLED when f sets it.
func (f Flavour) Env() []string {
	if f.CGO == "" {
		return nil
	}
	return []string{"CGO_ENABLED=" + f.CGO}
}
