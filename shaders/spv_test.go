package shaders

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedSPIRVIsCurrent recompiles every .comp and compares it with the committed
// SPIR-V. It needs a current glslc: $GLSLC or the one get-glslc.sh put in .tools/vk.
func TestCommittedSPIRVIsCurrent(t *testing.T) {
	glslc := os.Getenv("GLSLC")
	if glslc == "" {
		glslc, _ = filepath.Abs("../.tools/vk/bin/glslc")
	}
	if _, err := os.Stat(glslc); err != nil {
		t.Skipf("no current glslc at %s (run ../shared/tools/get-glslc.sh .tools/vk or set GLSLC): %v", glslc, err)
	}
	cmd := exec.Command("sh", "gen.sh", "--check")
	cmd.Env = append(os.Environ(), "GLSLC="+glslc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gen.sh --check: %v\n%s", err, out)
	}
}

func TestEverySourceHasEmbeddedSPIRV(t *testing.T) {
	srcs, err := filepath.Glob("*.comp")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no .comp sources found (%v)", err)
	}
	names, err := Names()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	for _, s := range srcs {
		n := strings.TrimSuffix(s, ".comp")
		if !have[n] {
			t.Errorf("%s has no embedded spv/%s.spv", s, n)
		}
		code, err := SPIRV(n)
		if err == nil && (len(code) < 20 || code[0] != 0x03 || code[1] != 0x02 || code[2] != 0x23 || code[3] != 0x07) {
			t.Errorf("spv/%s.spv does not start with the SPIR-V magic", n)
		}
	}
	if _, err := SPIRV("no-such-shader"); err == nil {
		t.Error("a missing shader returned no error")
	}
}
