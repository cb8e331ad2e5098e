package bench

import "math"

// LocalScore's benchmark, so a run here can be placed on its public board (localscore.ai).
//
// The nine shapes and the score are LocalScore's own, as llamafile's localscore/localscore.cpp
// (get_baseline_test_configs, getResultsSummary) and localscore/README.md define them
// (github.com/Mozilla-Ocho/llamafile): each test prompts n_prompt tokens then generates n_gen;
// the score is 10·cbrt(avg prompt t/s · avg generation t/s · 1000 / avg TTFT ms), the averages
// over the tests. Here each shape runs as llama-bench's pp N and tg M tests (the generation
// from an empty cache, not after the prompt), so the figures are close to LocalScore's, not
// identical; its board compares the same official models (Llama 3.2 1B, Llama 3.1 8B, Qwen 2.5
// 14B, each Q4_K_M).
var LocalScoreShapes = []Spec{
	{NPrompt: 1024, NGen: 16},   // 64:1 title generation
	{NPrompt: 4096, NGen: 256},  // 16:1 content summarization
	{NPrompt: 2048, NGen: 256},  // 8:1 lots of code to fix
	{NPrompt: 2048, NGen: 768},  // 3:1 standard code chat
	{NPrompt: 1024, NGen: 1024}, // 1:1 code back and forth
	{NPrompt: 1280, NGen: 3072}, // 1:3 reasoning over code
	{NPrompt: 384, NGen: 1152},  // 1:3 code gen with back and forth
	{NPrompt: 64, NGen: 1024},   // 1:16 code gen/ideation
	{NPrompt: 16, NGen: 1536},   // 1:96 QA, storytelling, reasoning
}

// LocalScore is LocalScore's score of the averaged figures: 10·cbrt(pp t/s · tg t/s · 1000/TTFT
// ms); 0 when any figure is missing.
func LocalScore(ppTS, tgTS, ttftMs float64) float64 {
	if ppTS <= 0 || tgTS <= 0 || ttftMs <= 0 {
		return 0
	}
	return 10 * math.Cbrt(ppTS*tgTS*1000/ttftMs)
}

// LocalScoreSummary is a run's LocalScore: the averages over the LocalScore shapes it measured.
type LocalScoreSummary struct {
	Score  float64 `json:"score"`
	PPTS   float64 `json:"ppTs"`   // mean prompt t/s over the shapes' pp tests
	TGTS   float64 `json:"tgTs"`   // mean generation t/s over the shapes' tg tests
	TTFTMs float64 `json:"ttftMs"` // mean time to first token over the shapes' pp tests
	Shapes int     `json:"shapes"` // how many of the nine shapes have both tests (9 = a full LocalScore run)
}

// ScoreLocal averages the pp and tg records of the LocalScore shapes among records (the rows
// of one run) and scores them. Records of other sizes are left out; a run with none scores 0.
func ScoreLocal(records []Record) LocalScoreSummary {
	pp := map[int]Record{}
	tg := map[int]Record{}
	for _, r := range records {
		if r.NDepth != 0 || r.AvgTs <= 0 {
			continue
		}
		switch {
		case r.NPrompt > 0 && r.NGen == 0:
			pp[r.NPrompt] = r
		case r.NGen > 0 && r.NPrompt == 0:
			tg[r.NGen] = r
		}
	}
	var s LocalScoreSummary
	var ppSum, tgSum, ttftSum float64
	for _, shape := range LocalScoreShapes {
		p, okP := pp[shape.NPrompt]
		g, okG := tg[shape.NGen]
		if !okP || !okG || p.TTFTMs <= 0 {
			continue
		}
		s.Shapes++
		ppSum += p.AvgTs
		tgSum += g.AvgTs
		ttftSum += p.TTFTMs
	}
	if s.Shapes == 0 {
		return s
	}
	n := float64(s.Shapes)
	s.PPTS, s.TGTS, s.TTFTMs = ppSum/n, tgSum/n, ttftSum/n
	s.Score = LocalScore(s.PPTS, s.TGTS, s.TTFTMs)
	return s
}
