package store

import (
	"context"
	"database/sql"
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
	n_prompt, n_gen, reps, warmup, avg_ns, stddev_ns, avg_ts, stddev_ts, ttft_ns, n_depth, load_ns`

// fields lists pointers to r's columns in benchColumns order.
func (r *BenchRun) fields() []any {
	return []any{&r.ID, &r.CreatedAtMs, &r.Source, &r.Status, &r.Error, &r.Backend, &r.GPUKey, &r.GPUName,
		&r.GPUVendorID, &r.GPUDeviceID, &r.GPUUUID, &r.DriverName, &r.DriverVersion, &r.VulkanAPI, &r.Hostname,
		&r.OS, &r.Kernel, &r.CPU, &r.RAMBytes, &r.Threads, &r.EngineVersion, &r.EngineCommit, &r.ModelFile,
		&r.ModelSHA256, &r.ModelArch, &r.ModelType, &r.ModelParams, &r.ModelQuant, &r.ModelSize, &r.Context,
		&r.Placement, &r.PlanVerdict, &r.PlanHeadroomBytes, &r.PlanSource, &r.PlanPinMB, &r.Test, &r.NPrompt,
		&r.NGen, &r.Reps, &r.Warmup, &r.AvgNs, &r.StddevNs, &r.AvgTS, &r.StddevTS, &r.TTFTNs, &r.NDepth, &r.LoadNs}
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
// transaction: a kill or a full disk midway leaves none of them, never some.
func (s *Store) SaveBenchRuns(ctx context.Context, runs []BenchRun) ([]int64, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	for i := range runs {
		r := &runs[i]
		switch r.Status {
		case BenchOK, BenchFailed, BenchCancelled:
		default:
			return nil, fmt.Errorf("save bench run %s: status %q is not ok, failed or cancelled", r.Test, r.Status)
		}
	}
	cols := strings.Split(benchColumns, ",")[1:] // without id
	query := "INSERT INTO bench_runs(" + strings.Join(cols, ",") + ") VALUES (" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ") RETURNING id"
	op := "save bench run " + runs[0].Test
	if len(runs) > 1 {
		op = fmt.Sprintf("save %d bench runs", len(runs))
	}
	ids := make([]int64, len(runs))
	err := s.tx(ctx, op, func(tx *sql.Tx) error {
		for i, r := range runs {
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
			if err := tx.QueryRowContext(ctx, query, args...).Scan(&ids[i]); err != nil {
				return fmt.Errorf("run %s: %w", r.Test, err)
			}
			for _, smp := range r.Samples {
				if _, err := tx.ExecContext(ctx, "INSERT INTO bench_samples(run_id, rep, ns, tokens_per_sec) VALUES (?, ?, ?, ?)",
					ids[i], smp.Rep, smp.Ns, smp.TokensPerSec); err != nil {
					return fmt.Errorf("run %s sample %d: %w", r.Test, smp.Rep, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
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
