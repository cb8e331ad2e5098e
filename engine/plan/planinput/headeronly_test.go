package planinput

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/quant"
)

// TestPlanFromAHeaderOnlyOrCutFile cuts a model written by our GGUF writer at several offsets:
// a file that keeps its whole header (metadata and tensor infos) plans exactly as the whole file
// does and says it is header only, loading refuses it naming the cut; a file cut inside its
// header is refused by planning too, naming where.
func TestPlanFromAHeaderOnlyOrCutFile(t *testing.T) {
	whole := modeltest.TinySynth(t, "", "qwen3", quant.Q8_0, 1)
	b, err := os.ReadFile(whole)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := gguf.Open(whole)
	if err != nil {
		t.Fatal(err)
	}
	dataAt := int(wf.DataOffset)
	last := wf.Tensors[len(wf.Tensors)-1]
	infoAt := bytes.LastIndex(b[:dataAt], []byte(last.Name)) // inside the last tensor info
	keyAt := bytes.Index(b, []byte(gguf.KeyArchitecture))    // inside a metadata key
	wantPlan := planJSON(t, wf)
	wf.Close()
	if infoAt < 0 || keyAt < 0 {
		t.Fatalf("the test file lacks %q or %q", last.Name, gguf.KeyArchitecture)
	}

	cases := []struct {
		name    string
		cut     int
		planned bool   // OpenHeader and the plan succeed
		inErr   string // a piece of OpenHeader's error when not
	}{
		{"whole file", len(b), true, ""},
		{"one byte short", len(b) - 1, true, ""},
		{"half the weights", dataAt + (len(b)-dataAt)/2, true, ""},
		{"header only, up to the data", dataAt, true, ""},
		{"header only, without the alignment padding", infoAt + len(last.Name) + 4 + 8*len(last.Dims) + 4 + 8, true, ""},
		{"inside the last tensor info", infoAt + 2, false, "ends inside its header"},
		{"inside a metadata key", keyAt + 5, false, "ends inside its header"},
		{"inside the version", 6, false, "ends inside its header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cut.gguf")
			if err := os.WriteFile(path, b[:c.cut], 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.OpenHeader(path)
			if !c.planned {
				if err == nil {
					f.Close()
					t.Fatalf("OpenHeader of a file cut at %d of %d bytes succeeded", c.cut, len(b))
				}
				if !errors.Is(err, gguf.ErrTruncated) || !strings.Contains(err.Error(), c.inErr) || !strings.Contains(err.Error(), "download") {
					t.Fatalf("OpenHeader error %q: want ErrTruncated saying %q and what to do", err, c.inErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("OpenHeader of a file cut at %d of %d bytes (data from %d): %v", c.cut, len(b), dataAt, err)
			}
			defer f.Close()
			partial := c.cut < len(b)
			if f.Complete() == partial || (f.MissingBytes > 0) != partial {
				t.Fatalf("cut at %d of %d: Complete %v, MissingBytes %d", c.cut, len(b), f.Complete(), f.MissingBytes)
			}
			if partial && !strings.Contains(f.Summary(), "header only") {
				t.Fatalf("summary %q does not say header only", f.Summary())
			}
			got := planJSON(t, f)
			if partial {
				got = strings.Replace(got, `,"header_only":true`, "", 1)
			}
			if got != wantPlan {
				t.Fatalf("the plan of the cut file differs from the whole file's:\n got %s\nwant %s", got, wantPlan)
			}
			if !partial {
				return
			}
			_, err = gguf.Open(path)
			if !errors.Is(err, gguf.ErrTensorRange) || !strings.Contains(err.Error(), "cut short") {
				t.Fatalf("Open (for loading) of the cut file: %v, want ErrTensorRange saying it is cut short", err)
			}
		})
	}
}

// planJSON plans f on a fixed 8 GiB card with the model's name made path-independent.
func planJSON(t *testing.T, f *gguf.File) string {
	t.Helper()
	in, err := Input(f, plan.Device{Name: "test GPU", HeapBytes: 8 << 30}, plan.Pin{}, plan.CtxRequest{Requested: 512})
	if err != nil {
		t.Fatalf("plan input: %v", err)
	}
	if !f.Complete() != in.Model.HeaderOnly {
		t.Fatalf("plan model header_only %v for a file missing %d bytes", in.Model.HeaderOnly, f.MissingBytes)
	}
	in.Model.Name = "m"
	out, err := json.Marshal(plan.Compute(in))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
