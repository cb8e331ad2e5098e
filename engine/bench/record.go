package bench

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Record is one test row. Fields that llama-bench also writes use llama-bench's JSON names, so a
// tool reading either tool's output finds the same keys; vkllm's additions come after them.
type Record struct {
	BuildCommit string     `json:"build_commit"`
	BuildNumber int        `json:"build_number"`
	CPUInfo     string     `json:"cpu_info"`
	GPUInfo     string     `json:"gpu_info"`
	Backends    string     `json:"backends"`
	ModelFile   string     `json:"model_filename"`
	ModelType   string     `json:"model_type"`
	ModelSize   int64      `json:"model_size"`
	ModelParams int64      `json:"model_n_params"`
	NBatch      int        `json:"n_batch"`
	NUBatch     int        `json:"n_ubatch"`
	NThreads    int        `json:"n_threads"`
	TypeK       string     `json:"type_k"`
	TypeV       string     `json:"type_v"`
	NGPULayers  int        `json:"n_gpu_layers"`
	FlashAttn   *FlashAttn `json:"flash_attn,omitempty"` // llama-bench's setting of the row; nil in vkllm's rows
	NPrompt     int        `json:"n_prompt"`
	NGen        int        `json:"n_gen"`
	NDepth      int        `json:"n_depth"`
	TestTime    string     `json:"test_time"` // RFC 3339, UTC
	Summary

	// vkllm's own fields.
	Tool      string  `json:"tool,omitempty"`      // "vkllm" or "llama-bench"
	Placement string  `json:"placement,omitempty"` // "resident", "split L of M", "cpu"
	TTFTMs    float64 `json:"ttft_ms,omitempty"`   // pp tests: mean time until the first token could be sampled
	Reps      int     `json:"reps,omitempty"`
	Warmup    int     `json:"warmup,omitempty"`
	// The model's load before the run: from the file (in the page cache, when it was) to ready
	// to evaluate on its placement. Zero when the run did not load the model itself.
	LoadMs   float64 `json:"load_ms,omitempty"`
	LoadGBps float64 `json:"load_gbps,omitempty"` // model_size / load time, in 10^9 bytes per second
	// Decode says how a tg test's steps ran (DecodeLogits, DecodeGreedy, DecodeGreedyChained);
	// "" for pp tests and for rows from before vkllm recorded it.
	Decode string `json:"decode,omitempty"`
}

// How a tg test's steps ran (Record.Decode).
const (
	// DecodeLogits: each step evaluated the next synthetic token and read back its logits.
	DecodeLogits = "logits"
	// DecodeGreedy: a greedy generation, each step's token the argmax of the step before,
	// picked on the device, one step submitted and waited for at a time.
	DecodeGreedy = "greedy"
	// DecodeGreedyChained: DecodeGreedy with the next step queued behind the running one
	// (VKLLM_GPU_CHAIN).
	DecodeGreedyChained = "greedy-chained"
)

// FlashAttn is llama-bench's flash_attn field: a boolean in older builds, -1 (auto), 0 (off) or
// 1 (on) since `-fa` took on|off|auto.
type FlashAttn int

// FlashAttnAuto is -fa auto: llama.cpp decides per device.
const FlashAttnAuto FlashAttn = -1

// UnmarshalJSON reads either form.
func (f *FlashAttn) UnmarshalJSON(b []byte) error {
	switch s := string(bytes.TrimSpace(b)); s {
	case "true":
		*f = 1
	case "false":
		*f = 0
	default:
		v, err := strconv.Atoi(s)
		if err != nil || v < -1 || v > 1 {
			return fmt.Errorf("flash_attn %s: want true, false, -1, 0 or 1", s)
		}
		*f = FlashAttn(v)
	}
	return nil
}

// TestName is the llama-bench test label as its markdown table writes it: "pp512", "tg128",
// "pp512 @ d4096" for a test run with 4096 tokens already in the cache.
func (r Record) TestName() string {
	var name string
	switch {
	case r.NPrompt > 0 && r.NGen > 0:
		name = fmt.Sprintf("pp%d+tg%d", r.NPrompt, r.NGen)
	case r.NPrompt > 0:
		name = fmt.Sprintf("pp%d", r.NPrompt)
	default:
		name = fmt.Sprintf("tg%d", r.NGen)
	}
	if r.NDepth > 0 {
		name += fmt.Sprintf(" @ d%d", r.NDepth)
	}
	return name
}

// ParseLlamaBench reads llama-bench output in its JSON (one array), JSONL (one object a line) or
// CSV (a header of its column names, build_commit first) form. Records come back with Tool "llama-bench" unless they say otherwise.
func ParseLlamaBench(r io.Reader) ([]Record, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read llama-bench output: %w", err)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("read llama-bench output: empty input (expected the JSON of `llama-bench -o json` or `-o jsonl`)")
	}
	var records []Record
	if bytes.HasPrefix(trimmed, []byte("build_commit,")) {
		if records, err = parseCSV(trimmed); err != nil {
			return nil, err
		}
	} else if trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &records); err != nil {
			return nil, fmt.Errorf("parse llama-bench JSON array: %w", err)
		}
	} else {
		sc := bufio.NewScanner(bytes.NewReader(trimmed))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		line := 0
		for sc.Scan() {
			line++
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			var rec Record
			if err := json.Unmarshal([]byte(text), &rec); err != nil {
				return nil, fmt.Errorf("parse llama-bench JSONL line %d: %w", line, err)
			}
			records = append(records, rec)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("scan llama-bench JSONL: %w", err)
		}
	}
	for i := range records {
		if records[i].Tool == "" {
			records[i].Tool = "llama-bench"
		}
		if records[i].NPrompt == 0 && records[i].NGen == 0 {
			return nil, fmt.Errorf("llama-bench record %d has neither n_prompt nor n_gen: not llama-bench output", i)
		}
	}
	return records, nil
}

// csvText are the llama-bench CSV columns that hold text; every other known column is a number.
var csvText = map[string]bool{"build_commit": true, "cpu_info": true, "gpu_info": true, "backends": true,
	"model_filename": true, "model_type": true, "type_k": true, "type_v": true, "test_time": true, "tool": true,
	"placement": true}

// parseCSV reads `llama-bench -o csv` (and `vkllm results -o csv`): each row becomes the JSON
// object of its columns, so the CSV and JSON forms share one decoder. Columns Record does not
// know are ignored, as in the JSON form.
func parseCSV(data []byte) ([]Record, error) {
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse llama-bench CSV: %w", err)
	}
	header := rows[0]
	var records []Record
	for li, row := range rows[1:] {
		obj := map[string]any{}
		for i, col := range header {
			if i >= len(row) {
				break
			}
			v := row[i]
			if csvText[col] {
				obj[col] = v
			} else if n, err := strconv.ParseFloat(v, 64); err == nil {
				obj[col] = n
			} else if v != "" {
				obj[col] = v
			}
		}
		if fa, ok := obj["flash_attn"].(float64); ok {
			obj["flash_attn"] = int(fa)
		}
		js, _ := json.Marshal(obj) // a map of strings and numbers always marshals
		var rec Record
		if err := json.Unmarshal(js, &rec); err != nil {
			return nil, fmt.Errorf("parse llama-bench CSV line %d: %w", li+2, err)
		}
		records = append(records, rec)
	}
	return records, nil
}
