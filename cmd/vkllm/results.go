package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vkllm/vkllm/engine/bench"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("results", "list or export benchmark history (results import FILE adds llama-bench JSON/JSONL; results compare FILE... tables vkllm beside llama-bench)", runResults)
}

func runResults(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "import" {
		return runResultsImport(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "compare" {
		return runResultsCompare(args[1:])
	}
	fs := flag.NewFlagSet("results", flag.ContinueOnError)
	gpu := fs.String("gpu", "", "only runs on this GPU (name substring or device key)")
	model := fs.String("model", "", "only runs of this model (file name substring or sha256 prefix)")
	output := fs.String("o", "table", "output: table, "+strings.Join(bench.Formats, ", "))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output != "table" && !validFormat(*output) {
		return fmt.Errorf("unknown -o %q: %w", *output, errUsage)
	}
	st, err := store.Open("")
	if err != nil {
		return fmt.Errorf("open results history: %w", err)
	}
	defer st.Close()
	runs, err := st.ListBenchRuns(ctx, store.BenchFilter{GPU: *gpu, Model: *model})
	if err != nil {
		return err
	}
	if *output != "table" {
		records := make([]bench.Record, 0, len(runs))
		for _, r := range runs {
			records = append(records, bench.RecordOf(r))
		}
		return bench.Write(os.Stdout, *output, records)
	}
	if len(runs) == 0 {
		fmt.Println("no benchmark runs recorded yet: run `vkllm bench` (or `vkllm results import llama-bench.json`)")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "id\twhen\tsource\tstatus\tgpu\tbackend\tplacement\tmodel\ttest\tdecode\tt/s\tttft ms\t")
	for _, r := range runs {
		when := time.UnixMilli(r.CreatedAtMs).Local().Format("2006-01-02 15:04")
		gpuName := r.GPUName
		if gpuName == "" {
			gpuName = "-"
		}
		rate := fmt.Sprintf("%.2f ± %.2f", r.AvgTS, r.StddevTS)
		if r.Status != store.BenchOK {
			rate = r.Status
		}
		ttft := "-"
		if r.TTFTNs > 0 {
			ttft = fmt.Sprintf("%.1f", float64(r.TTFTNs)/1e6)
		}
		decode := r.Decode // how tg steps ran: logits, greedy, greedy-chained
		if decode == "" {
			decode = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.ID, when, r.Source, r.Status, gpuName, r.Backend,
			r.Placement, shortModel(r.ModelFile), r.Test, decode, rate, ttft)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Println(resultsSummary(runs))
	return nil
}

// resultsSummary is the line under the table: rows and runs (the rows of one `vkllm bench` or
// one imported invocation are one run), then each noisy row with the reason.
func resultsSummary(runs []store.BenchRun) string {
	keys := map[string]bool{}
	var noisy []string
	for _, r := range runs {
		k := r.RunKey
		if k == "" {
			k = fmt.Sprintf("row:%d", r.ID)
		}
		keys[k] = true
		if r.Status == store.BenchOK {
			if ok, why := bench.Noisy(r.AvgTS, r.StddevTS); ok {
				noisy = append(noisy, fmt.Sprintf("row %d (%s) is %s", r.ID, r.Test, why))
			}
		}
	}
	line := fmt.Sprintf("%d row(s) in %d run(s)", len(runs), len(keys))
	if len(noisy) > 0 {
		line += "\n" + strings.Join(noisy, "\n")
	}
	return line
}

func shortModel(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		return path[i+1:]
	}
	return path
}

func runResultsImport(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("results import", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("results import takes one file of `llama-bench -o json` or `-o jsonl` output: %w", errUsage)
	}
	path := fs.Arg(0)
	st, err := store.Open("")
	if err != nil {
		return fmt.Errorf("open results history: %w", err)
	}
	defer st.Close()
	res, err := importResults(ctx, st, path)
	if err != nil {
		return err
	}
	fmt.Printf("imported %d new llama-bench row(s) from %s; %d already in the history (duplicates)\n", res.Added, path, res.Duplicates)
	return nil
}

// importResults adds the rows of a llama-bench JSON or JSONL file that the history does not
// already hold, in one transaction: a failure midway (a full disk, a kill) leaves none of them,
// and importing the file again adds nothing (bench.ImportRuns).
func importResults(ctx context.Context, st *store.Store, path string) (store.ImportResult, error) {
	records, err := bench.ReadLlamaBenchFile(path)
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("import %s: %w", path, err)
	}
	res, err := st.ImportBenchRuns(ctx, bench.ImportRuns(records))
	if err != nil {
		return store.ImportResult{}, fmt.Errorf("import %s: none of its %d row(s) were saved: %w", path, len(records), err)
	}
	return res, nil
}

// runResultsCompare prints vkllm's rows beside llama-bench's from JSON/JSONL files of either tool
// (`vkllm bench -o json`, `llama-bench -o json`), paired by model file and test.
func runResultsCompare(args []string) error {
	fs := flag.NewFlagSet("results compare", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("results compare takes the JSON or JSONL files of `vkllm bench -o json` and `llama-bench -o json` runs: %w", errUsage)
	}
	var records []bench.Record
	for _, path := range fs.Args() {
		recs, err := bench.ReadLlamaBenchFile(path)
		if err != nil {
			return fmt.Errorf("compare %s: %w", path, err)
		}
		records = append(records, recs...)
	}
	return bench.WriteComparison(os.Stdout, bench.Compare(records))
}
