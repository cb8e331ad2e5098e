package app

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/vkllm/vkllm/store"
)

// failBenchInserts makes every insert of a bench row matching when (an SQL condition on NEW)
// fail with message, through a trigger in the store's file, as a full disk would fail it midway.
func failBenchInserts(t *testing.T, st *store.Store, when, message string) {
	t.Helper()
	db, err := sql.Open("sqlite3", st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := fmt.Sprintf(`CREATE TRIGGER inject_failure BEFORE INSERT ON bench_runs WHEN %s BEGIN SELECT RAISE(ABORT, '%s'); END`, when, message)
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("install the failing trigger: %v", err)
	}
}

func savedBenchRows(t *testing.T, st *store.Store) int {
	t.Helper()
	runs, err := st.ListBenchRuns(context.Background(), store.BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

const injectedCause = "injected failure: database or disk is full"

func TestBenchRunIsSavedWholeOrNotAtAll(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failWhen string // SQL condition on the inserted row; "" = no failure
		wantRows int
	}{
		{"both tests save", "", 2},
		{"the second test's row fails", "NEW.test LIKE 'tg%'", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openBenchStore(t)
			if tc.failWhen != "" {
				failBenchInserts(t, st, tc.failWhen, injectedCause)
			}
			rec := &recorder{}
			svc := NewBenchService(context.Background(), &fakeBenchEngine{}, st, rec)
			rows, err := svc.Run(BenchSettings{NPrompt: 32, NGen: 16, Reps: 2})
			if got := savedBenchRows(t, st); got != tc.wantRows {
				t.Fatalf("%d rows in the history, want %d (all or none)", got, tc.wantRows)
			}
			if len(rows) != tc.wantRows {
				t.Errorf("Run returned %d rows, want %d (only rows that were saved)", len(rows), tc.wantRows)
			}
			events := rec.benchEvents()
			last := events[len(events)-1]
			if tc.failWhen == "" {
				if err != nil || last.Kind != BenchFinished || len(last.Rows) != 2 {
					t.Fatalf("Run: %v, last event %+v", err, last)
				}
				return
			}
			if err == nil {
				t.Fatal("Run succeeded though a row could not be saved")
			}
			for _, msg := range []string{err.Error(), last.Error} {
				for _, want := range []string{"none of the 2 result(s) were saved", injectedCause} {
					if !strings.Contains(msg, want) {
						t.Errorf("%q does not say %q", msg, want)
					}
				}
			}
			if len(last.Rows) != 0 {
				t.Errorf("the finished event lists %d rows that were not saved", len(last.Rows))
			}
		})
	}
}

func TestBenchImportIsSavedWholeOrNotAtAll(t *testing.T) {
	var lines strings.Builder
	for _, m := range []string{"/peer/a.gguf", "/peer/b.gguf", "/peer/c.gguf"} {
		fmt.Fprintf(&lines, `{"gpu_info":"Fake GPU","backends":"Vulkan","model_filename":%q,"n_prompt":0,"n_gen":16,"avg_ns":200000000,"avg_ts":80,"samples_ns":[200000000],"samples_ts":[80]}`+"\n", m)
	}
	path := filepath.Join(t.TempDir(), "peer.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		failWhen string
		wantRows int
	}{
		{"every row saves", "", 3},
		{"the second row fails", "NEW.model_file = '/peer/b.gguf'", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openBenchStore(t)
			if tc.failWhen != "" {
				failBenchInserts(t, st, tc.failWhen, injectedCause)
			}
			svc := NewBenchService(context.Background(), &fakeBenchEngine{}, st, &recorder{})
			res, err := svc.Import(path)
			n := res.Added
			if got := savedBenchRows(t, st); got != tc.wantRows || n != tc.wantRows {
				t.Fatalf("Import = %d, %v; %d rows in the history, want %d (all or none)", n, err, got, tc.wantRows)
			}
			if tc.failWhen == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, want := range []string{path, "none of its 3 row(s) were saved", injectedCause} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("Import error %v does not say %q", err, want)
				}
			}
		})
	}
}
