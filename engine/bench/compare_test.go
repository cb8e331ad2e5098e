package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func rateRecord(tool, file string, nPrompt, nGen, depth int, ts float64) Record {
	n := nPrompt + nGen
	return Record{Tool: tool, ModelFile: file, ModelType: "llama 8B Q4_K", NPrompt: nPrompt, NGen: nGen, NDepth: depth,
		Summary: Summarize([]int64{int64(float64(n) * 1e9 / ts)}, n)}
}

func TestFlashAttnReadsBothLlamaBenchForms(t *testing.T) {
	for in, want := range map[string]string{`true`: "fa1", `false`: "fa0", `1`: "fa1", `0`: "fa0", `-1`: "fa auto"} {
		recs, err := ParseLlamaBench(strings.NewReader(`[{"n_prompt": 512, "flash_attn": ` + in + `}]`))
		if err != nil || PeerSetting(recs[0]) != want {
			t.Errorf("flash_attn %s: setting %q, %v; want %q", in, PeerSetting(recs[0]), err, want)
		}
	}
	recs, err := ParseLlamaBench(strings.NewReader(`[{"n_prompt": 512}]`))
	if err != nil || PeerSetting(recs[0]) != "" {
		t.Errorf("no flash_attn: setting %q, %v; want none", PeerSetting(recs[0]), err)
	}
	if _, err := ParseLlamaBench(strings.NewReader(`[{"n_prompt": 512, "flash_attn": 2}]`)); err == nil {
		t.Error("flash_attn 2 accepted")
	}
	// Our own rows say nothing about flash attention.
	var buf bytes.Buffer
	_ = Write(&buf, "json", []Record{rateRecord("vkllm", "m.gguf", 512, 0, 0, 100)})
	if strings.Contains(buf.String(), "flash_attn") {
		t.Errorf("vkllm's JSON carries a flash_attn field:\n%s", buf.String())
	}
}

