package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/quant"
)

// udIQ2XXSBytes is the whole qwen36-35b-a3b ud-iq2_xxs file's size as synth.Mixes documents it
// (10.67 GB; unsloth's file is ~10.7 GB).
const udIQ2XXSBytes = 10.67e9

// roleOf names a tensor's role in synth's mixes from its llama.cpp name.
func roleOf(name string) string {
	switch {
	case name == "token_embd.weight":
		return "embed"
	case name == "output.weight":
		return "head"
	case strings.HasSuffix(name, "_exps.weight"):
		return "experts"
	case strings.HasSuffix(name, "_shexp.weight") && !strings.Contains(name, "gate_inp"):
		return "shared"
	case strings.HasSuffix(name, "attn_qkv.weight"), strings.HasSuffix(name, "attn_gate.weight"):
		return "deltanet"
	case strings.HasSuffix(name, "ssm_out.weight"):
		return "ssm_out"
	case strings.Contains(name, ".attn_q.") || strings.Contains(name, ".attn_k.") || strings.Contains(name, ".attn_v.") || strings.Contains(name, ".attn_output."):
		return "attn"
	}
	return "f32" // norms, the routers, the DeltaNet's conv, decay and beta
}

// writeHeaderOnlyPreset runs `vkllm synth` for the full-size preset with the header-only flag
// spelled as given and returns the file.
func writeHeaderOnlyPreset(t *testing.T, typ, flagSpelling string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen36-"+typ+".gguf")
	out, err := captureStdout(t, func() error {
		return runSynth(context.Background(), []string{"-arch", "qwen35moe", "-preset", "qwen36-35b-a3b", "-type", typ, flagSpelling, "-o", path})
	})
	if err != nil {
		t.Fatalf("synth -header-only: %v", err)
	}
	if !strings.Contains(out, "wrote the header of") {
		t.Fatalf("synth output %q does not say it wrote a header", out)
	}
	return path
}

// The Qwen3.6-35B-A3B-shaped ud-iq2_xxs preset, written header only: each role in its mix's
// type, the size the header implies near unsloth's ~10.7 GB, and the plan on a 16303 MiB card
// arms without a pin and declines under WDDM's 27% headroom, naming the numbers and the remedy.
func TestQwen36UDIQ2XXSHeaderOnlyTypesSizeAndPlan(t *testing.T) {
	want := map[string]quant.Type{
		"experts": quant.IQ2_XXS, "attn": quant.Q8_0, "deltanet": quant.Q8_0, "ssm_out": quant.Q8_0,
		"shared": quant.Q8_0, "embed": quant.Q5_K, "head": quant.Q6_K, "f32": quant.F32,
	}
	for _, spelling := range []string{"--header-only", "-header-only"} {
		t.Run(spelling, func(t *testing.T) {
			path := writeHeaderOnlyPreset(t, "ud-iq2_xxs", spelling)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() > 64<<20 {
				t.Fatalf("header-only file is %d bytes: tensor data was written", fi.Size())
			}
			f, err := gguf.OpenHeader(path)
			if err != nil {
				t.Fatalf("open the header-only file: %v", err)
			}
			defer f.Close()
			seen := map[string]int{}
			for _, ti := range f.Tensors {
				role := roleOf(ti.Name)
				seen[role]++
				if ti.Type != want[role] {
					t.Errorf("%s (%s) is %s, want %s", ti.Name, role, ti.Type, want[role])
				}
			}
			for role := range want {
				if seen[role] == 0 {
					t.Errorf("no tensor of role %s", role)
				}
			}
			if seen["experts"] != 3*40 || seen["deltanet"] != 2*30 || seen["attn"] != 4*10 {
				t.Errorf("tensors by role %v, want 120 expert, 60 DeltaNet and 40 attention tensors", seen)
			}
			if toks, ok := f.Strings("tokenizer.ggml.tokens"); !ok || len(toks) != 248320 {
				t.Errorf("vocabulary of %d tokens, want 248320", len(toks))
			}
			whole := f.DataOffset + f.MissingBytes
			if whole < int64(udIQ2XXSBytes*0.98) || whole > int64(udIQ2XXSBytes*1.02) {
				t.Errorf("the header implies a %d-byte file, want within 2%% of %.0f", whole, udIQ2XXSBytes)
			}

			for _, tc := range []struct {
				name      string
				args      []string
				armed     bool
				verdictIn []string
			}{
				{"16303 MiB heap, no budget: armed", []string{"--assume-heap-mb", "16303"}, true,
					[]string{"resident driver armed (40 layers, 256 experts (8 used)", "of 12207 MB"}},
				{"16303 MiB heap under WDDM: declined", []string{"--assume-heap-mb", "16303", "--assume-wddm"}, false,
					[]string{"resident driver declined - needs", "of 10406 MB (weights alone", "VKLLM_GPU_VRAM_MB=<MiB> pins the cap"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					flags, err := parsePlanFlags(append([]string{"-m", path}, tc.args...), io.Discard)
					if err != nil {
						t.Fatal(err)
					}
					p, _, err := makePlan(t.Context(), flags)
					if err != nil {
						t.Fatalf("plan of the header-only file: %v", err)
					}
					if p.Verdict.Armed != tc.armed || !p.Model.HeaderOnly || p.Pin.MB != 0 {
						t.Fatalf("armed %v (want %v), header only %v, pin %d MB; verdict %s", p.Verdict.Armed, tc.armed, p.Model.HeaderOnly, p.Pin.MB, p.Verdict.Text)
					}
					if tc.armed && (p.Ctx.Chosen < 4096 || p.Ctx.Chosen >= 262144) {
						t.Errorf("armed at ctx %d, want one the plan picks between the floor and the model's 262144", p.Ctx.Chosen)
					}
					for _, s := range tc.verdictIn {
						if !strings.Contains(p.Verdict.Text, s) {
							t.Errorf("verdict %q lacks %q", p.Verdict.Text, s)
						}
					}
				})
			}
		})
	}
}

// Negative control: a plain -type is one type for every matrix, so the role check above can
// tell the mix from a uniform file.
func TestQwen36UniformTypeIsNotTheMix(t *testing.T) {
	f, err := gguf.OpenHeader(writeHeaderOnlyPreset(t, "iq2_xxs", "-header-only"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range []string{"blk.3.attn_q.weight", "blk.0.ssm_out.weight", "blk.0.ffn_up_shexp.weight", "token_embd.weight"} {
		ti, ok := f.Tensor(name)
		if !ok || ti.Type != quant.IQ2_XXS {
			t.Errorf("%s: %v, want IQ2_XXS in a uniform iq2_xxs file", name, ti)
		}
	}
}
