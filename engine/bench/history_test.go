package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

func syntheticTarget() Target {
	return Target{
		Model:       engine.ModelInfo{Name: "m.gguf", Path: "/models/m.gguf", Arch: "llama", Params: 7e9, FileSize: 4 << 30, Quant: "Q4_K", Context: 640, Layers: 32, Backend: "vulkan", Placement: "resident"},
		ModelFile:   "/models/m.gguf",
		ModelSHA256: "abc123",
		ModelType:   "llama 7B Q4_K",
		Backend:     "Vulkan",
		GPU: &vulkan.DeviceInfo{Name: "Test GPU", VendorID: 0x10de, DeviceID: 0x2335, UUID: "00112233445566778899aabbccddeeff",
			DriverName: "NVIDIA", DriverInfo: "580.1", APIVersion: "1.4.312"},
		Machine:       store.Machine{Hostname: "box", OS: "linux/amd64", Kernel: "6.12", CPU: "Test CPU", RAMBytes: 64 << 30},
		Threads:       16,
		EngineVersion: "v0.1.0",
		EngineCommit:  "deadbeef",
		Plan:          &PlanFacts{Verdict: "resident driver armed (32 layers)", Armed: true, HeadroomBytes: 2 << 30, Source: "budget", PinMB: 0},
	}
}

func TestHistoryRunsFillEveryFieldOfAFinishedRun(t *testing.T) {
	tg := syntheticTarget()
	rec := Record{NPrompt: 512, Reps: 2, Warmup: 1, TestTime: "2026-01-02T03:04:05Z", Summary: Summarize([]int64{1e9, 2e9}, 512)}
	rec.TTFTMs = 1500
	tg.Fill(&rec)
	runs := HistoryRuns([]Record{rec}, tg, Config{NPrompt: 512, Reps: 2}, nil, time.Now())
	if len(runs) != 1 {
		t.Fatalf("%d rows, want 1", len(runs))
	}
	r := runs[0]
	checks := map[string]bool{
		"status":  r.Status == store.BenchOK && r.Source == "vkllm",
		"gpu":     r.GPUName == "Test GPU" && r.GPUKey == tg.GPU.Key() && r.GPUVendorID == 0x10de && r.GPUDeviceID == 0x2335 && r.GPUUUID != "",
		"driver":  r.DriverName == "NVIDIA" && r.DriverVersion == "580.1" && r.VulkanAPI == "1.4.312",
		"machine": r.Hostname == "box" && r.OS != "" && r.Kernel == "6.12" && r.CPU == "Test CPU" && r.RAMBytes > 0 && r.Threads == 16,
		"engine":  r.EngineVersion == "v0.1.0" && r.EngineCommit == "deadbeef",
		"model":   r.ModelFile == "/models/m.gguf" && r.ModelSHA256 == "abc123" && r.ModelArch == "llama" && r.ModelParams == 7e9 && r.ModelQuant == "Q4_K" && r.ModelSize == 4<<30,
		"plan": r.Context == 640 && r.Placement == "resident" && r.PlanVerdict == "resident driver armed (32 layers)" &&
			r.PlanHeadroomBytes == 2<<30 && r.PlanSource == "budget" && r.Backend == "vulkan",
		"test":     r.Test == "pp512" && r.Reps == 2 && r.Warmup == 1,
		"samples":  len(r.Samples) == 2 && r.Samples[1].Ns == 2e9 && r.Samples[1].TokensPerSec == 256,
		"summary":  r.AvgTS == 384 && r.StddevTS > 0 && r.TTFTNs == 1500e6,
		"time":     r.CreatedAtMs == time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli(),
		"gpu type": rec.NGPULayers == 33 && rec.GPUInfo == "Test GPU" && rec.Backends == "Vulkan",
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s not filled right: %+v", name, r)
		}
	}
}

func TestHistoryRunsRecordTheUnfinishedTestWithItsStatus(t *testing.T) {
	tg := syntheticTarget()
	pp := Record{NPrompt: 64, Summary: Summarize([]int64{1e6}, 64)}
	tg.Fill(&pp)
	started := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		finished []Record
		err      error
		status   string
		test     string
	}{
		{"cancelled during tg", []Record{pp}, fmt.Errorf("tg32: %w", ErrCancelled), store.BenchCancelled, "tg32"},
		{"context ended during pp", nil, fmt.Errorf("engine bench: %w", context.Canceled), store.BenchCancelled, "pp64"},
		{"failed during pp", nil, errors.New("prefill 64 tokens: device lost"), store.BenchFailed, "pp64"},
		{"failed at depth", []Record{pp, pp}, errors.New("fill the cache to depth 4096: device lost"), store.BenchFailed, "pp64 @ d4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := HistoryRuns(tc.finished, tg, Config{NPrompt: 64, NGen: 32, Reps: 3, Depths: []int{0, 4096}}, tc.err, started)
			if len(runs) != len(tc.finished)+1 {
				t.Fatalf("%d rows, want %d", len(runs), len(tc.finished)+1)
			}
			last := runs[len(runs)-1]
			if last.Status != tc.status || last.Test != tc.test || last.Error != tc.err.Error() || last.Reps != 3 {
				t.Errorf("unfinished row %+v, want status %s test %s", last, tc.status, tc.test)
			}
			if last.GPUKey == "" || last.ModelSHA256 == "" || last.CreatedAtMs != started.UnixMilli() {
				t.Errorf("unfinished row lacks the target's context: %+v", last)
			}
		})
	}
}

