package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/vulkan"
)

// TestMain lets the test binary stand in for the programs scripts/bench-gpu.sh runs: called
// through a link named vkllm it is the CLI, through one named llama-bench a fake peer.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "vkllm":
		main()
		os.Exit(0)
	case "llama-bench":
		os.Exit(fakeLlamaBench(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeLlamaBench answers like llama-bench -o json with made-up rates: one row per flash-attention
// setting, depth and test, in llama-bench's order.
// Its device line, like llama.cpp's Vulkan backend prints at start, is FAKE_LLAMA_BENCH_DEVICE
// when set.
func fakeLlamaBench(args []string) int {
	device := "Fake GPU (NVIDIA) | uma: 0 | fp16: 1 | matrix cores: NV_coopmat2"
	if d := os.Getenv("FAKE_LLAMA_BENCH_DEVICE"); d != "" {
		device = d
	}
	fmt.Fprintln(os.Stderr, "ggml_vulkan: 0 = "+device)
	if len(args) == 1 && args[0] == "--help" {
		fmt.Println("usage: llama-bench [options]")
		return 0
	}
	fs := flag.NewFlagSet("llama-bench", flag.ContinueOnError)
	model := fs.String("m", "", "")
	p, n, r := fs.Int("p", 512, ""), fs.Int("n", 128, ""), fs.Int("r", 5, "")
	d, fa := fs.String("d", "0", ""), fs.String("fa", "0", "")
	fs.Int("ngl", 99, "")
	fs.String("o", "md", "")
	if err := fs.Parse(args); err != nil || *model == "" {
		fmt.Fprintln(os.Stderr, "fake llama-bench: bad arguments", args, err)
		return 1
	}
	var rows []bench.Record
	for _, f := range strings.Split(*fa, ",") {
		v, _ := strconv.Atoi(f)
		setting := bench.FlashAttn(v)
		for _, ds := range strings.Split(*d, ",") {
			depth, _ := strconv.Atoi(ds)
			for _, test := range []struct{ p, n int }{{*p, 0}, {0, *n}} {
				if test.p+test.n == 0 {
					continue
				}
				tokens := test.p + test.n
				ts := float64(1000*(1+v)) / float64(1+depth/64) // fa1 twice fa0; slower with depth
				ns := make([]int64, *r)
				for i := range ns {
					ns[i] = int64(float64(tokens) * 1e9 / ts)
				}
				rows = append(rows, bench.Record{BuildCommit: "fake", BuildNumber: 1, GPUInfo: "Fake GPU", Backends: "Vulkan",
					ModelFile: *model, ModelType: "llama ?B Q4_0", NPrompt: test.p, NGen: test.n, NDepth: depth, FlashAttn: &setting,
					Summary: bench.Summarize(ns, tokens)})
			}
		}
	}
	out, _ := json.MarshalIndent(rows, "", "  ")
	fmt.Println(string(out))
	return 0
}

// scriptHarness skips without a Vulkan device, links this test binary into a temporary
// folder under each of names (it acts as vkllm, and as llama-bench through TestMain's fake)
// and returns the folder and a runner of scripts/<script> with the linked vkllm and lavapipe's
// pinned room, env added to the environment.
func scriptHarness(t *testing.T, script string, names ...string) (string, func(t *testing.T, env []string, args ...string) (string, string, error)) {
	t.Helper()
	devs, err := vulkan.Devices()
	if err != nil || len(devs) == 0 {
		t.Skipf("no Vulkan device here (install mesa-vulkan-drivers for lavapipe): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for _, name := range names {
		if err := os.Symlink(self, filepath.Join(tmp, name)); err != nil {
			t.Fatal(err)
		}
	}
	return tmp, func(t *testing.T, env []string, args ...string) (string, string, error) {
		cmd := exec.Command("bash", append([]string{"../../scripts/" + script}, args...)...)
		cmd.Env = append(os.Environ(), "VKLLM="+filepath.Join(tmp, "vkllm"), "VKLLM_GPU_VRAM_MB=1024", "VKLLM_DATA_DIR="+t.TempDir())
		cmd.Env = append(cmd.Env, env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
}

// The script end to end in its --quick form on lavapipe: tiny models written by synth (with
// --moe the two mixture-of-experts architectures too), vkllm's runs on the GPU, the fake peer,
// one table with every row and ratio, and the loads.
func TestBenchGPUScriptQuickRun(t *testing.T) {
	tmp, script := scriptHarness(t, "bench-gpu.sh", "vkllm", "llama-bench")
	run := func(t *testing.T, env []string, args ...string) (string, string, error) {
		return script(t, env, append([]string{"--quick", "-r", "1", "--depth-r", "1"}, args...)...)
	}

	t.Run("with a peer", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		stdout, stderr, err := run(t, nil, "--moe", "--out", out, filepath.Join(tmp, "llama-bench"))
		if err != nil {
			t.Fatalf("bench-gpu.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		for _, want := range []string{
			"| model | test | vkllm t/s | llama.cpp fa0 | llama.cpp fa1 | ratio vs best |",
			"| pp32 |", "| tg8 |", "| pp32 @ d64 |", "| tg8 @ d64 |",
			"x vs fa1 |",
			"load synth-tiny-q4_0.gguf", "load synth-tiny-q4_k.gguf",
			"load synth-qwen3moe-tiny-q4_k.gguf", "load synth-qwen35moe-tiny-q8_0.gguf", // --moe
			"peer device: ggml_vulkan: 0 = Fake GPU",
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("report lacks %q:\n%s", want, stdout)
			}
		}
		if strings.Count(stdout, "@ d64 |") != 2 {
			t.Errorf("want the depth rows of the second model only:\n%s", stdout)
		}
		if report, err := os.ReadFile(filepath.Join(out, "report.md")); err != nil || string(report) != stdout {
			t.Errorf("--out report.md differs from stdout (%v)", err)
		}
		if !strings.Contains(stderr, "load: ") || strings.Contains(stdout, "note:") {
			t.Errorf("progress lacks vkllm's load lines, or the report has a note:\n%s\n%s", stderr, stdout)
		}
	})
	t.Run("with a peer below its best", func(t *testing.T) {
		stdout, stderr, err := run(t, []string{"FAKE_LLAMA_BENCH_DEVICE=NVIDIA H200 (NVIDIA) | matrix cores: none"}, filepath.Join(tmp, "llama-bench"))
		if err != nil {
			t.Fatalf("bench-gpu.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stdout, "note: the peer's device line lacks 'matrix cores: NV_coopmat2'") {
			t.Errorf("report does not warn of a peer without its cooperative-matrix shaders:\n%s", stdout)
		}
	})
	t.Run("only the models named", func(t *testing.T) {
		stdout, stderr, err := run(t, nil, "--only", "q4_k")
		if err != nil {
			t.Fatalf("bench-gpu.sh --only q4_k: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stdout, "load synth-tiny-q4_k.gguf") || strings.Contains(stdout, "synth-tiny-q4_0") {
			t.Errorf("--only q4_k: want the tiny Q4_K alone:\n%s", stdout)
		}
		if _, stderr, err := run(t, nil, "--only", "no-such-model"); err == nil || !strings.Contains(stderr, "--only no-such-model matches none of the models") {
			t.Errorf("--only matching nothing: err %v, stderr:\n%s", err, stderr)
		}
	})
	t.Run("without a peer", func(t *testing.T) {
		stdout, stderr, err := run(t, nil)
		if err != nil {
			t.Fatalf("bench-gpu.sh without llama-bench: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stdout, "no llama-bench given: only vkllm's side ran") || !strings.Contains(stdout, "| tg8 @ d64 |") ||
			strings.Contains(stdout, "llama.cpp fa") {
			t.Errorf("report without a peer:\n%s", stdout)
		}
	})
}

// scripts/ab-gpu.sh on lavapipe: one tiny model under two sets of switches, every test row
// (pp and tg) of every set in every round, then the means; a set that is not VKLLM_*
// assignments is refused before anything runs.
func TestABGPUScriptTimesEverySetAndTest(t *testing.T) {
	tmp, script := scriptHarness(t, "ab-gpu.sh", "vkllm")
	model := modeltest.TinySynth(t, tmp, "llama", quant.Q4_0, 1)
	run := func(args ...string) (string, string, error) { return script(t, nil, args...) }
	stdout, stderr, err := run("-p", "8", "-n", "4", "-r", "1", "--rounds", "2", model, "-", "VKLLM_GPU_X8=0")
	if err != nil {
		t.Fatalf("ab-gpu.sh: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	for _, round := range []string{"1", "2"} {
		for _, set := range []string{"-", "VKLLM_GPU_X8=0"} {
			for _, test := range []string{"pp8", "tg4"} {
				prefix := fmt.Sprintf("| %s | %s | %s | ", round, set, test)
				line := ""
				for _, l := range strings.Split(stdout, "\n") {
					if strings.HasPrefix(l, prefix) {
						line = l
					}
				}
				rate, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimPrefix(line, prefix), " |"), 64)
				if !(rate > 0) {
					t.Errorf("no rate for round %s, set %s, %s (line %q):\n%s", round, set, test, line, stdout)
				}
			}
		}
	}
	for _, want := range []string{"| - | pp8 | ", "| VKLLM_GPU_X8=0 | tg4 | "} {
		if !strings.Contains(stdout, want) || !strings.Contains(stdout, " | 2 |") {
			t.Errorf("the means lack %q over 2 rounds:\n%s", want, stdout)
		}
	}
	if _, stderr, err := run(model, "-", "GPU_X8=0"); err == nil || !strings.Contains(stderr, "VKLLM_*=value") {
		t.Errorf("a set without VKLLM_ variables ran (%v): %s", err, stderr)
	}
}
