package bench

import "fmt"

// NoisyShare is the spread over which a row is flagged as noisy: a sample standard deviation
// above 5% of the mean says the repetitions disagree too much for the mean to compare.
const NoisyShare = 0.05

// Noisy tells whether a row's spread exceeds NoisyShare of its mean, and says why in one
// sentence with the remedy.
func Noisy(avgTS, stddevTS float64) (bool, string) {
	if avgTS <= 0 || stddevTS <= avgTS*NoisyShare {
		return false, ""
	}
	return true, fmt.Sprintf("noisy: the spread ±%.2f t/s is %.0f%% of the mean %.2f t/s (over %.0f%%); rerun with more repetitions on an idle machine",
		stddevTS, 100*stddevTS/avgTS, avgTS, 100*NoisyShare)
}
