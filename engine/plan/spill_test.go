package plan

import "testing"

func TestSpillWarningFiresOnlyPastTheReportedBudget(t *testing.T) {
	p := Plan{UsableBytes: 12 * GiB}
	tests := []struct {
		name  string
		after Device
		want  string
	}{
		{"usage past the budget warns with a smaller pin", Device{BudgetReported: true, BudgetBytes: 14 * GiB, UsageBytes: 15 * GiB},
			"resident driver spilled - after warm-up the heap uses 15360 MB of a 14336 MB budget, 1024 MB past it, so part of the model may sit in system memory and decode slows; VKLLM_GPU_VRAM_MB=10368 pins a cap that leaves the margin free"},
		{"usage at the budget is no spill", Device{BudgetReported: true, BudgetBytes: 14 * GiB, UsageBytes: 14 * GiB}, ""},
		{"no report tells nothing", Device{UsageBytes: 15 * GiB}, ""},
		{"a spill larger than the plan suggests no number", Device{BudgetReported: true, BudgetBytes: 2 * GiB, UsageBytes: 15 * GiB},
			"resident driver spilled - after warm-up the heap uses 15360 MB of a 2048 MB budget, 13312 MB past it, so part of the model may sit in system memory and decode slows; VKLLM_GPU_VRAM_MB=<MiB> pins a smaller cap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, spilled := SpillWarning(p, tc.after)
			if got != tc.want || spilled != (tc.want != "") {
				t.Fatalf("SpillWarning = %q, %v\nwant %q", got, spilled, tc.want)
			}
		})
	}
}
