package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
)

// Bench run statuses.
const (
	BenchOK        = "ok"
	BenchFailed    = "failed"
	BenchCancelled = "cancelled"
)

// BenchRun is one benchmark row (one test such as pp512 or tg128 on one model and device) with the
// full context needed to compare it later: the device, the machine, the engine build, the model
// and the plan. Field names follow llama-bench's JSON where one exists.
type BenchRun struct {
	ID          int64  `json:"id"`
	CreatedAtMs int64  `json:"created_at_ms"` // 0 = now
	Source      string `json:"source"`        // "vkllm", or "llama-bench" for imported peer runs
	Status      string `json:"status"`        // ok | failed | cancelled
	Error       string `json:"error,omitempty"`

	Backend       string `json:"backend"` // "vulkan", "cpu"
	GPUKey        string `json:"gpu_key"`
	GPUName       string `json:"gpu_name"`
	GPUVendorID   uint32 `json:"gpu_vendor_id"`
	GPUDeviceID   uint32 `json:"gpu_device_id"`
	GPUUUID       string `json:"gpu_uuid"`
	DriverName    string `json:"driver_name"`
	DriverVersion string `json:"driver_version"`
	VulkanAPI     string `json:"vulkan_api_version"`
	Hostname      string `json:"hostname"`
	OS            string `json:"os"`
	Kernel        string `json:"kernel"`
	CPU           string `json:"cpu_info"`
	RAMBytes      int64  `json:"ram_bytes"`
	Threads       int    `json:"n_threads"`
	EngineVersion string `json:"build_version"`
	EngineCommit  string `json:"build_commit"`

	ModelFile   string `json:"model_filename"`
	ModelSHA256 string `json:"model_sha256"`
	ModelArch   string `json:"model_arch"`
	ModelType   string `json:"model_type"`
	ModelParams int64  `json:"model_n_params"`
	ModelQuant  string `json:"model_quant"`
	ModelSize   int64  `json:"model_size"`

	Context           int    `json:"n_ctx"`
	Placement         string `json:"placement"` // "resident", "split L of M", "cpu"
	PlanVerdict       string `json:"plan_verdict"`
	PlanHeadroomBytes int64  `json:"plan_headroom_bytes"`
	PlanSource        string `json:"plan_source"`
	PlanPinMB         int    `json:"plan_pin_mb"`

	Test     string  `json:"test"` // "pp512", "tg128", "tg128 @ d4096"
	NPrompt  int     `json:"n_prompt"`
	NGen     int     `json:"n_gen"`
	NDepth   int     `json:"n_depth"` // tokens already in the cache when the test ran (llama-bench's -d)
	Reps     int     `json:"reps"`
	Warmup   int     `json:"warmup"`
	AvgNs    int64   `json:"avg_ns"`
	StddevNs int64   `json:"stddev_ns"`
	AvgTS    float64 `json:"avg_ts"`
	StddevTS float64 `json:"stddev_ts"`
	TTFTNs   int64   `json:"ttft_ns"`
	LoadNs   int64   `json:"load_ns"` // the model's load before the run, file to ready; 0 = not timed
	// Decode is how a tg test's steps ran: "logits", "greedy", "greedy-chained" (engine/bench's
	// Decode* constants); "" for pp tests, imported rows and rows from before the column.
	Decode string `json:"decode,omitempty"`
	// RunKey names the run the row belongs to: the rows of one click, one `vkllm bench` or one
	// llama-bench invocation share it. SaveBenchRuns gives rows without one a fresh key of their
	// own batch; rows saved before the column existed read as "" and count as a run each.
	RunKey string `json:"run_key,omitempty"`

	Samples []BenchSample `json:"samples"`
}

// BenchSample is one timed repetition.
type BenchSample struct {
	Rep          int     `json:"rep"`
	Ns           int64   `json:"ns"`
	TokensPerSec float64 `json:"ts"`
}

// BenchFilter selects runs; empty fields match everything. GPU matches the GPU name
// (case-insensitive substring) or key; Model matches the model file (substring) or a sha256 prefix.
type BenchFilter struct {
	GPU   string
	Model string
}

const benchColumns = `id, created_at_ms, source, status, error, backend, gpu_key, gpu_name, gpu_vendor_id, gpu_device_id,
	gpu_uuid, driver_name, driver_version, vulkan_api, hostname, os, kernel, cpu, ram_bytes, threads,
	engine_version, engine_commit, model_file, model_sha256, model_arch, model_type, model_params, model_quant,
	model_size, context, placement, plan_verdict, plan_headroom_bytes, plan_source, plan_pin_mb, test,
	n_prompt, n_gen, reps, warmup, avg_ns, stddev_ns, avg_ts, stddev_ts, ttft_ns, n_depth, load_ns, run_key, decode`

