package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/plan"
)

// seedInput is the seed's 8B llama shape (32 layers, dim 4096, 8 KV heads) at about 12 bits a
// weight (the seed's 11 GB of weights), planned on dev with pin and a requested context.
func seedInput(t *testing.T, dev plan.Device, pin plan.Pin, ctx int) plan.Input {
	t.Helper()
	m := plan.Model{Name: "seed", Arch: "llama", Layers: 32, Embd: 4096, FF: 14336, Heads: 32, HeadsKV: 8,
		HeadDimK: 128, HeadDimV: 128, Vocab: 32000, CtxLength: 32768}
	q := func(n uint64) int64 { return int64(n * 3 / 2) } // 12 bits a weight
	specs := []plan.TensorSpec{{Name: "token_embd.weight", Type: "Q4_K", Dims: []uint64{4096, 32000}, Size: q(4096 * 32000)}}
	for l := range m.Layers {
		blk := func(name string, rows, cols uint64, typ string, size int64) {
			specs = append(specs, plan.TensorSpec{Name: fmt.Sprintf("blk.%d.%s", l, name), Type: typ, Dims: []uint64{cols, rows}, Size: size})
		}
		blk("attn_norm.weight", 1, 4096, "F32", 4096*4)
		blk("attn_q.weight", 4096, 4096, "Q4_K", q(4096*4096))
		blk("attn_k.weight", 1024, 4096, "Q4_K", q(1024*4096))
		blk("attn_v.weight", 1024, 4096, "Q6_K", q(1024*4096))
		blk("attn_output.weight", 4096, 4096, "Q4_K", q(4096*4096))
		blk("ffn_norm.weight", 1, 4096, "F32", 4096*4)
		blk("ffn_gate.weight", 14336, 4096, "Q4_K", q(14336*4096))
		blk("ffn_up.weight", 14336, 4096, "Q4_K", q(14336*4096))
		blk("ffn_down.weight", 4096, 14336, "Q6_K", q(4096*14336))
	}
	specs = append(specs,
		plan.TensorSpec{Name: "output_norm.weight", Type: "F32", Dims: []uint64{4096}, Size: 4096 * 4},
		plan.TensorSpec{Name: "output.weight", Type: "Q6_K", Dims: []uint64{4096, 32000}, Size: q(4096 * 32000)})
	ups, err := plan.UploadList(specs)
	if err != nil {
		t.Fatalf("upload list: %v", err)
	}
	return plan.Input{Model: m, Uploads: ups, KV: plan.KVFor(m), Scratch: plan.ScratchFor(m), Device: dev, Pin: pin,
		Ctx: plan.CtxRequest{Requested: ctx}}
}

type planCase struct {
	name      string
	in        plan.Input
	wantRule  string // the headroom rule the plan must name
	wantArmed bool
}

func planCases(t *testing.T) []planCase {
	const mib = plan.MiB
	linux16 := plan.Device{Name: "Linux 16303 MiB card", HeapBytes: 16303 * mib, MaxStorageBufferRange: 1<<32 - 1}
	wddm := plan.Device{Name: "WDDM 16 GiB card", HeapBytes: 16303 * mib, MaxStorageBufferRange: 1<<32 - 1, WDDM: true}
	budget := plan.Device{Name: "card with a budget", HeapBytes: 24 << 30, BudgetReported: true, BudgetBytes: 23 << 30, UsageBytes: 900 * mib, MaxStorageBufferRange: 1<<32 - 1}
	return []planCase{
		{"a 16303 MiB Linux card with no budget keeps the 2 GiB floor", seedInput(t, linux16, plan.Pin{}, 8192), plan.RuleFloor, true},
		{"the same card at the model's 32768 context re-plans lower", seedInput(t, linux16, plan.Pin{}, 0), plan.RuleFloor, true},
		{"a WDDM card keeps 27% of the cap", seedInput(t, wddm, plan.Pin{}, 39584), plan.RuleWDDMShare, false},
		{"a card pinned at 6000 MB declines and splits", seedInput(t, linux16, plan.Pin{MB: 6000, Source: plan.PinFlag}, 4096), plan.RulePinned, false},
		{"a card pinned high arms with no headroom", seedInput(t, linux16, plan.Pin{MB: 15000, Source: plan.PinStore}, 4096), plan.RulePinned, true},
		{"a budget-reporting card keeps the budget margin", seedInput(t, budget, plan.Pin{}, 16384), plan.RuleBudget, true},
	}
}

