package infra_test

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// TestSAMBuildTargets runs the Makefile targets that `sam build` calls
// (Metadata: BuildMethod: makefile) and checks that each produces what the
// provided.al2023 arm64 runtime loads: a static linux/arm64 ELF named
// bootstrap, built without cgo, with -tags lambda.norpc and -trimpath.
func TestSAMBuildTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries for linux/arm64")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make not found: %v", err)
	}
	path, err := infra.FindTemplate()
	if err != nil {
		t.Fatalf("FindTemplate: %v", err)
	}
	root := filepath.Dir(path)
	tmpl, err := infra.Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	fns, err := infra.Functions(tmpl)
	if err != nil {
		t.Fatalf("Functions: %v", err)
	}
	if len(fns) == 0 {
		t.Fatal("template declares no functions")
	}
	for _, fn := range fns {
		t.Run(fn.LogicalID, func(t *testing.T) {
			if fn.BuildMethod != "makefile" {
				t.Fatalf("BuildMethod = %q, want makefile", fn.BuildMethod)
			}
			artifacts := t.TempDir()
			cmd := exec.Command("make", "-s", "-C", root, "build-"+fn.LogicalID)
			// As sam build runs it: the flags of a make that runs this
			// test (make test, make -n test) must not reach it.
			cmd.Env = infra.MakeBuildEnv(os.Environ(), artifacts)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("make build-%s: %v\n%s", fn.LogicalID, err, out)
			}
			bin := filepath.Join(artifacts, "bootstrap")
			checkLambdaBinary(t, bin)
			if st, err := os.Stat(bin); err == nil {
				t.Logf("%s bootstrap: %.1f MiB", fn.LogicalID, float64(st.Size())/(1<<20))
			}
		})
	}
}

func checkLambdaBinary(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("open %s as ELF: %v", bin, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Class != elf.ELFCLASS64 {
		t.Errorf("ELF machine = %v %v, want EM_AARCH64 ELFCLASS64", f.Machine, f.Class)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %v present: binary is dynamically linked, want static", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("imported libraries = %v, want none", libs)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("read build info: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	want := map[string]string{
		"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0",
		"-tags": "lambda.norpc", "-trimpath": "true",
	}
	for k, v := range want {
		if settings[k] != v {
			t.Errorf("build setting %s = %q, want %q", k, settings[k], v)
		}
	}
	// -trimpath keeps -ldflags out of the build info; a stripped binary
	// (-s -w) has neither a symbol table nor DWARF sections.
	for _, name := range []string{".symtab", ".debug_info"} {
		if f.Section(name) != nil {
			t.Errorf("section %s present, want a stripped binary (-ldflags '-s -w')", name)
		}
	}
}
