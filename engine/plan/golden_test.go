package plan

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestPlanOutputsMatchGoldenFiles locks the JSON field names the UI reads and the breakdown's
// layout, for the seed's case declined under WDDM (go test ./engine/plan -update rewrites them).
func TestPlanOutputsMatchGoldenFiles(t *testing.T) {
	p := Compute(seedInput(t, true))
	js, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"seed-wddm.json": append(js, '\n'), "seed-wddm.txt": []byte(p.Breakdown())} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read golden file: %v (run go test ./engine/plan -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the plan's output:\n got:\n%s\nwant:\n%s", path, got, want)
		}
	}
}
