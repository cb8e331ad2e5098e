package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Formats are the output forms `vkllm bench -o` and `vkllm results -o` accept.
var Formats = []string{"md", "json", "jsonl", "csv", "sql"}

// Write renders records in one of Formats.
func Write(w io.Writer, format string, records []Record) error {
	switch format {
	case "md", "":
		return WriteMarkdown(w, records)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if records == nil {
			records = []Record{}
		}
		return enc.Encode(records)
	case "jsonl":
		enc := json.NewEncoder(w)
		for _, r := range records {
			if err := enc.Encode(r); err != nil {
				return fmt.Errorf("write jsonl record: %w", err)
			}
		}
		return nil
	case "csv":
		return writeCSV(w, records)
	case "sql":
		return writeSQL(w, records)
	}
	return fmt.Errorf("unknown output format %q (want one of %s)", format, strings.Join(Formats, ", "))
}

// HumanSize prints bytes the way llama-bench's size column does.
func HumanSize(b int64) string {
	const gib, mib = 1 << 30, 1 << 20
	if b >= gib {
		return fmt.Sprintf("%.2f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%.2f MiB", float64(b)/mib)
}

// HumanParams prints a parameter count as llama-bench's params column does (B, M or K).
func HumanParams(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
}

// WriteMarkdown prints a table a user can paste beside llama-bench's.
func WriteMarkdown(w io.Writer, records []Record) error {
	header := []string{"model", "size", "params", "backend", "placement", "test", "t/s"}
	rows := [][]string{header}
	for _, r := range records {
		placement := r.Placement
		if placement == "" {
			placement = fmt.Sprintf("ngl %d", r.NGPULayers)
		}
		rows = append(rows, []string{
			r.ModelType, HumanSize(r.ModelSize), HumanParams(r.ModelParams), r.Backends, placement,
			r.TestName(), fmt.Sprintf("%.2f ± %.2f", r.AvgTs, r.StddevTs),
		})
	}
	widths := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	rightAligned := map[int]bool{1: true, 2: true, 5: true, 6: true}
	var b strings.Builder
	for ri, row := range rows {
		b.WriteString("|")
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
			if rightAligned[i] {
				fmt.Fprintf(&b, " %s%s |", pad, cell)
			} else {
				fmt.Fprintf(&b, " %s%s |", cell, pad)
			}
		}
		b.WriteString("\n")
		if ri == 0 {
			b.WriteString("|")
			for i := range header {
				dashes := strings.Repeat("-", widths[i])
				if rightAligned[i] {
					dashes = dashes[:len(dashes)-1] + ":"
				}
				fmt.Fprintf(&b, " %s |", dashes)
			}
			b.WriteString("\n")
		}
	}
	writeDecodeNotes(&b, records)
	_, err := io.WriteString(w, b.String())
	return err
}

// decodeWords says in a sentence how a tg test's steps ran (Record.Decode).
var decodeWords = map[string]string{
	DecodeLogits:        "each step evaluated a synthetic token and read back its logits",
	DecodeGreedy:        "a greedy generation, each step's token the argmax of the step before, picked on the device, one step submitted and waited for at a time",
	DecodeGreedyChained: "a greedy generation, each step's token the argmax of the step before, picked on the device, the next step queued behind the running one (VKLLM_GPU_CHAIN=0 runs one at a time)",
}

// writeDecodeNotes adds a line under the table for each way the tg rows' steps ran, so a table
// pasted beside llama-bench's says what its tg measured.
func writeDecodeNotes(b *strings.Builder, records []Record) {
	var seen []string
	for _, r := range records {
		if r.Decode != "" && !slices.Contains(seen, r.Decode) {
			seen = append(seen, r.Decode)
		}
	}
	if len(seen) > 0 {
		b.WriteString("\n")
	}
	for _, d := range seen {
		words := decodeWords[d]
		if words == "" {
			words = "as its record says"
		}
		fmt.Fprintf(b, "tg (%s): %s\n", d, words)
	}
}

// flatColumns are the scalar columns of the csv and sql forms, in llama-bench's order first.
var flatColumns = []string{
	"build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename", "model_type",
	"model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads", "type_k", "type_v", "n_gpu_layers",
	"n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
	"tool", "placement", "ttft_ms", "reps", "warmup", "load_ms", "load_gbps", "decode",
}

func flatValues(r Record) []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	i := func(x int64) string { return strconv.FormatInt(x, 10) }
	return []string{
		r.BuildCommit, strconv.Itoa(r.BuildNumber), r.CPUInfo, r.GPUInfo, r.Backends, r.ModelFile, r.ModelType,
		i(r.ModelSize), i(r.ModelParams), strconv.Itoa(r.NBatch), strconv.Itoa(r.NUBatch), strconv.Itoa(r.NThreads),
		r.TypeK, r.TypeV, strconv.Itoa(r.NGPULayers), strconv.Itoa(r.NPrompt), strconv.Itoa(r.NGen),
		strconv.Itoa(r.NDepth), r.TestTime, i(r.AvgNs), i(r.StddevNs), f(r.AvgTs), f(r.StddevTs),
		r.Tool, r.Placement, f(r.TTFTMs), strconv.Itoa(r.Reps), strconv.Itoa(r.Warmup), f(r.LoadMs), f(r.LoadGBps),
		r.Decode,
	}
}

func writeCSV(w io.Writer, records []Record) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(flatColumns); err != nil {
		return fmt.Errorf("write csv header: %w", err)
	}
	for _, r := range records {
		if err := cw.Write(flatValues(r)); err != nil {
			return fmt.Errorf("write csv row: %w", err)
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeSQL(w io.Writer, records []Record) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS test (\n")
	numeric := map[string]string{"build_number": "INTEGER", "model_size": "INTEGER", "model_n_params": "INTEGER",
		"n_batch": "INTEGER", "n_ubatch": "INTEGER", "n_threads": "INTEGER", "n_gpu_layers": "INTEGER",
		"n_prompt": "INTEGER", "n_gen": "INTEGER", "n_depth": "INTEGER", "avg_ns": "INTEGER", "stddev_ns": "INTEGER",
		"avg_ts": "REAL", "stddev_ts": "REAL", "ttft_ms": "REAL", "reps": "INTEGER", "warmup": "INTEGER",
		"load_ms": "REAL", "load_gbps": "REAL"}
	for i, c := range flatColumns {
		typ := numeric[c]
		if typ == "" {
			typ = "TEXT"
		}
		sep := ","
		if i == len(flatColumns)-1 {
			sep = ""
		}
		fmt.Fprintf(&b, "  %s %s%s\n", c, typ, sep)
	}
	b.WriteString(");\n\n")
	for _, r := range records {
		vals := flatValues(r)
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		fmt.Fprintf(&b, "INSERT INTO test (%s) VALUES (%s);\n", strings.Join(flatColumns, ", "), strings.Join(quoted, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