// fields lists pointers to r's columns in benchColumns order.
func (r *BenchRun) fields() []any {
	return []any{&r.ID, &r.CreatedAtMs, &r.Source, &r.Status, &r.Error, &r.Backend, &r.GPUKey, &r.GPUName,
		&r.GPUVendorID, &r.GPUDeviceID, &r.GPUUUID, &r.DriverName, &r.DriverVersion, &r.VulkanAPI, &r.Hostname,
		&r.OS, &r.Kernel, &r.CPU, &r.RAMBytes, &r.Threads, &r.EngineVersion, &r.EngineCommit, &r.ModelFile,
		&r.ModelSHA256, &r.ModelArch, &r.ModelType, &r.ModelParams, &r.ModelQuant, &r.ModelSize, &r.Context,
		&r.Placement, &r.PlanVerdict, &r.PlanHeadroomBytes, &r.PlanSource, &r.PlanPinMB, &r.Test, &r.NPrompt,
		&r.NGen, &r.Reps, &r.Warmup, &r.AvgNs, &r.StddevNs, &r.AvgTS, &r.StddevTS, &r.TTFTNs, &r.NDepth, &r.LoadNs, &r.RunKey, &r.Decode}
}

// SaveBenchRun stores a run and its samples in one transaction and returns its id. A failed or
// cancelled run is saved too, with Status and Error saying so.
func (s *Store) SaveBenchRun(ctx context.Context, r BenchRun) (int64, error) {
	ids, err := s.SaveBenchRuns(ctx, []BenchRun{r})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// SaveBenchRuns stores the rows of one bench invocation (each test with its samples) in one
// transaction: a kill or a full disk midway leaves none of them, never some. Rows without a
// RunKey get one key for the whole batch: they are one run.
func (s *Store) SaveBenchRuns(ctx context.Context, runs []BenchRun) ([]int64, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	if err := checkStatuses(runs); err != nil {
		return nil, err
	}
	op := "save bench run " + runs[0].Test
	if len(runs) > 1 {
		op = fmt.Sprintf("save %d bench runs", len(runs))
	}
	key := NewRunKey()
	ids := make([]int64, len(runs))
	err := s.tx(ctx, op, func(tx *sql.Tx) error {
		for i, r := range runs {
			if r.RunKey == "" {
				r.RunKey = key
			}
			id, err := insertBenchRun(ctx, tx, r)
			if err != nil {
				return err
			}
			ids[i] = id
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// ImportResult says what an import did: how many rows were new and how many the history
// already held (a second import of the same file, or the export of our own rows).
type ImportResult struct {
	Added      int     `json:"added"`
	Duplicates int     `json:"duplicates"`
	IDs        []int64 `json:"ids,omitempty"` // of the added rows
}

// ImportBenchRuns stores the rows the history does not already hold, all in one transaction, and
// says how many were new and how many duplicates. A row is a duplicate of a saved one with the
// same identity (DedupeKey): source, test, model file, GPU, CPU, the second it ran and its
// timings (not its status: llama-bench's JSON has none); duplicates within runs count too. Rows without a RunKey are one run, as in
// SaveBenchRuns.
func (s *Store) ImportBenchRuns(ctx context.Context, runs []BenchRun) (ImportResult, error) {
	var res ImportResult
	if len(runs) == 0 {
		return res, nil
	}
	if err := checkStatuses(runs); err != nil {
		return res, err
	}
	key := NewRunKey()
	err := s.tx(ctx, fmt.Sprintf("import %d bench runs", len(runs)), func(tx *sql.Tx) error {
		res = ImportResult{}
		for _, r := range runs {
			if r.CreatedAtMs == 0 {
				r.CreatedAtMs = nowMs()
			}
			if r.Source == "" {
				r.Source = "vkllm"
			}
			dup, err := hasBenchRun(ctx, tx, r)
			if err != nil {
				return err
			}
			if dup {
				res.Duplicates++
				continue
			}
			if r.RunKey == "" {
				r.RunKey = key
			}
			id, err := insertBenchRun(ctx, tx, r)
			if err != nil {
				return err
			}
			res.Added++
			res.IDs = append(res.IDs, id)
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, err
	}
	return res, nil
}

// DedupeKey is a row's identity for imports: two rows with the same key are the same
// measurement. The time counts to the second, as llama-bench's test_time (RFC 3339) keeps it.
func DedupeKey(r BenchRun) string {
	return strings.Join([]string{r.Source, r.Test, r.ModelFile, strings.ToLower(strings.TrimSpace(r.GPUName)),
		strings.TrimSpace(r.CPU), fmt.Sprint(r.CreatedAtMs / 1000), fmt.Sprint(r.AvgNs), fmt.Sprint(r.StddevNs)}, "\x00")
}

// hasBenchRun tells whether the history holds a row with r's DedupeKey.
func hasBenchRun(ctx context.Context, tx *sql.Tx, r BenchRun) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM bench_runs WHERE source = ? AND test = ? AND model_file = ? AND avg_ns = ?
		AND stddev_ns = ? AND lower(trim(gpu_name)) = ? AND trim(cpu) = ? AND created_at_ms / 1000 = ?`,
		r.Source, r.Test, r.ModelFile, r.AvgNs, r.StddevNs, strings.ToLower(strings.TrimSpace(r.GPUName)),
		strings.TrimSpace(r.CPU), r.CreatedAtMs/1000).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("look up run %s: %w", r.Test, err)
	}
	return n > 0, nil
}

func checkStatuses(runs []BenchRun) error {
	for _, r := range runs {
		switch r.Status {
		case BenchOK, BenchFailed, BenchCancelled:
		default:
			return fmt.Errorf("save bench run %s: status %q is not ok, failed or cancelled", r.Test, r.Status)
		}
	}
	return nil
}

// insertBenchRun inserts one row and its samples in tx.
func insertBenchRun(ctx context.Context, tx *sql.Tx, r BenchRun) (int64, error) {
	cols := strings.Split(benchColumns, ",")[1:] // without id
	query := "INSERT INTO bench_runs(" + strings.Join(cols, ",") + ") VALUES (" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ") RETURNING id"
	if r.CreatedAtMs == 0 {
		r.CreatedAtMs = nowMs()
	}
	if r.Source == "" {
		r.Source = "vkllm"
	}
	vals := r.fields()[1:]
	args := make([]any, len(vals))
	for j, p := range vals {
		args[j] = deref(p)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&id); err != nil {
		return 0, fmt.Errorf("run %s: %w", r.Test, err)
	}
	for _, smp := range r.Samples {
		if _, err := tx.ExecContext(ctx, "INSERT INTO bench_samples(run_id, rep, ns, tokens_per_sec) VALUES (?, ?, ?, ?)",
			id, smp.Rep, smp.Ns, smp.TokensPerSec); err != nil {
			return 0, fmt.Errorf("run %s sample %d: %w", r.Test, smp.Rep, err)
		}
	}
	return id, nil
}

// NewRunKey is a fresh run key: 16 random hex digits.
func NewRunKey() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("store: no randomness for a run key: %v", err)) // crypto/rand does not fail on supported systems
	}
	return hex.EncodeToString(b[:])
}

func deref(p any) any {
	switch v := p.(type) {
	case *int64:
		return *v
	case *int:
		return *v
	case *uint32:
		return int64(*v)
	case *string:
		return *v
	case *float64:
		return *v
	}
	panic(fmt.Sprintf("store: bench column of type %T", p)) // a programming error in fields()
}

// ListBenchRuns returns the runs matching f, newest first, each with its samples.
func (s *Store) ListBenchRuns(ctx context.Context, f BenchFilter) ([]BenchRun, error) {
	where := "1=1"
	var args []any
	if f.GPU != "" {
		where += " AND (gpu_name LIKE ? ESCAPE '\\' OR gpu_key = ?)"
		args = append(args, "%"+likeEscape(f.GPU)+"%", f.GPU)
	}
	if f.Model != "" {
		where += " AND (model_file LIKE ? ESCAPE '\\' OR model_sha256 LIKE ? ESCAPE '\\')"
		args = append(args, "%"+likeEscape(f.Model)+"%", likeEscape(strings.ToLower(f.Model))+"%")
	}
	query := "SELECT " + benchColumns + " FROM bench_runs WHERE " + where
	query += " ORDER BY created_at_ms DESC, id DESC"
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.fail("list bench runs", err)
	}
	var out []BenchRun
	index := map[int64]int{}
	for rows.Next() {
		var r BenchRun
		if err := rows.Scan(r.fields()...); err != nil {
			rows.Close()
			return nil, s.fail("list bench runs", err)
		}
		index[r.ID] = len(out)
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, s.fail("list bench runs", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	srows, err := s.db.QueryContext(ctx, "SELECT run_id, rep, ns, tokens_per_sec FROM bench_samples WHERE run_id IN (SELECT id FROM bench_runs WHERE "+where+") ORDER BY run_id, rep", args...)
	if err != nil {
		return nil, s.fail("list bench samples", err)
	}
	defer srows.Close()
	for srows.Next() {
		var id int64
		var smp BenchSample
		if err := srows.Scan(&id, &smp.Rep, &smp.Ns, &smp.TokensPerSec); err != nil {
			return nil, s.fail("list bench samples", err)
		}
		if i, ok := index[id]; ok {
			out[i].Samples = append(out[i].Samples, smp)
		}
	}
	if err := srows.Err(); err != nil {
		return nil, s.fail("list bench samples", err)
	}
	return out, nil
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