func TestComparePairsToolsByFileAndTestInLlamaBenchOrder(t *testing.T) {
	fa := func(v FlashAttn) *FlashAttn { return &v }
	peer := func(file string, nPrompt, nGen, depth int, ts float64, setting FlashAttn) Record {
		r := rateRecord("llama-bench", file, nPrompt, nGen, depth, ts)
		r.ModelType, r.FlashAttn = "llama ?B Q4_K", fa(setting)
		return r
	}
	ours8 := rateRecord("vkllm", "/tmp/m/synth-8b-q4_k.gguf", 0, 128, 4096, 50)
	records := []Record{
		rateRecord("vkllm", "/tmp/m/synth-1b-q4_0.gguf", 0, 128, 0, 250),
		rateRecord("vkllm", "/tmp/m/synth-1b-q4_0.gguf", 512, 0, 0, 5000),
		peer("/tmp/m/synth-1b-q4_0.gguf", 512, 0, 0, 40000, 0),
		peer("/tmp/m/synth-1b-q4_0.gguf", 512, 0, 0, 50000, 1),
		peer("/tmp/m/synth-1b-q4_0.gguf", 0, 128, 0, 830, 1),
		peer("/tmp/m/synth-1b-q4_0.gguf", 0, 128, 0, 1000, 0),
		ours8,
		peer("/tmp/m/synth-8b-q4_k.gguf", 0, 128, 4096, 200, 1),
		peer("/tmp/m/synth-8b-q4_k.gguf", 512, 0, 0, 11000, 1), // the peer alone ran this one
	}
	rows := Compare(records)
	var got []string
	for _, r := range rows {
		got = append(got, r.File+": "+r.Test)
	}
	want := "synth-1b-q4_0.gguf: pp512, synth-1b-q4_0.gguf: tg128, synth-8b-q4_k.gguf: pp512, synth-8b-q4_k.gguf: tg128 @ d4096"
	if strings.Join(got, ", ") != want {
		t.Fatalf("rows\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
	for _, tc := range []struct {
		row     int
		setting string
		ratio   float64
	}{
		{0, "fa1", 0.1},  // 5000 / 50000
		{1, "fa0", 0.25}, // 250 / 1000
		{2, "fa1", 0},    // no vkllm row
		{3, "fa1", 0.25}, // 50 / 200 at depth
	} {
		_, setting, ok := rows[tc.row].Best()
		if !ok || setting != tc.setting || math.Abs(rows[tc.row].Ratio()-tc.ratio) > 1e-9 {
			t.Errorf("row %d (%s): best %s ratio %.4f, want %s %.4f", tc.row, rows[tc.row].Test, setting, rows[tc.row].Ratio(), tc.setting, tc.ratio)
		}
	}
	if rows[0].Model != "llama 8B Q4_K" || rows[2].Model != "llama ?B Q4_K" {
		t.Errorf("model labels %q (ours first) and %q (the peer's when we have none)", rows[0].Model, rows[2].Model)
	}

	var buf bytes.Buffer
	if err := WriteComparison(&buf, rows); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, w := range []string{
		"| model | test | vkllm t/s | llama.cpp fa0 | llama.cpp fa1 | ratio vs best | median ratio |",
		"| pp512 | 5000.00 ± 0.00 | 40000.00 ± 0.00 | 50000.00 ± 0.00 | 0.10x vs fa1 | 0.10x |",
		"| tg128 | 250.00 ± 0.00 | 1000.00 ± 0.00 | 830.00 ± 0.00 | 0.25x vs fa0 | 0.25x |",
		"| pp512 | - | - | 11000.00 ± 0.00 | - | - |",
		"| tg128 @ d4096 | 50.00 ± 0.00 | - | 200.00 ± 0.00 | 0.25x vs fa1 | 0.25x |",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("comparison lacks %q:\n%s", w, md)
		}
	}

	// A vkllm JSON file and a llama-bench one read back into the same comparison.
	ours8.LoadMs, ours8.ModelSize, ours8.Placement = 1210, 4.58e9, "resident"
	js, _ := json.Marshal([]Record{ours8})
	back, err := ParseLlamaBench(bytes.NewReader(js))
	if err != nil || back[0].Tool != "vkllm" {
		t.Fatalf("our JSON back: %+v, %v", back, err)
	}
	buf.Reset()
	_ = WriteComparison(&buf, Compare(back))
	if !strings.Contains(buf.String(), "load synth-8b-q4_k.gguf (llama 8B Q4_K): 4.58 GB in 1.21 s (3.8 GB/s) to resident") {
		t.Errorf("comparison lacks the load line:\n%s", buf.String())
	}
}

// The median ratio compares each side's middle repetition, so a peer whose first timed
// repetition ran slow (as llama-bench's did on an H100: 171 t/s beside nine at 235-240) is not
// flattered into a lower best, where the ratio of means is; even counts take the middle two's
// mean, and a record without samples its mean.
func TestMedianRatioIgnoresOneSlowRepetition(t *testing.T) {
	rec := func(tool string, fa FlashAttn, ts ...float64) Record {
		ns := make([]int64, len(ts))
		for i, v := range ts {
			ns[i] = int64(128 * 1e9 / v)
		}
		r := Record{Tool: tool, ModelFile: "m.gguf", NGen: 128, Summary: Summarize(ns, 128)}
		if tool != "vkllm" {
			r.FlashAttn = &fa
		}
		return r
	}
	for _, tc := range []struct {
		name        string
		ours        Record
		peer        []Record
		mean, media float64
	}{
		{"a slow first repetition", rec("vkllm", 0, 240, 241, 239), []Record{rec("llama-bench", 1, 171, 236, 237, 235, 236)}, 240.0 / 223.0, 240.0 / 236.0},
		{"the best setting by median", rec("vkllm", 0, 190, 210), []Record{rec("llama-bench", 0, 100, 300, 310), rec("llama-bench", 1, 250, 250, 250)}, 200.0 / 250.0, 200.0 / 300.0},
		{"no samples: the means", Record{Tool: "vkllm", ModelFile: "m.gguf", NGen: 128, Summary: Summary{AvgTs: 120}},
			[]Record{{Tool: "llama-bench", ModelFile: "m.gguf", NGen: 128, Summary: Summary{AvgTs: 100}}}, 1.2, 1.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows := Compare(append([]Record{tc.ours}, tc.peer...))
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			if got := rows[0].Ratio(); math.Abs(got-tc.mean) > 1e-3 {
				t.Errorf("ratio of means %.4f, want %.4f", got, tc.mean)
			}
			if got := rows[0].MedianRatio(); math.Abs(got-tc.media) > 1e-3 {
				t.Errorf("median ratio %.4f, want %.4f", got, tc.media)
			}
			var buf bytes.Buffer
			if err := WriteComparison(&buf, rows); err != nil {
				t.Fatal(err)
			}
			md := buf.String()
			noisyPeer := false
			for _, p := range tc.peer {
				if n, _ := Noisy(p.AvgTs, p.StddevTs); n {
					noisyPeer = true
				}
			}
			if strings.Contains(md, "(noisy)") != noisyPeer {
				t.Errorf("noisy peer %v, the table says:\n%s", noisyPeer, md)
			}
			if want := fmt.Sprintf("| %.2fx |\n", tc.media); !strings.Contains(md, want) {
				t.Errorf("the table lacks the median ratio %q:\n%s", want, md)
			}
		})
	}
}
