package vulkan

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/engine/sample"
)

// sampleKernelCase is one row of logits and the settings sample_token draws it with.
type sampleKernelCase struct {
	name   string
	logits []float32
	params sample.Params
}

func sampleKernelCases(rng *rand.Rand) []sampleKernelCase {
	peaked := func(n int) []float32 {
		x := randVec(rng, n, 2.5)
		for i := 0; i < 6; i++ {
			x[rng.Intn(n)] += float32(4 + 2*rng.Float64())
		}
		return x
	}
	app := sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05}
	ties := peaked(3000)
	for i := range ties {
		ties[i] = float32(math.Round(float64(ties[i])*2) / 2)
	}
	nans := peaked(3000)
	for i := range nans {
		if rng.Intn(10) == 0 {
			nans[i] = float32(math.NaN())
		}
	}
	// top-p 0.99 is not reached by the tokens within 10 of the largest (one token, 0.986 of the
	// mass): the threshold widens to 20 and takes 500 tied tokens besides
	widen := make([]float32, 1000)
	for i := range widen {
		switch {
		case i == 700:
			widen[i] = 3
		case i%2 == 0:
			widen[i] = 3 - 10.5
		default:
			widen[i] = 3 - 30
		}
	}
	return []sampleKernelCase{
		{"the app's defaults", peaked(3000), app},
		{"the app's defaults, 152k logits", peaked(151936), app},
		{"top-p alone", peaked(3000), sample.Params{Temperature: 1, TopP: 0.95}},
		{"top-k, top-p, min-p", peaked(3000), sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}},
		{"top-k alone, hot", peaked(3000), sample.Params{Temperature: 1.5, TopK: 5}},
		{"min-p alone, cold", peaked(3000), sample.Params{Temperature: 0.5, MinP: 0.1}},
		{"no cut", peaked(3000), sample.Params{Temperature: 1}},
		{"no cut, 40k logits, cold", peaked(40000), sample.Params{Temperature: 0.4}},
		{"ties", ties, sample.Params{Temperature: 1, TopP: 0.9}},
		{"NaNs", nans, app},
		{"top-p widens its threshold", widen, sample.Params{Temperature: 1, TopP: 0.99}},
	}
}

// sample_token against engine/sample's float64 chain: for each case and 24 uniforms, the same
// token wherever the host's own draw is stable (the same token for u ± 1e-5 and for top-p and
// min-p ± 1e-5: the kernel sums in float32), and a stable draw for at least 90% of them. A
// kernel that skips a cut, the temperature, the order of ties or the widening of top-p's
// threshold draws other tokens than the host's.
func TestSampleTokenDrawsAsTheHostSampler(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(5))
	cases := sampleKernelCases(rng)
	const draws = 24
	stride := max(64, int(c.minOffsetAlign)/4) // 4-byte words between two draws' u and out
	type caseRun struct {
		logits, cfg, us, out *Buffer
		u                    []float64
	}
	runs := make([]caseRun, len(cases))
	for i, k := range cases {
		u := make([]float64, draws)
		words := make([]float32, draws*stride)
		for j := range u {
			u[j] = (float64(j) + rng.Float64()) / draws
			words[j*stride] = float32(u[j])
		}
		cfg := sampleSettings(k.params)
		runs[i] = caseRun{logits: upload(t, c, k.logits), cfg: uploadU32(t, c, cfg), us: upload(t, c, words),
			out: uploadU32(t, c, make([]uint32, draws*stride)), u: u}
	}
	run(t, c, func(s *Seq) {
		for i, k := range cases {
			r := runs[i]
			for j := 0; j < draws; j++ {
				off := uint64(4 * j * stride)
				s.SampleToken(r.logits.All(), r.cfg.All(), r.us.Range(off, 4), r.out.Range(off, 8), len(k.logits))
			}
		}
	})
	for i, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			out, err := runs[i].out.ReadU32(0, draws*stride)
			if err != nil {
				t.Fatal(err)
			}
			host := func(p sample.Params, u float64) int { return sample.New(p).SampleWith(k.logits, u) }
			stable := 0
			for j, u := range runs[i].u {
				tok, status := int(out[j*stride]), out[j*stride+1]
				if status != sampleDrawn {
					t.Fatalf("draw %d (u %.6f): status %d, want drawn on the device", j, u, status)
				}
				want := host(k.params, u)
				const d = 1e-5
				alike := []int{host(k.params, max(0, u-d)), host(k.params, min(u+d, 1-1e-12))}
				if p := k.params; p.TopP > 0 && p.TopP < 1 {
					lo, hi := p, p
					lo.TopP, hi.TopP = p.TopP-d, min(1-1e-9, p.TopP+d)
					alike = append(alike, host(lo, u), host(hi, u))
				}
				if p := k.params; p.MinP > 0 {
					lo, hi := p, p
					lo.MinP, hi.MinP = p.MinP-d, p.MinP+d
					alike = append(alike, host(lo, u), host(hi, u))
				}
				if slices.ContainsFunc(alike, func(x int) bool { return x != want }) {
					continue // within float32 rounding of a boundary
				}
				stable++
				if tok != want {
					t.Errorf("draw %d (u %.6f): token %d (logit %v), the host draws %d (logit %v)", j, u, tok, k.logits[tok], want, k.logits[want])
				}
			}
			if stable < draws*9/10 {
				t.Fatalf("only %d of %d draws are clear of a boundary: the case checks too little", stable, draws)
			}
		})
	}
}