func TestStoreRunKeepsAnImportedRowToItsOwnFacts(t *testing.T) {
	peer := Record{Tool: "llama-bench", GPUInfo: "Test GPU", Backends: "Vulkan", ModelFile: "/peer/m.gguf", NGen: 128, Summary: Summarize([]int64{2e9}, 128)}
	r := StoreRun(peer, syntheticTarget(), store.BenchOK, "")
	if r.Source != "llama-bench" || r.GPUName != "Test GPU" || r.Test != "tg128" || r.AvgTS != 64 {
		t.Errorf("imported row %+v", r)
	}
	if r.Hostname != "" || r.GPUKey != "" || r.ModelSHA256 != "" || r.EngineVersion != "" {
		t.Errorf("imported row took our machine's facts: %+v", r)
	}
}

func TestDescribeTargetOfTheEmbeddedModelOnTheCPU(t *testing.T) {
	tg := DescribeTarget(engine.ModelInfo{Name: "stories260K.gguf", Arch: "llama", Params: 292e3, Quant: "Q8_0", Backend: "cpu"}, TargetOptions{DeviceIndex: -1, Threads: 3, EngineVersion: "v9"})
	if tg.ModelFile != "embedded:stories260K.gguf" || len(tg.ModelSHA256) != 64 || tg.Backend != "CPU" || tg.GPU != nil ||
		tg.Threads != 3 || tg.EngineVersion != "v9" || tg.ModelType != "llama 292K Q8_0" || tg.Machine.Hostname == "" {
		t.Errorf("target %+v", tg)
	}
}

func TestModelChecksumIsCachedUntilTheFileChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := cachedSHA256(path)
	if err != nil || first != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("sha256 of abc: %q, %v", first, err)
	}
	if err := os.WriteFile(path, []byte("abcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	second, err := cachedSHA256(path)
	if err != nil || second == first {
		t.Errorf("after the file changed: %q, %v; want a new checksum", second, err)
	}
	if _, err := cachedSHA256(filepath.Join(t.TempDir(), "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
}

func TestLoadTimeAndDepthReachRecordsAndHistory(t *testing.T) {
	tg := syntheticTarget()
	tg.LoadNs = 2e9 // 4 GiB in 2 s
	rec := Record{NGen: 128, NDepth: 4096, Reps: 1, Summary: Summarize([]int64{1e9}, 128), Decode: DecodeGreedyChained}
	tg.Fill(&rec)
	if rec.LoadMs != 2000 || rec.LoadGBps != float64(4<<30)/2e9 {
		t.Errorf("filled load %.1f ms at %.3f GB/s, want 2000 ms at %.3f", rec.LoadMs, rec.LoadGBps, float64(4<<30)/2e9)
	}
	run := StoreRun(rec, tg, store.BenchOK, "")
	if run.Test != "tg128 @ d4096" || run.NDepth != 4096 || run.LoadNs != 2e9 || run.Decode != DecodeGreedyChained {
		t.Errorf("history row test %q depth %d load %d ns decode %q", run.Test, run.NDepth, run.LoadNs, run.Decode)
	}
	if back := RecordOf(run); back.Decode != DecodeGreedyChained {
		t.Errorf("the history row exports decode %q, want %q", back.Decode, DecodeGreedyChained)
	}
	untimed := syntheticTarget()
	var plain Record
	untimed.Fill(&plain)
	if plain.LoadMs != 0 || plain.LoadGBps != 0 {
		t.Errorf("a target without a timed load filled %.1f ms, %.2f GB/s", plain.LoadMs, plain.LoadGBps)
	}

	// llama-bench's own n_depth comes through an import.
	peer, err := ParseLlamaBench(strings.NewReader(`{"n_prompt": 0, "n_gen": 128, "n_depth": 4096, "avg_ts": 234.5, "flash_attn": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	imported := StoreRun(peer[0], Target{}, store.BenchOK, "")
	if imported.Source != "llama-bench" || imported.Test != "tg128 @ d4096" || imported.NDepth != 4096 || imported.AvgTS != 234.5 {
		t.Errorf("imported row %+v", imported)
	}
}