// TestPlanJSONEqualsComputeForTheSameInput: the page's plan is plan.Compute's JSON, byte for byte.
func TestPlanJSONEqualsComputeForTheSameInput(t *testing.T) {
	for _, c := range planCases(t) {
		t.Run(c.name, func(t *testing.T) {
			input, err := json.Marshal(c.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := planJSON(input)
			if err != nil {
				t.Fatalf("planJSON: %v", err)
			}
			p := plan.Compute(c.in)
			want, err := p.JSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("planJSON differs from plan.Compute:\n got %s\nwant %s", got, want)
			}
			if p.Headroom.Rule != c.wantRule || p.Verdict.Armed != c.wantArmed {
				t.Fatalf("plan: headroom %q armed %v (%s), want %q armed %v", p.Headroom.Rule, p.Verdict.Armed, p.Verdict.Text, c.wantRule, c.wantArmed)
			}
		})
	}
}

func TestPlanJSONRefusesABadInputByName(t *testing.T) {
	good, err := json.Marshal(seedInput(t, plan.Device{HeapBytes: 8 << 30}, plan.Pin{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	for _, c := range []struct {
		name, want string
		input      []byte
	}{
		{"not JSON", "decode plan input", []byte("{")},
		{"an unknown field", `unknown field "heap_mb"`, edit(func(m map[string]any) { m["device"].(map[string]any)["heap_mb"] = 1 })},
		{"negative layers", "model.layers is -3", edit(func(m map[string]any) { m["model"].(map[string]any)["layers"] = -3 })},
		{"a negative pin", "pin.mb is -1", edit(func(m map[string]any) { m["pin"].(map[string]any)["mb"] = -1 })},
		{"a negative context", "ctx.requested is -5", edit(func(m map[string]any) { m["ctx"].(map[string]any)["requested"] = -5 })},
		{"a negative heap", "device.heap_bytes is -1", edit(func(m map[string]any) { m["device"].(map[string]any)["heap_bytes"] = -1 })},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := planJSON(c.input)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("planJSON = %.80s, %v; want an error naming %q", out, err, c.want)
			}
		})
	}
}

// TestWebAssemblyPlanUnderNodeEqualsCompute builds the module as make frontend does and calls
// vkllmPlan under Node with Go's wasm_exec.js on every case.
func TestWebAssemblyPlanUnderNodeEqualsCompute(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building the js/wasm module compiles the standard library for wasm on a cold cache")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed, so the WebAssembly module cannot be run here (planJSON is tested directly above)")
	}
	execJS := filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js")
	if _, err := os.Stat(execJS); err != nil {
		execJS = filepath.Join(runtime.GOROOT(), "misc", "wasm", "wasm_exec.js")
	}
	dir := t.TempDir()
	wasm := filepath.Join(dir, "plan.wasm")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-ldflags=-s -w", "-o", wasm, ".")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=js GOARCH=wasm go build ./cmd/planwasm: %v\n%s", err, out)
	}
	cases := planCases(t)
	var inputs []json.RawMessage
	for _, c := range cases {
		b, err := json.Marshal(c.in)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, b)
	}
	inputs = append(inputs, json.RawMessage(`{"model":{"layers":-1}}`))
	inFile := filepath.Join(dir, "inputs.json")
	all, _ := json.Marshal(inputs)
	if err := os.WriteFile(inFile, all, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
const fs = require("fs");
require(process.argv[1]);
const go = new Go();
WebAssembly.instantiate(fs.readFileSync(process.argv[2]), go.importObject).then(({ instance }) => {
  go.run(instance);
  const inputs = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
  process.stdout.write(JSON.stringify(inputs.map((i) => vkllmPlan(JSON.stringify(i)))));
  process.exit(0);
});`
	cmd := exec.Command(node, "-e", script, execJS, wasm, inFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(inputs) {
		t.Fatalf("node printed %.200s (%v), want %d plans", out, err, len(inputs))
	}
	for i, c := range cases {
		p := plan.Compute(c.in)
		want, _ := p.JSON()
		if got[i] != string(want) {
			t.Errorf("%s: the WebAssembly plan differs from plan.Compute:\n got %.300s\nwant %.300s", c.name, got[i], want)
		}
	}
	if last := got[len(got)-1]; !strings.Contains(last, `"error"`) || !strings.Contains(last, "model.layers is -1") {
		t.Errorf("a bad input under node answered %s, want an error naming model.layers", last)
	}
}