// Where sample_token cannot draw, it says so: more candidates above the cut's threshold than
// it sorts (the host draws; the token meanwhile the argmax), an infinite logit (the host shares
// its mass), no logit that is a number (token 0).
func TestSampleTokenHandsBackWhatItCannotDraw(t *testing.T) {
	c := ctxOrSkip(t)
	rng := rand.New(rand.NewSource(9))
	flat := randVec(rng, 3000, 0.1)
	inf := randVec(rng, 3000, 1)
	inf[1234] = float32(math.Inf(1))
	nan := make([]float32, 500)
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	argmaxOf := func(x []float32) uint32 { return uint32(slices.Index(x, slices.Max(x))) }
	cases := []struct {
		name          string
		logits        []float32
		params        sample.Params
		token, status uint32
	}{
		{"3000 candidates within top-p's threshold", flat, sample.Params{Temperature: 0.7, TopP: 0.9}, argmaxOf(flat), sampleByHost},
		{"an infinite logit", inf, sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05}, 1234, sampleByHost},
		{"no number", nan, sample.Params{Temperature: 0.7, MinP: 0.05}, 0, sampleNoLogit},
		{"3000 candidates under min-p: within the threshold's cap", flat, sample.Params{Temperature: 0.7, MinP: 0.9}, 0, sampleDrawn},
	}
	outs := make([]*Buffer, len(cases))
	run(t, c, func(s *Seq) {
		for i, k := range cases {
			outs[i] = uploadU32(t, c, []uint32{0xdead, 0xdead})
			s.SampleToken(upload(t, c, k.logits).All(), uploadU32(t, c, sampleSettings(k.params)).All(), upload(t, c, []float32{0.5}).All(), outs[i].All(), len(k.logits))
		}
	})
	for i, k := range cases {
		out, err := outs[i].ReadU32(0, 2)
		if err != nil {
			t.Fatal(err)
		}
		if out[1] != k.status || (k.status != sampleDrawn && out[0] != k.token) {
			t.Errorf("%s: token %d status %d, want status %d (token %d)", k.name, out[0], out[1], k.status, k.token)
		}
		if k.status == sampleDrawn {
			if want := sample.New(k.params).SampleWith(k.logits, 0.5); int(out[0]) != want {
				t.Errorf("%s: token %d, the host draws %d", k.name, out[0], want)
			}
		}
	}
}

