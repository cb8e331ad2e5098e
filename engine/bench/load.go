package bench

import (
	"fmt"
	"time"
)

// Load is the time a model took from its file to ready to evaluate: engine.Load as the bench
// times it (open and map the file, read the tokenizer, plan, upload every weight and allocate the
// cache on its placement). Bytes is the file's size, so GBps is the rate a user waits at.
type Load struct {
	Bytes     int64
	Duration  time.Duration
	Placement string // "resident", "split 22 of 32", "cpu"
	// Cached is the share of the file's pages that were in the page cache before the load
	// (PageCacheFraction), -1 when it was not measured. Below 1 the rate includes disk reads.
	Cached float64
	// GPUSetup is the part of Duration that went to the GPU's instance and device (a process's
	// fixed cost, engine.ModelInfo.GPUSetup); 0 when none was timed.
	GPUSetup time.Duration
}

// GBps is the load rate in 10^9 bytes per second, 0 for an unmeasured load.
func (l Load) GBps() float64 { return LoadGBps(l.Bytes, l.Duration.Nanoseconds()) }

// LoadGBps is bytes over nanoseconds in 10^9 bytes per second, 0 when either is not positive.
func LoadGBps(bytes, ns int64) float64 {
	if bytes <= 0 || ns <= 0 {
		return 0
	}
	return float64(bytes) / float64(ns)
}

// String is the line `vkllm bench` prints: "4.58 GB in 1.21 s (3.8 GB/s) to resident, the file
// 100% in the page cache", and where the GPU's setup was timed "; 150 ms of it the GPU's
// instance and device, the rest at 4.4 GB/s".
func (l Load) String() string {
	size := fmt.Sprintf("%.2f GB", float64(l.Bytes)/1e9)
	if l.Bytes < 1e7 {
		size = fmt.Sprintf("%.2f MB", float64(l.Bytes)/1e6)
	}
	took := fmt.Sprintf("%.2f s", l.Duration.Seconds())
	if l.Duration < time.Second {
		took = fmt.Sprintf("%d ms", l.Duration.Round(time.Millisecond).Milliseconds())
	}
	rate := fmt.Sprintf("%.1f GB/s", l.GBps())
	if l.GBps() < 1 {
		rate = fmt.Sprintf("%.2f GB/s", l.GBps())
	}
	s := fmt.Sprintf("%s in %s (%s)", size, took, rate)
	if l.Placement != "" {
		s += " to " + l.Placement
	}
	switch {
	case l.Cached < 0: // not measured (the embedded model has no file); say nothing
	case l.Cached >= 1:
		s += ", the file 100% in the page cache"
	default:
		s += fmt.Sprintf(", the file %.0f%% in the page cache (the rest read from disk)", 100*l.Cached)
	}
	if l.GPUSetup > 0 && l.GPUSetup < l.Duration {
		s += fmt.Sprintf("; %d ms of it the GPU's instance and device, the rest at %.1f GB/s",
			l.GPUSetup.Round(time.Millisecond).Milliseconds(), LoadGBps(l.Bytes, (l.Duration-l.GPUSetup).Nanoseconds()))
	}
	return s
}
