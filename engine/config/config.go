// Package config declares every VKLLM_* environment variable once, with its type, default and
// meaning. Code reads variables only through these declarations; docs/ENV.md is generated from
// them (go run ./cmd/vkllm env --markdown) and a test keeps the two in sync. A bad value warns
// once and falls back to the default instead of failing.
package config

import (
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Kind is the type a variable's value is parsed as.
type Kind string

const (
	KindInt    Kind = "int"
	KindBool   Kind = "bool"
	KindString Kind = "string"
)

// Var is one declared environment variable.
type Var struct {
	Name    string
	Kind    Kind
	Default string
	Meaning string
}

var (
	registryMu sync.Mutex
	registry   = map[string]Var{}
	warned     sync.Map
)

func declare(v Var) Var {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[v.Name]; dup {
		panic("config: variable declared twice: " + v.Name)
	}
	registry[v.Name] = v
	return v
}

// All returns every declared variable sorted by name.
func All() []Var {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Var, 0, len(registry))
	for _, v := range registry {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Set reports whether the variable is present in the environment with a non-empty value.
func (v Var) Set() bool { return strings.TrimSpace(os.Getenv(v.Name)) != "" }

// Raw returns the trimmed value from the environment, or the default when unset.
func (v Var) Raw() string {
	if s := strings.TrimSpace(os.Getenv(v.Name)); s != "" {
		return s
	}
	return v.Default
}

func (v Var) warnBad(raw string, err error) {
	if _, seen := warned.LoadOrStore(v.Name+"="+raw, true); seen {
		return
	}
	slog.Warn("ignoring bad environment value", "var", v.Name, "value", raw, "want", string(v.Kind), "default", v.Default, "err", err)
}

// Int parses the value as an integer; a bad value warns and yields the default (0 if none).
func (v Var) Int() int {
	raw := v.Raw()
	if raw == "" {
		return 0
	}
	n, err := strconv.Atoi(raw)
	if err != nil {
		v.warnBad(raw, err)
		d, _ := strconv.Atoi(v.Default)
		return d
	}
	return n
}

// Bool parses 1/0/true/false/yes/no/on/off; a bad value warns and yields the default.
func (v Var) Bool() bool {
	raw := strings.ToLower(v.Raw())
	switch raw {
	case "1", "true", "yes", "on":
		return true
	case "0", "false", "no", "off", "":
		return false
	}
	v.warnBad(raw, fmt.Errorf("not a boolean"))
	return v.Default == "1" || v.Default == "true"
}

// String returns the value or the default.
func (v Var) String() string { return v.Raw() }

// The variables. Keep meanings to one line: they become docs/ENV.md and the README table.
var (
	Device            = declare(Var{"VKLLM_DEVICE", KindInt, "", "Vulkan device index to use (as listed by `vkllm devices`); unset picks the best discrete GPU"})
	GPUVRAMMB         = declare(Var{"VKLLM_GPU_VRAM_MB", KindInt, "", "pin the usable VRAM in MiB for the resident plan; overrides the per-machine pin and every room query"})
	GPUCtxMax         = declare(Var{"VKLLM_GPU_CTX_MAX", KindInt, "", "upper bound on the context the resident plan may choose"})
	GPUMinCtx         = declare(Var{"VKLLM_GPU_MIN_CTX", KindInt, "4096", "smallest context the plan may shrink to before declining (at least 256)"})
	GPUResident       = declare(Var{"VKLLM_GPU_RESIDENT", KindBool, "1", "0 forces the partial-offload fallback instead of the whole-model resident driver"})
	GPUExact          = declare(Var{"VKLLM_GPU_EXACT", KindBool, "0", "1 selects the exact GPU tier: llama.cpp's CPU summation order bit for bit (2-11x slower); default the fast tier"})
	GPUFused          = declare(Var{"VKLLM_GPU_FUSED", KindBool, "1", "0 records the fast tier's decode step unfused (separate RMSNorm, activation rounding and SwiGLU passes), for A/B measurements"})
	GPUMatvecUnits    = declare(Var{"VKLLM_GPU_MATVEC_UNITS", KindInt, "1", "block units a lane of the fast tier's decode product takes per pass, 1 or 2 (2 keeps more weight loads in flight; on an H200 it was no faster on Q4_K and 6% slower on Q4_0)"})
	GPUCM2            = declare(Var{"VKLLM_GPU_CM2", KindBool, "0", "where the device has NV cooperative matrix 2, 1 runs the prefill GEMMs of Q4_0/Q8_0/Q4_K/Q5_K/Q6_K weights on its kernels with the blocks decoded in the load (slower than staging them as fp16, VKLLM_GPU_CM2_STAGE; F16 weights take the cm2 kernels either way), for A/B measurements"})
	GPUCM2Stage       = declare(Var{"VKLLM_GPU_CM2_STAGE", KindBool, "1", "where the device has NV cooperative matrix 2, the prefill GEMMs of quantized weights run on its F16 kernel through an fp16 staging of the weight rows (256 MiB of scratch in two halves, counted by the plan; H200: 8B Q4_K pp512 +35%, Q4_0 +11%, 1B Q4_0 +15%); 0 keeps them on the KHR cooperative-matrix kernels, for A/B measurements"})
	GPUPrecompile     = declare(Var{"VKLLM_GPU_PRECOMPILE", KindBool, "1", "a resident model's pipelines are made on several cores: the decode step's at load, before its command is recorded, and its prompt windows' in the background after the load (on GPU devices; a CPU device such as lavapipe makes them as a window first asks). NVIDIA's driver compiles each on first use (then from its disk cache): on an H100 with that cache empty, one serial process waited 1.0 s for the 1B's decode pipelines and 16 s for its first prompt; 0 makes each pipeline as a recording first asks for it, on one core"})
	GPUStageAhead     = declare(Var{"VKLLM_GPU_STAGE_AHEAD", KindBool, "1", "where prefill weights are staged as fp16 (VKLLM_GPU_CM2_STAGE), each product runs beside the next staging in two alternating halves of the staging buffer; 0 gives every staging a stage of its own before its product, for A/B measurements"})
	GPURopeFold       = declare(Var{"VKLLM_GPU_ROPE_FOLD", KindBool, "1", "the decode step's query, key and value products on int8 dot products end as rope_kv does (rotated queries, keys and values into the caches; adjacent-pair rotation, no head norms), saving rope_kv's stage a layer; 0 runs rope_kv after them, for A/B measurements"})
	GPURopeNorms      = declare(Var{"VKLLM_GPU_ROPE_NORMS", KindBool, "1", "on the fast tier, a decode step's per-head query and key RMSNorms (qwen3, qwen3moe, the qwen35 hybrids' attention) run inside the rotation and KV store (rope_kv_norm), one stage fewer an attention layer (H200 Qwen3-30B-A3B shape: +3.5% decode); 0 keeps a norm stage before rope_kv, for A/B measurements"})
	GPUAttFreshKV     = declare(Var{"VKLLM_GPU_ATT_FRESH_KV", KindBool, "1", "on the fast tier, a decode step of per-head-normed attention (qwen3, qwen3moe) normalizes and rotates its queries and the step's key inside split attention (attention_flash_rn), which also stores the step's key and value rows: no rope_kv_norm stage before it, one stage fewer an attention layer (H100, 2026-12-06, 30B-A3B Q4_K tg128 in five alternated rounds: 236.6 against 233.8 and 237.2 against 235.4 with the stage); 0 keeps the stage, for A/B measurements"})
	GPURouteSubgroup  = declare(Var{"VKLLM_GPU_ROUTE_SUBGROUP", KindBool, "1", "a mixture-of-experts route (moe_route, router_route_f32) is chosen by one subgroup where its lanes hold every expert four a lane (the _1sg4 variants: Qwen3-30B-A3B's 128 experts on 32 lanes), two subgroup reductions a choice and no barrier between choices, the same choice and, up to the softmax sum's order, the same weights; more experts keep the workgroup's route. H100, 30B-A3B Q4_K tg128: 246.5 against 238.7 tok/s (2026-12-06); 0 keeps the workgroup's route everywhere, for A/B measurements"})
	GPUMoETile64      = declare(Var{"VKLLM_GPU_MOE_TILE64", KindBool, "1", "on the cooperative-matrix tier, a prompt window's grouped expert products (moe_gemm_coopmat) take up to 64 pairs of one expert a tile instead of 32: a 512-token window of Qwen3-30B-A3B averages 32 pairs an expert, so most experts' rows are read and expanded once instead of twice; products of long rows take the _p64 kernels, shorter ones (VKLLM_GPU_MOE_P64_MIN_K) the 32-pair kernels a workgroup a half (H100, 2026-12-07, 30B-A3B Q4_K pp512: 4656 -> 5417 t/s with every product on the _p64 kernels); 0 keeps 32-pair tiles, for A/B measurements"})
	GPUMoEP64MinK     = declare(Var{"VKLLM_GPU_MOE_P64_MIN_K", KindInt, "", "under VKLLM_GPU_MOE_TILE64, the shortest expert rows (elements) whose grouped products take the _p64 kernels (default 1024; H100, 2026-12-07, 30B-A3B Q4_K window: the gate and up products' 2048-element rows 60.2 -> 42.6 ms on them, the down products' 768-element rows 19.4 -> 22.1); for A/B measurements"})
	GPUMoEAhead       = declare(Var{"VKLLM_GPU_MOE_AHEAD", KindBool, "1", "on the cooperative-matrix tier, a prompt window's grouped expert products over 64-pair tiles of long rows (the _p64 products) take moe_gemm_ahead: 64-row workgroups that load the next 256 elements of their rows' quantized blocks into registers while the current ones expand from shared memory and multiply, instead of waiting for each step's load (moe_gemm_coopmat) (H100, 2026-12-07, 30B-A3B Q4_K window: the gate and up products 42.4 -> 37.5 ms); 0 for A/B measurements"})
	GPURouterNorm     = declare(Var{"VKLLM_GPU_ROUTER_NORM", KindBool, "1", "a mixture-of-experts decode step whose router is f32 and whose experts take the int8 products (no shared expert) normalizes inside the router's product and the experts' rounding pass (matvec_norm_f32, quantize_x8 with the norm): no RMSNorm stage before the router (H200 Qwen3-30B-A3B shape: +11% decode); 0 keeps it, for A/B measurements"})
	GPURouteInExperts = declare(Var{"VKLLM_GPU_ROUTE_IN_EXPERTS", KindBool, "0", "a mixture-of-experts decode step without a shared expert (qwen3moe) chooses its experts inside the gate and up products' workgroups (each one as moe_route does, the first writing the choice and weights for the down products) instead of in a route dispatch of its own, one stage fewer a layer (the H100 profile of the 30B-A3B Q4_K: the route stage 13 us of ~100 a layer); on the H100 (2026-12-06, 30B-A3B tg128) slower on Q4_K (209 against 221) and faster on IQ2_XXS (225 against 221), so off; for A/B measurements"})
	GPURouterRoute    = declare(Var{"VKLLM_GPU_ROUTER_ROUTE", KindBool, "1", "a mixture-of-experts decode step without a shared expert (qwen3moe) whose router normalizes itself (VKLLM_GPU_ROUTER_NORM) chooses its experts in the router's dispatch: the workgroup that finishes the router's product last routes as moe_route does (router_route_f32), so the route has no stage of its own, the same choice bit for bit (H100, 2026-12-06, 30B-A3B tg128: IQ2_XXS 228.0 against 226.0 with the stage, Q4_K 231.4 against 230.9); 0 keeps the route stage, for A/B measurements"})
	GPUArgmaxWide     = declare(Var{"VKLLM_GPU_ARGMAX_WIDE", KindBool, "1", "a decode step's greedy token is the argmax of its logits over many workgroups (argmax_wide: each scans 2048 logits with its loads in flight, the last combines them) instead of one workgroup reading every logit in series (argmax; on the H200, 2026-12-05: 152k logits in host-visible memory 58 us against 8.4, 248k 98 against 9.4, end to end within the noise); the same token; 0 keeps the one workgroup, for A/B measurements"})
	GPUChain          = declare(Var{"VKLLM_GPU_CHAIN", KindBool, "1", "greedy generation on the resident driver keeps the next decode step queued behind the running one: each step copies its argmax into the next step's token slot on the device (two recordings of the step on alternate input slots), so the GPU does not idle for the host's wait, read and submit between tokens; the same tokens (H100, 2026-12-06, tg128 against one step at a time: 30B-A3B Q4_K 237.3 and 236.9 against 234.1 and 230.5, 1B Q4_0 924 and 916 against 844 and 874, 8B Q4_K 304.9 and 301.2 against 297.4 and 299.2); a step queued past a stop is discarded (not on the recurrent hybrids, whose state it would advance); 0 submits and waits a token at a time, for A/B measurements"})
	GPUSample         = declare(Var{"VKLLM_GPU_SAMPLE", KindBool, "1", "sampled generation (a temperature above 0, no repetition penalty, top-k at most 1024) on the resident driver draws each token on the device (sample_token: top-k, top-p, min-p and the temperature over the step's logits in one workgroup, with the host sampler's uniform draws) and keeps the next step queued behind the running one as greedy generation does (VKLLM_GPU_CHAIN); the host draws where more than 1024 candidates pass the cut's threshold; the same token as the host's float64 draw except within float32 rounding of a boundary; 0 reads every step's logits back and draws on the host"})
	GPUDeviceLogits   = declare(Var{"VKLLM_GPU_DEVICE_LOGITS", KindBool, "0", "a decode step's head writes its logits into device memory, where the greedy argmax reads them, and copies them to the host-visible buffer after (one DMA of the vocabulary's floats) instead of writing them across the bus row by row (the seed's profiled head stage is ~2x what its product alone takes); 1 turns it on, for A/B measurements (one H200 run (2026-12-05): the seed's tg128 189.8 against 184.1-185.1 off; not yet repeated, so off)"})
	GPUNormF32        = declare(Var{"VKLLM_GPU_NORM_F32", KindBool, "1", "on the fast tier, a decode step's small f32 products that read a normed row (the Gated DeltaNet's beta and alpha, a shared expert's gate and the router beside it) normalize x themselves (matvec_norm_f32) beside the int8 products' rounding, which normalizes too: no RMSNorm stage before them; 0 keeps it, for A/B measurements"})
	GPUSharedX8       = declare(Var{"VKLLM_GPU_SHARED_X8", KindBool, "1", "on the fast tier, a mixture-of-experts decode step's shared expert takes its gate and up products from a rounding of the normed row made beside the routed experts' and runs them beside the route, its SwiGLU's rounding beside the routed experts' gate and up, its down product beside their SwiGLU's rounding: a layer in five stages instead of ten with VKLLM_GPU_NORM_F32; 0 keeps its own rounding, SwiGLU and stages, for A/B measurements"})
	GPUX8Coop         = declare(Var{"VKLLM_GPU_X8_COOP", KindBool, "0", "on the fast tier, a decode step's Q4_0, Q8_0 and Q6_K products (matvec_x8_q4_0c, _q8_0c, _q6_kc) copy each subgroup's run of blocks (18, 34 and 210 bytes, 2-byte aligned in GGUF's layout) into shared memory in 16-byte words before the lanes read their blocks, instead of 4-byte loads and pairs of halves a lane; the same sums; 1 turns it on, for A/B measurements (on an H200 it lost: the seed's decode 146 -> 119 t/s, 2026-12-05)"})
	GPUQ6KWide        = declare(Var{"VKLLM_GPU_Q6K_WIDE", KindBool, "0", "on the fast tier, a decode step's Q6_K products (the head of most K-quant mixes: matvec_x8_q6_kw) take 64 elements a lane a step, 16 of each quarter of half a superblock, loading each weight byte once (a 32-element unit a lane loads each low-bits byte twice and each high-bits byte four times); the sums in another order, within the same bound of a float64 reference; 1 turns it on, for A/B measurements (on an H200 1.7x the kernel on a 14336x4096 product, but the seed's decode with its Q6_K head did not gain: 171 -> 167 t/s, 2026-12-05)"})
	GPUConvFold       = declare(Var{"VKLLM_GPU_CONV_FOLD", KindBool, "1", "on the fast tier, a decode step's Gated DeltaNet qkv product on the int8 products ends as ssm_conv does (matvec_x8_<type>_conv: the causal convolution, SiLU and the state's move in the product's last step; delta_rule_fast gates beta and alpha itself): one stage fewer a DeltaNet layer; 0 keeps the convolution's stage, for A/B measurements"})
	GPUGateFolds      = declare(Var{"VKLLM_GPU_GATE_FOLDS", KindBool, "1", "on the fast tier, a decode step's gated attention (the qwen35 hybrids) reads its queries out of the gated query projection inside rope_kv_norm and merges the attention's ranges and gates its output inside the output product's int8 rounding (quantize_x8_gate): the attn_qsplit, attention_merge and attn_gate stages go, three stages fewer an attention layer; 0 keeps them, for A/B measurements"})
	GPUDeltaRounds    = declare(Var{"VKLLM_GPU_DELTA_ROUNDS", KindBool, "1", "on the fast tier, a decode step's Gated DeltaNet recurrence rounds its output for the output product's int8 dot products itself (delta_rule_fast_<S>_x8, where that product rounds in 32-blocks: Q4_0, Q8_0), one stage fewer a DeltaNet layer; 0 keeps quantize_x8's stage, for A/B measurements"})
	GPUSwiGLUF32      = declare(Var{"VKLLM_GPU_SWIGLU_F32", KindBool, "1", "on the fast tier, a decode step's FFN down product of a small f32 model (rows of at most 2048: stories260K) computes SwiGLU itself (matvec_swiglu_f32): one stage fewer a layer; 0 keeps the SwiGLU stage, for A/B measurements"})
	GPUDeltaFast      = declare(Var{"VKLLM_GPU_DELTA_FAST", KindBool, "1", "on the fast tier, the Gated DeltaNet's recurrence (qwen35, qwen35moe) runs delta_rule_fast: f32 with fused multiply-adds and the device's exp and roots, one barrier a token (the exact kernel's correctly rounded arithmetic and float-float norms take about sixteen); 0 keeps the exact tier's kernel, for A/B measurements"})
	GPUAttSplits      = declare(Var{"VKLLM_GPU_ATT_SPLITS", KindInt, "", "the most position ranges the split attention cuts one query's context into (default 64, at most 256: about 1024 workgroups a step), for A/B measurements"})
	GPUAttFlash       = declare(Var{"VKLLM_GPU_ATT_FLASH", KindBool, "1", "split attention outside the cooperative-matrix prefill kernels (every decode step) runs as attention_flash: eight lanes a position, 16-byte K and V loads, a running softmax per position group with no barrier inside the loop; 0 keeps attention_split (a thread a position), for A/B measurements"})
	GPUAttFlashHeads  = declare(Var{"VKLLM_GPU_ATT_FLASH_HEADS", KindInt, "", "the most query heads one attention_flash workgroup takes (1-8; default: as many as keep 16 accumulators a lane, 8 heads of 64 dimensions, 4 of 128, 2 of 256); for A/B measurements"})
	GPUAttMinRange    = declare(Var{"VKLLM_GPU_ATT_MIN_RANGE", KindInt, "", "the fewest positions attention_flash gives one range (default 64): a short context fills fewer ranges, so the merge reads fewer partials; for A/B measurements"})
	GPUAttFP16        = declare(Var{"VKLLM_GPU_ATT_FP16", KindBool, "1", "prefill attention on cooperative matrices takes queries and weights rounded to fp16 once (half the matrix work, outputs within 3e-3 of a float64 reference; H200 8B Q4_K pp512 @ d4096 +4%); 0 splits them into fp16 high and low parts (f32-level errors), for A/B measurements"})
	GPUAttCM2         = declare(Var{"VKLLM_GPU_ATT_CM2", KindBool, "1", "where the device has NV cooperative matrix 2, prefill attention over 64- and 128-wide heads runs in one pass on its workgroup-scope matrices (attention_prefill_cm2: rescaled running sums, Q and P rounded to fp16 once, within 3e-3 of a float64 reference); 0 keeps the two-pass KHR kernel (attention_prefill_cm/cm16), for A/B measurements"})
	GPUCM2Tile        = declare(Var{"VKLLM_GPU_CM2_TILE", KindString, "128x128x64f", "tile of the cooperative matrix 2 F16 kernel, rows x tokens x depth: 128x128x64f (interior tiles on an unclamped unrolled path) or 64x128x64 (the default before), for A/B measurements"})
	GPUX8             = declare(Var{"VKLLM_GPU_X8", KindBool, "1", "0 takes the f32-activation decode products (matvec_fast) instead of int8 activations rounded once per layer input (matvec_x8), for A/B measurements"})
	LoadPrefault      = declare(Var{"VKLLM_LOAD_PREFAULT", KindBool, "1", "a model loading for the GPU has its file's mapped pages faulted in on other cores while the GPU is prepared (skipped for files over half the machine's memory); 0 leaves them to the upload's copies, for A/B measurements"})
	GPUProf           = declare(Var{"VKLLM_GPU_PROF", KindBool, "0", "1 prints per-role GPU timings from timestamp queries (per prefill window, every 32 decode tokens)"})
	DataDir           = declare(Var{"VKLLM_DATA_DIR", KindString, "", "where the SQLite store and the sidecar token live; default the OS user data dir (XDG_DATA_HOME/vkllm on Linux)"})
	Threads           = declare(Var{"VKLLM_THREADS", KindInt, "", "CPU threads for the CPU backend; default all cores"})
	LogLevel          = declare(Var{"VKLLM_LOG_LEVEL", KindString, "info", "log level: debug, info, warn or error"})
	SidecarBinary     = declare(Var{"VKLLM_SIDECAR", KindString, "", "path of the vkllm binary the app starts as its engine sidecar; default the app's own executable"})
	ValidationLayer   = declare(Var{"VKLLM_VK_VALIDATE", KindBool, "0", "1 enables the Khronos validation layer when it is installed"})
)
