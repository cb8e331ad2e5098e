package main

import (
	"strings"
	"testing"

	"github.com/vkllm/vkllm/store"
)

func TestResultsSummaryCountsRunsAndNamesNoisyRows(t *testing.T) {
	ok := func(id int64, key, test string, avg, sd float64) store.BenchRun {
		return store.BenchRun{ID: id, RunKey: key, Status: store.BenchOK, Test: test, AvgTS: avg, StddevTS: sd}
	}
	for _, tc := range []struct {
		name string
		runs []store.BenchRun
		want []string
		not  []string
	}{
		{"one run of two rows", []store.BenchRun{ok(1, "a", "pp512", 100, 1), ok(2, "a", "tg128", 50, 1)}, []string{"2 row(s) in 1 run(s)"}, []string{"noisy"}},
		{"rows from before run keys count one each", []store.BenchRun{ok(1, "", "pp512", 100, 1), ok(2, "", "tg128", 50, 1), ok(3, "b", "pp512", 100, 1)}, []string{"3 row(s) in 3 run(s)"}, nil},
		{"a noisy row is named with the reason", []store.BenchRun{ok(7, "a", "pp512", 3041.91, 3193.68)}, []string{"1 row(s) in 1 run(s)", "row 7 (pp512) is noisy: the spread ±3193.68 t/s is 105% of the mean"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resultsSummary(tc.runs)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary %q lacks %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("summary %q has %q", got, w)
				}
			}
		})
	}
}
