package bench

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A same-run comparison puts vkllm's rows beside llama-bench's on the same model files: one row
// per model and test, the peer's rate per flash-attention setting, and ours over the peer's
// best. `vkllm results compare` prints it; scripts/bench-gpu.sh builds issue 16's table with it.

// CompareRow is one model and test of a comparison.
type CompareRow struct {
	Model string            // our model_type ("llama 8B Q4_K"), else the peer's
	File  string            // the model file's base name: it pairs the two tools' rows
	Test  string            // "pp512", "tg128 @ d4096"
	Ours  *Record           // nil when only the peer ran the test
	Peer  map[string]Record // the peer's rows by setting (PeerSetting)
	spec  Spec
}

// PeerSetting is the column a llama-bench row belongs to: "fa0", "fa1", "fa auto", or "" for a
// row that does not say.
func PeerSetting(r Record) string {
	switch {
	case r.FlashAttn == nil:
		return ""
	case *r.FlashAttn == FlashAttnAuto:
		return "fa auto"
	default:
		return fmt.Sprintf("fa%d", *r.FlashAttn)
	}
}

// peerSettings is the column order.
var peerSettings = []string{"fa0", "fa1", "fa auto", ""}

// Best is the peer's fastest row and its setting; ok is false when the peer did not run the test.
func (c CompareRow) Best() (best Record, setting string, ok bool) {
	for _, s := range peerSettings {
		if r, found := c.Peer[s]; found && (!ok || r.AvgTs > best.AvgTs) {
			best, setting, ok = r, s, true
		}
	}
	return best, setting, ok
}

// Ratio is our rate over the peer's best, 0 when either is missing.
func (c CompareRow) Ratio() float64 {
	best, _, ok := c.Best()
	if c.Ours == nil || !ok || best.AvgTs <= 0 {
		return 0
	}
	return c.Ours.AvgTs / best.AvgTs
}

// medianRate is a row's median repetition rate (the middle one, or the mean of the middle two),
// its mean where the record holds no samples (an import without them).
func medianRate(r Record) float64 {
	if len(r.SamplesTs) == 0 {
		return r.AvgTs
	}
	v := append([]float64(nil), r.SamplesTs...)
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// MedianRatio is our median repetition over the peer's best median (its settings compared by
// their medians), 0 when either is missing. Unlike Ratio, one slow repetition on either side
// (llama-bench's first timed one often runs slow on a GPU; seen 171 t/s beside nine at 235-240)
// does not move it.
func (c CompareRow) MedianRatio() float64 {
	if c.Ours == nil {
		return 0
	}
	best := 0.0
	for _, r := range c.Peer {
		best = max(best, medianRate(r))
	}
	if best <= 0 {
		return 0
	}
	return medianRate(*c.Ours) / best
}

// Compare pairs records by model file and test. Rows come in the order the model files first
// appear, each file's tests in llama-bench's order (by depth, pp before tg). A later record of
// the same file, test, tool and setting replaces an earlier one.
func Compare(records []Record) []CompareRow {
	type key struct{ file, test string }
	var files []string
	seen := map[string]bool{}
	rows := map[key]*CompareRow{}
	for _, r := range records {
		file := filepath.Base(r.ModelFile)
		if !seen[file] {
			seen[file] = true
			files = append(files, file)
		}
		k := key{file, r.TestName()}
		row := rows[k]
		if row == nil {
			row = &CompareRow{File: file, Test: k.test, Peer: map[string]Record{}, spec: Spec{NPrompt: r.NPrompt, NGen: r.NGen, Depth: r.NDepth}}
			rows[k] = row
		}
		if r.Tool == "vkllm" {
			rec := r
			row.Ours = &rec
		} else {
			row.Peer[PeerSetting(r)] = r
		}
	}
	order := map[string]int{}
	for i, f := range files {
		order[f] = i
	}
	out := make([]CompareRow, 0, len(rows))
	for _, row := range rows {
		row.Model = row.File
		if row.Ours != nil && row.Ours.ModelType != "" {
			row.Model = row.Ours.ModelType
		} else {
			for _, s := range peerSettings {
				if p, ok := row.Peer[s]; ok && p.ModelType != "" {
					row.Model = p.ModelType
					break
				}
			}
		}
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if order[a.File] != order[b.File] {
			return order[a.File] < order[b.File]
		}
		return specLess(a.spec, b.spec)
	})
	return out
}

