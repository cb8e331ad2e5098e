package plan

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestUploadListAlignsEveryTensorAndKeepsFileOrder(t *testing.T) {
	specs := []TensorSpec{
		{Name: "token_embd.weight", Type: "Q4_0", Size: 1000},
		{Name: "blk.0.attn_norm.weight", Type: "F32", Size: 256},
		{Name: "blk.0.attn_q.weight", Type: "Q4_0", Size: 257},
		{Name: "blk.11.ffn_down.weight", Type: "Q6_K", Size: 0},
		{Name: "output_norm.weight", Type: "F32", Size: 4},
		{Name: "output.weight", Type: "Q6_K", Size: 512},
		{Name: "rope_freqs.weight", Type: "F32", Size: 64},
	}
	ups, err := UploadList(specs)
	if err != nil {
		t.Fatalf("UploadList: %v", err)
	}
	want := []Upload{
		{Name: "token_embd.weight", Type: "Q4_0", Kind: KindEmbd, Layer: -1, Size: 1000, Offset: 0, Bytes: 1024},
		{Name: "blk.0.attn_norm.weight", Type: "F32", Kind: KindNorm, Layer: 0, Size: 256, Offset: 1024, Bytes: 256},
		{Name: "blk.0.attn_q.weight", Type: "Q4_0", Kind: KindAttn, Layer: 0, Size: 257, Offset: 1280, Bytes: 512},
		{Name: "blk.11.ffn_down.weight", Type: "Q6_K", Kind: KindFFN, Layer: 11, Size: 0, Offset: 1792, Bytes: 0},
		{Name: "output_norm.weight", Type: "F32", Kind: KindNorm, Layer: -1, Size: 4, Offset: 1792, Bytes: 256},
		{Name: "output.weight", Type: "Q6_K", Kind: KindOutput, Layer: -1, Size: 512, Offset: 2048, Bytes: 512},
		// rope_freqs.weight stays on the host (HostOnly): no upload
	}
	if len(ups) != len(want) {
		t.Fatalf("got %d uploads, want %d", len(ups), len(want))
	}
	for i := range want {
		if ups[i] != want[i] {
			t.Errorf("upload %d = %+v, want %+v", i, ups[i], want[i])
		}
	}
	w := weighUploads(ups)
	if w.Bytes != 2560 || w.ByKind[KindNorm] != 512 || w.Tensors != 6 {
		t.Fatalf("weights %+v, want 2560 bytes, 512 of norms, 6 tensors", w)
	}
}

func TestUploadListRejectsANegativeSizeNamingTheTensor(t *testing.T) {
	_, err := UploadList([]TensorSpec{{Name: "blk.3.ffn_up.weight", Size: -1}})
	if err == nil || !strings.Contains(err.Error(), `"blk.3.ffn_up.weight"`) {
		t.Fatalf("err = %v, want an error naming the tensor", err)
	}
}

func TestLayerOfParsesOnlyBlockNames(t *testing.T) {
	tests := map[string]int{
		"blk.0.attn_q.weight": 0, "blk.31.ffn_up.weight": 31, "output.weight": -1,
		"blk.x.attn_q.weight": -1, "blk.-1.attn_q.weight": -1, "blk.7": -1,
	}
	for name, want := range tests {
		if got := LayerOf(name); got != want {
			t.Errorf("LayerOf(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestPlanJSONKeepsItsFieldNames(t *testing.T) {
	p := Compute(seedInput(t, false))
	b, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatalf("plan JSON does not parse: %v", err)
	}
	for _, k := range []string{"model", "device", "weights", "kv", "kv_bytes", "scratch", "headroom", "budget_margin_bytes",
		"source", "pin", "cap_bytes", "usable_bytes", "need_bytes", "ctx", "verdict"} {
		if _, ok := top[k]; !ok {
			t.Errorf("plan JSON lacks %q", k)
		}
	}
	var v struct {
		Armed bool   `json:"armed"`
		Text  string `json:"text"`
	}
	if err := json.Unmarshal(top["verdict"], &v); err != nil || !v.Armed || v.Text != p.Verdict.Text {
		t.Fatalf("verdict JSON %s, want armed with the verdict text", top["verdict"])
	}
	if _, ok := top["split"]; ok {
		t.Fatalf("an armed plan's JSON carries a split")
	}
	declined := Compute(seedInput(t, true))
	b, _ = declined.JSON()
	if !bytes.Contains(b, []byte(`"gpu_layers"`)) {
		t.Fatalf("a declined plan's JSON lacks the split: %s", b)
	}
}

func TestPlanLogsOneLineWithTheDecisionGroups(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	p := Compute(seedInput(t, true))
	p.Log(t.Context(), logger)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line is not one JSON object: %v\n%s", err, buf.String())
	}
	for _, g := range []string{"weights", "kv", "scratch", "headroom", "source", "pin", "verdict"} {
		if _, ok := line[g].(map[string]any); !ok {
			t.Errorf("log line lacks the group %q: %s", g, buf.String())
		}
	}
	verdict := line["verdict"].(map[string]any)
	if verdict["text"] != p.Verdict.Text || line["level"] != "WARN" {
		t.Fatalf("verdict group %v at level %v, want the declined text at WARN", verdict, line["level"])
	}
}

func TestBreakdownNamesEveryFigure(t *testing.T) {
	p := Compute(seedInput(t, true))
	out := p.Breakdown()
	for _, want := range []string{"weights   11167 MB (11709448192 bytes)", "attn ", "ffn ", "embd 125 MB", "output 162 MB",
		"131072 bytes per position", "scratch   349 MB", "heap      16303 MB", "budget    not reported",
		"headroom  3849 MB (27% of the cap under WDDM)", "pin       none", "usable    10406 MB",
		"binding cap 65535", "split     20 of 32 layers on GPU", p.Verdict.Text} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown lacks %q:\n%s", want, out)
		}
	}
}
