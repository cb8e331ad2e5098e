// Package bench measures prompt processing (pp) and token generation (tg) the way llama-bench
// does, so a vkllm row can sit beside a llama-bench row and mean the same thing: pp N is one
// batched prefill of N synthetic tokens from an empty cache, tg N is N single-token decode steps
// from an empty cache, untimed warm-up runs precede the timed repetitions (one, as llama-bench's;
// on a GPU at least two and up to five while runs under a second still speed up:
// Config.SteadyWarmup), and a row is the mean of the per-repetition rates with their sample
// standard deviation (n-1).
package bench

import "math"

// Summary condenses the timed repetitions of one test.
type Summary struct {
	AvgNs     int64     `json:"avg_ns"`
	StddevNs  int64     `json:"stddev_ns"`
	AvgTs     float64   `json:"avg_ts"`
	StddevTs  float64   `json:"stddev_ts"`
	SamplesNs []int64   `json:"samples_ns"`
	SamplesTs []float64 `json:"samples_ts"`
}

// Summarize turns per-repetition durations for a test of nTokens tokens into the llama-bench
// figures: avg_ts is the mean of the per-repetition rates (not the rate of the mean time), and both
// deviations are sample standard deviations (n-1), zero for a single sample.
func Summarize(samplesNs []int64, nTokens int) Summary {
	s := Summary{SamplesNs: append([]int64(nil), samplesNs...)}
	if len(samplesNs) == 0 {
		return s
	}
	ns := make([]float64, len(samplesNs))
	s.SamplesTs = make([]float64, len(samplesNs))
	for i, v := range samplesNs {
		ns[i] = float64(v)
		if v > 0 {
			s.SamplesTs[i] = float64(nTokens) * 1e9 / float64(v)
		}
	}
	s.AvgNs = int64(math.Round(mean(ns)))
	s.StddevNs = int64(math.Round(sampleStddev(ns)))
	s.AvgTs = mean(s.SamplesTs)
	s.StddevTs = sampleStddev(s.SamplesTs)
	return s
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// sampleStddev is the n-1 standard deviation, computed around the mean for numerical stability.
func sampleStddev(v []float64) float64 {
	if len(v) < 2 {
		return 0
	}
	m := mean(v)
	var sq float64
	for _, x := range v {
		d := x - m
		sq += d * d
	}
	return math.Sqrt(sq / float64(len(v)-1))
}