// specLess is llama-bench's order of tests: by depth, then pp, tg, pp+tg, then by size.
func specLess(a, b Spec) bool {
	kind := func(s Spec) int {
		switch {
		case s.NGen == 0:
			return 0
		case s.NPrompt == 0:
			return 1
		}
		return 2
	}
	if a.Depth != b.Depth {
		return a.Depth < b.Depth
	}
	if kind(a) != kind(b) {
		return kind(a) < kind(b)
	}
	if a.NPrompt != b.NPrompt {
		return a.NPrompt < b.NPrompt
	}
	return a.NGen < b.NGen
}

// WriteComparison prints a comparison as markdown: who ran on what, the table (model, test,
// vkllm t/s, one column per peer setting present, ratio to the peer's best mean, ratio of the
// medians), and the load of each model vkllm timed.
func WriteComparison(w io.Writer, rows []CompareRow) error {
	var b strings.Builder
	var ours, peer *Record
	present := map[string]bool{}
	for i := range rows {
		if rows[i].Ours != nil && ours == nil {
			ours = rows[i].Ours
		}
		for s, r := range rows[i].Peer {
			present[s] = true
			if peer == nil {
				p := r
				peer = &p
			}
		}
	}
	if ours != nil {
		fmt.Fprintf(&b, "vkllm %s on %s (%s)\n", orDash(ours.BuildCommit), orDash(ours.GPUInfo), orDash(ours.Backends))
	}
	if peer != nil {
		fmt.Fprintf(&b, "llama.cpp build %s (%d) on %s (%s)\n", orDash(peer.BuildCommit), peer.BuildNumber, orDash(peer.GPUInfo), orDash(peer.Backends))
	}
	b.WriteString("\n| model | test | vkllm t/s |")
	var cols []string
	for _, s := range peerSettings {
		if present[s] {
			cols = append(cols, s)
			fmt.Fprintf(&b, " %s |", strings.TrimSpace("llama.cpp "+s))
		}
	}
	b.WriteString(" ratio vs best | median ratio |\n|---|---|---:|")
	for range cols {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|\n")
	noisy := false
	rate := func(r Record) string {
		cell := fmt.Sprintf("%.2f ± %.2f", r.AvgTs, r.StddevTs)
		if n, _ := Noisy(r.AvgTs, r.StddevTs); n {
			noisy = true
			cell += " (noisy)"
		}
		return cell
	}
	for _, row := range rows {
		cell := "-"
		if row.Ours != nil {
			cell = rate(*row.Ours)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |", row.Model, row.Test, cell)
		for _, s := range cols {
			cell = "-"
			if r, ok := row.Peer[s]; ok {
				cell = rate(r)
			}
			fmt.Fprintf(&b, " %s |", cell)
		}
		ratio := "-"
		if x := row.Ratio(); x > 0 {
			_, best, _ := row.Best()
			ratio = fmt.Sprintf("%.2fx", x)
			if len(cols) > 1 {
				ratio += " vs " + best
			}
		}
		med := "-"
		if x := row.MedianRatio(); x > 0 {
			med = fmt.Sprintf("%.2fx", x)
		}
		fmt.Fprintf(&b, " %s | %s |\n", ratio, med)
	}
	b.WriteString("\nratio vs best: our mean over the peer's best mean (llama-bench's own figures); median ratio: our median repetition over the peer's best median, which one slow repetition does not move\n")
	if noisy {
		fmt.Fprintf(&b, "(noisy): the spread is over %.0f%% of the mean, so the repetitions disagree too much for the mean to compare; the median ratio holds, or rerun with more repetitions on an idle machine\n", 100*NoisyShare)
	}
	loaded := map[string]bool{}
	for _, row := range rows {
		if o := row.Ours; o != nil && o.LoadMs > 0 && !loaded[row.File] {
			if len(loaded) == 0 {
				b.WriteString("\n")
			}
			loaded[row.File] = true
			l := Load{Bytes: o.ModelSize, Duration: time.Duration(o.LoadMs * 1e6), Placement: o.Placement, Cached: -1}
			fmt.Fprintf(&b, "load %s (%s): %s\n", row.File, row.Model, l)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
