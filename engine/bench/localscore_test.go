package bench

import (
	"math"
	"testing"
)

func TestLocalScoreIsTenTimesTheCubeRootOfPPTimesTGTimesThousandOverTTFT(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pp, tg, ttft float64
		want         float64
	}{
		{"an exact cube: 1000·100·1000/100 = 10^6", 1000, 100, 100, 1000},
		{"another: 64·8·1000/1000 = 512", 64, 8, 1000, 80},
		{"LocalScore's passable 250: 125·125·1000/1000", 125, 125, 1000, 250},
		{"a made-up GPU: 1000·50·1000/100", 1000, 50, 100, 10 * math.Cbrt(500000)},
		{"negative control: no TTFT scores 0", 1000, 50, 0, 0},
		{"negative control: no generation scores 0", 1000, 0, 100, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LocalScore(tc.pp, tc.tg, tc.ttft); math.Abs(got-tc.want) > 1e-9*math.Max(1, tc.want) {
				t.Errorf("LocalScore(%v, %v, %v) = %v; want %v", tc.pp, tc.tg, tc.ttft, got, tc.want)
			}
		})
	}
}

func TestLocalScoreShapesAreLocalScoresNine(t *testing.T) {
	want := [][2]int{{1024, 16}, {4096, 256}, {2048, 256}, {2048, 768}, {1024, 1024}, {1280, 3072}, {384, 1152}, {64, 1024}, {16, 1536}}
	if len(LocalScoreShapes) != len(want) {
		t.Fatalf("%d shapes; want 9", len(LocalScoreShapes))
	}
	for i, s := range LocalScoreShapes {
		if s.NPrompt != want[i][0] || s.NGen != want[i][1] || s.Depth != 0 {
			t.Errorf("shape %d = %+v; want pp%d+tg%d", i, s, want[i][0], want[i][1])
		}
	}
}

func TestScoreLocalAveragesTheShapesOfARun(t *testing.T) {
	var records []Record
	for _, s := range LocalScoreShapes {
		pp := Record{NPrompt: s.NPrompt, TTFTMs: 100}
		pp.AvgTs = 1000
		tg := Record{NGen: s.NGen}
		tg.AvgTs = 100
		records = append(records, pp, tg)
	}
	other := Record{NPrompt: 512, TTFTMs: 1} // pp512 is no LocalScore shape: left out
	other.AvgTs = 1e9
	records = append(records, other)
	got := ScoreLocal(records)
	if got.Shapes != 9 || got.PPTS != 1000 || got.TGTS != 100 || got.TTFTMs != 100 || math.Abs(got.Score-1000) > 1e-9 {
		t.Errorf("ScoreLocal = %+v; want 9 shapes, pp 1000, tg 100, TTFT 100 ms, score 1000", got)
	}
	if s := ScoreLocal(records[:1]); s.Shapes != 0 || s.Score != 0 {
		t.Errorf("a pp test without its tg test scores %+v; want nothing", s)
	}
}

func TestNoisyFlagsASpreadOverFivePercentOfTheMean(t *testing.T) {
	for _, tc := range []struct {
		name      string
		avg, sd   float64
		wantNoisy bool
	}{
		{"the issue's 3041.91 ± 3193.68", 3041.91, 3193.68, true},
		{"just over 5%", 100, 5.01, true},
		{"exactly 5% is not noisy", 100, 5, false},
		{"a tight run", 5120.5, 3.25, false},
		{"a failed row without a mean", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noisy, why := Noisy(tc.avg, tc.sd)
			if noisy != tc.wantNoisy || (noisy && why == "") || (!noisy && why != "") {
				t.Errorf("Noisy(%v, %v) = %v, %q; want %v with a reason when noisy", tc.avg, tc.sd, noisy, why, tc.wantNoisy)
			}
		})
	}
	_, why := Noisy(3041.91, 3193.68)
	if want := "noisy: the spread ±3193.68 t/s is 105% of the mean 3041.91 t/s (over 5%); rerun with more repetitions on an idle machine"; why != want {
		t.Errorf("reason %q; want %q", why, want)
	}
}