// A sampled generation on the chain draws the tokens the host draws from the same runner's
// logits with the same uniforms, every step after the first taken as queued; where
// sample_token hands the draw back (its candidates capped at 8 here, the settings' cut
// letting more through), the host draws from the slot's logits and the generation goes on
// unchanged. The uniform stream is the sampler's: the k-th token takes its k-th draw.
func TestSampledChainDrawsAsTheHost(t *testing.T) {
	c := ctxOrSkip(t)
	defer func(on bool) { c.sampleOnDevice = on }(c.sampleOnDevice)
	defer func(n int) { sampleCandidates = n }(sampleCandidates)
	c.sampleOnDevice = true
	dir := t.TempDir()
	prompt := []int{1, 262, 300, 275, 307}
	const steps = 12
	for _, tc := range []struct {
		name   string
		params sample.Params
		cap    int
		byHost bool
	}{
		{"the app's defaults", sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05, Seed: 42}, sampleMaxCandidates, false},
		{"top-p alone, the host drawing", sample.Params{Temperature: 1, TopP: 0.95, Seed: 7}, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sampleCandidates = tc.cap
			m := loadTiny(t, dir, "llama", quant.Q8_0, 7)
			r, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if !r.SamplesOnDevice(tc.params) {
				t.Fatalf("the runner does not sample %+v on its device", tc.params)
			}
			stream := sample.New(tc.params)
			uniforms := make([]float64, steps+2)
			for i := range uniforms {
				uniforms[i] = stream.Uniform()
			}
			lg, err := r.Eval(prompt, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			host := sample.New(tc.params)
			tokens := []int{host.SampleWith(lg, uniforms[0])}
			for i := 1; i <= steps; i++ {
				next, err := r.Sample(tokens[i-1], len(prompt)+i-1, tc.params, uniforms[i], uniforms[i+1])
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				tokens = append(tokens, next)
			}
			ch := r.sampled
			if ch == nil || !tc.byHost && (ch.taken != steps-1 || ch.queued != steps) || tc.byHost && ch.queued+ch.hostDraws < steps {
				t.Fatalf("the chain did not run the generation: %+v (want %d steps taken as queued, %d queued)", ch, steps-1, steps)
			}
			if hostDrew := ch.hostDraws > 0; hostDrew != tc.byHost {
				t.Fatalf("the host drew %d of %d tokens, want some: %v", ch.hostDraws, steps, tc.byHost)
			}
			// the same generation one Eval at a time, the host drawing from each step's logits
			ref, err := NewResident(c, m, ResidentOptions{Context: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			lg, err = ref.Eval(prompt, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= steps; i++ {
				if lg, err = ref.Eval([]int{tokens[i-1]}, len(prompt)+i-1, false); err != nil {
					t.Fatal(err)
				}
				want := host.SampleWith(lg, uniforms[i])
				if tokens[i] == want {
					continue
				}
				near := host.SampleWith(lg, max(0, uniforms[i]-1e-5)) != host.SampleWith(lg, uniforms[i]+1e-5)
				if !near {
					t.Fatalf("step %d: the chain drew %d, the host draws %d from the same logits (tokens %v)", i, tokens[i], want, tokens)
				}
				t.Logf("step %d: within rounding of a boundary (chain %d, host %d): the rest is not compared", i, tokens[i], want)
				break
			}
			// a Greedy call after the sampled chain settles it and runs on its own chain
			if _, err := r.Greedy(tokens[steps], len(prompt)+steps); err != nil {
				t.Fatal(err)
			}
			if r.sampled.ahead != -1 {
				t.Fatal("the sampled chain kept a step queued across a greedy call")
			}
		})
	}
}

// BenchmarkSampleToken times sample_token over Qwen3's 151936 and Qwen3.5/3.6's 248320 logits
// in device memory (where a sampled chain's step leaves them), peaked as a trained model's are,
// under the app's settings, llama.cpp's (top-k 40) and the temperature alone, beside the greedy
// step's argmax_wide. Run on a real GPU: -test.run '^$' -test.bench SampleToken -test.benchtime 3x.
func BenchmarkSampleToken(b *testing.B) {
	c := gpuCtxOrSkip(b)
	const reps = 8
	rng := rand.New(rand.NewSource(3))
	out, arrivals := benchBuffer(b, c, make([]byte, 8)), benchBuffer(b, c, make([]byte, 4))
	parts := benchBuffer(b, c, make([]byte, 8*argmaxMaxParts))
	u := benchBuffer(b, c, f32Bytes([]float32{0.37}))
	for _, n := range []int{151936, 248320} {
		x := randVec(rng, n, 2.5)
		for i := 0; i < 6; i++ {
			x[rng.Intn(n)] += 6
		}
		logits := benchBuffer(b, c, f32Bytes(x))
		wide := bestNsPerRep(b, c, reps, func(s *Seq) { s.ArgmaxWide(logits.All(), out.Range(0, 4), parts.All(), arrivals.All(), n) }) / 1e3
		fmt.Printf("%d logits in device memory: argmax_wide %.1f us (with its barrier)\n", n, wide)
		for _, set := range []struct {
			name string
			p    sample.Params
		}{
			{"the app's (temperature 0.7, top-p 0.9, min-p 0.05)", sample.Params{Temperature: 0.7, TopP: 0.9, MinP: 0.05}},
			{"llama.cpp's (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8)", sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}},
			{"top-p 0.95 alone", sample.Params{Temperature: 1, TopP: 0.95}},
			{"the temperature alone", sample.Params{Temperature: 1}},
		} {
			cfg := benchBuffer(b, c, u32Bytes(sampleSettings(set.p)))
			ns := bestNsPerRep(b, c, reps, func(s *Seq) { s.SampleToken(logits.All(), cfg.All(), u.All(), out.All(), n) })
			fmt.Printf("%d logits, %s: sample_token %.1f us (with its barrier)\n", n, set.name, ns/1e3)
		}
	}
}
