package plan

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCoreImportsOnlyTheStandardLibrary keeps the plan a pure core: no cgo, no gguf, vulkan or
// store, so the UI can run it as WebAssembly.
func TestCoreImportsOnlyTheStandardLibrary(t *testing.T) {
	gotool := goTool(t)
	cmd := exec.Command(gotool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep != "github.com/vkllm/vkllm/engine/plan" {
			t.Errorf("engine/plan depends on %s; the core may import only the standard library", dep)
		}
	}
}

// TestCoreBuildsForWebAssembly compiles the package for js/wasm. The first run compiles the
// standard library for wasm (tens of seconds on a small machine; cached after), so -short skips it.
func TestCoreBuildsForWebAssembly(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the js/wasm build compiles the standard library for wasm on a cold cache")
	}
	gotool := goTool(t)
	cmd := exec.Command(gotool, "build", "-o", filepath.Join(t.TempDir(), "plan.a"), ".")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=js GOARCH=wasm go build ./engine/plan: %v\n%s", err, out)
	}
}

func goTool(t *testing.T) string {
	t.Helper()
	name := "go"
	if runtime.GOOS == "windows" {
		name = "go.exe"
	}
	p := filepath.Join(runtime.GOROOT(), "bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on this machine to build the package with")
	}
	return p
}
