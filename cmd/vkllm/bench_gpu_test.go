package main

import (
	"context"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/store"
)

// On lavapipe in CI: a tiny bench on the GPU runs end to end and lands in SQLite with every
// field filled, the device and the plan included.
func TestBenchOnTheGPURecordsDeviceAndPlan(t *testing.T) {
	devs, err := vulkan.Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no Vulkan device here (install mesa-vulkan-drivers for lavapipe): %v", err)
	}
	dir := t.TempDir()
	t.Setenv("VKLLM_DATA_DIR", dir)
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024") // lavapipe's 2 GiB heap leaves nothing after the 2 GiB reserve
	out, err := captureStdout(t, func() error {
		return runBench(context.Background(), []string{"--gpu", "-p", "16", "-n", "8", "-r", "2", "-o", "json"})
	})
	if err != nil {
		t.Fatalf("bench --gpu: %v", err)
	}
	records, err := bench.ParseLlamaBench(strings.NewReader(out))
	if err != nil || len(records) != 2 {
		t.Fatalf("bench output: %v\n%s", err, out)
	}
	for _, r := range records {
		if r.Backends != "Vulkan" || r.Placement != "resident" || r.GPUInfo == "" || r.AvgTs <= 0 {
			t.Errorf("record %s: backend %q placement %q gpu %q t/s %.1f", r.TestName(), r.Backends, r.Placement, r.GPUInfo, r.AvgTs)
		}
	}
	// the resident driver's tg is a greedy generation, chained unless VKLLM_GPU_CHAIN=0
	wantDecode := bench.DecodeGreedyChained
	if !config.GPUChain.Bool() {
		wantDecode = bench.DecodeGreedy
	}
	if records[0].Decode != "" || records[1].Decode != wantDecode {
		t.Errorf("decode: pp %q, tg %q; want \"\" and %q", records[0].Decode, records[1].Decode, wantDecode)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("history: %d runs, %v", len(runs), err)
	}
	for _, r := range runs {
		checks := map[string]bool{
			"status ok":      r.Status == store.BenchOK,
			"backend":        r.Backend == "vulkan",
			"gpu key":        r.GPUKey != "" && r.GPUKey == devs[0].Key(),
			"gpu name":       r.GPUName != "",
			"gpu vendor id":  r.GPUVendorID != 0,
			"gpu uuid":       r.GPUUUID != "",
			"driver":         r.DriverName != "" && r.DriverVersion != "",
			"vulkan api":     r.VulkanAPI != "",
			"machine":        r.Hostname != "" && r.OS != "" && r.CPU != "" && r.RAMBytes > 0,
			"engine version": r.EngineVersion != "",
			"model":          r.ModelFile != "" && r.ModelArch == "llama" && r.ModelQuant != "" && r.ModelParams > 0 && r.ModelSize > 0,
			"context":        r.Context > 0,
			"placement":      r.Placement == "resident",
			"plan verdict":   strings.HasPrefix(r.PlanVerdict, "resident driver armed"),
			"plan source":    r.PlanSource != "",
			"plan pin":       r.PlanPinMB == 1024,
			"reps":           r.Reps == 2 && r.Warmup >= 2 && r.Warmup <= 5, // a GPU warms until its runs are steady: at least twice, the first run being the pipelines' creation
			"samples":        len(r.Samples) == 2 && r.Samples[1].Ns > 0,
			"mean":           r.AvgTS > 0 && r.AvgNs > 0,
		}
		if r.NPrompt > 0 && r.TTFTNs <= 0 {
			t.Errorf("run %s: TTFT not filled", r.Test)
		}
		for name, ok := range checks {
			if !ok {
				t.Errorf("run %s: %s not filled: %+v", r.Test, name, r)
			}
		}
	}
}

// On lavapipe: tests at depth run on the resident driver (its cache rewinds to the fill for
// every repetition), and a context the plan bounded below the depth is refused with the numbers.
func TestBenchAtDepthOnTheGPU(t *testing.T) {
	devs, err := vulkan.Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no Vulkan device here (install mesa-vulkan-drivers for lavapipe): %v", err)
	}
	t.Setenv("VKLLM_DATA_DIR", t.TempDir())
	t.Setenv("VKLLM_GPU_VRAM_MB", "1024")
	var out string
	stderr, err := captureStderr(t, func() error {
		var err error
		out, err = captureStdout(t, func() error {
			return runBench(context.Background(), []string{"--gpu", "-p", "8", "-n", "4", "-r", "1", "-d", "40", "-o", "jsonl", "--no-save"})
		})
		return err
	})
	if err != nil {
		t.Fatalf("bench --gpu -d 40: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "GB/s) to resident") {
		t.Errorf("stderr lacks the load line to resident:\n%s", stderr)
	}
	records, err := bench.ParseLlamaBench(strings.NewReader(out))
	if err != nil || len(records) != 2 || records[0].TestName() != "pp8 @ d40" || records[1].TestName() != "tg4 @ d40" {
		t.Fatalf("records %+v, %v", records, err)
	}
	for _, r := range records {
		if r.Placement != "resident" || r.NDepth != 40 || r.AvgTs <= 0 || r.LoadGBps <= 0 {
			t.Errorf("record %s: placement %q depth %d t/s %.1f load %.3f GB/s", r.TestName(), r.Placement, r.NDepth, r.AvgTs, r.LoadGBps)
		}
	}

	t.Setenv("VKLLM_GPU_CTX_MAX", "32")
	err = runBench(context.Background(), []string{"--gpu", "-p", "8", "-n", "4", "-r", "1", "-d", "40", "--no-save"})
	if err == nil {
		t.Fatal("a plan bounded to 32 positions ran tests that need 48")
	}
	for _, want := range []string{"pp8 @ d40 needs 48 positions", "holds 32", "lower -d"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
