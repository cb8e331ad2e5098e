package bench

import (
	"testing"
	"time"
)

func TestLoadLineSaysSizeTimeRateAndPageCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		load Load
		want string
	}{
		{"8B resident from the page cache", Load{Bytes: 4.58e9, Duration: 1210 * time.Millisecond, Placement: "resident", Cached: 1},
			"4.58 GB in 1.21 s (3.8 GB/s) to resident, the file 100% in the page cache"},
		{"tiny model on the CPU", Load{Bytes: 1185376, Duration: 4 * time.Millisecond, Placement: "cpu", Cached: -1},
			"1.19 MB in 4 ms (0.30 GB/s) to cpu"},
		{"half from disk", Load{Bytes: 2e9, Duration: 4 * time.Second, Placement: "split 10 of 32", Cached: 0.5},
			"2.00 GB in 4.00 s (0.50 GB/s) to split 10 of 32, the file 50% in the page cache (the rest read from disk)"},
		{"1B resident, the GPU's setup timed", Load{Bytes: 0.62e9, Duration: 225 * time.Millisecond, Placement: "resident", Cached: 1, GPUSetup: 150 * time.Millisecond},
			"0.62 GB in 225 ms (2.8 GB/s) to resident, the file 100% in the page cache; 150 ms of it the GPU's instance and device, the rest at 8.3 GB/s"},
		{"a setup longer than the load is not split out", Load{Bytes: 1e9, Duration: time.Second, Placement: "resident", Cached: -1, GPUSetup: 2 * time.Second},
			"1.00 GB in 1.00 s (1.0 GB/s) to resident"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.load.String(); got != tc.want {
				t.Errorf("load line\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	if LoadGBps(0, 5) != 0 || LoadGBps(5, 0) != 0 || LoadGBps(3e9, 1e9) != 3 {
		t.Error("LoadGBps: want 0 for an unmeasured load and bytes/ns otherwise")
	}
}
