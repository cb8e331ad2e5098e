package tokenizer

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A pre-tokenizer splits text into words before BPE merges run inside each word. llama.cpp describes
// each family as a list of regular expressions applied one after another: every step splits each
// piece produced by the previous step into the regions it matches and the gaps between matches.
// Go's regexp has no lookahead, so the patterns that need it (the GPT-2 pattern and the llama-3
// family: llama-3, qwen2, qwen35) are hand-written scanners; the rest run through regexp with \s
// spelled out.

// splitStep splits one chunk of code points (given as the rune view) into piece lengths.
type splitStep func(rs []rune) []int

// preTokenizer is the per-family configuration of the BPE tokenizer.
type preTokenizer struct {
	name         string
	steps        []splitStep
	ignoreMerges bool // a word that is already a whole token is emitted as it is (llama-3)
	cleanSpaces  bool // detokenize removes the space before ,.?! and some contractions
	addBOS       bool // the family's default for add_bos_token
	noBOS        bool // no BOS token unless tokenizer.ggml.bos_token_id names one (glm4)
}

// ws is \s as C++ std::regex matches it once llama.cpp has replaced every non-ASCII white space
// code point by \v (see view).
const ws = `\t\n\v\f\r `

var (
	reDefaultPunct  = regexp.MustCompile(`[\pP$+<=>^~|]+`)
	reFalconPunct   = regexp.MustCompile("[\\pP$+<=>^~|`]+")
	reDigitRun      = regexp.MustCompile(`\pN+`)
	reOneDigit      = regexp.MustCompile(`\pN`)
	reThreeDigits   = regexp.MustCompile(`[0-9][0-9][0-9]`)
	reNewline       = regexp.MustCompile(`[\r\n]`)
	reTrailingSpace = regexp.MustCompile(`[` + ws + `]+$`)
	// DeepSeek LLM: cased letters (Lu, Ll, Lt as the model's tokenizer.json lists them), ASCII and
	// full-width punctuation, and CJK/Hangul runs.
	reDeepseekLetters = regexp.MustCompile(`[` + ws + `]?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}` +
		`\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}` +
		`\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}` +
		`\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}` +
		`\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}` +
		`\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}` +
		`\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}` +
		`\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}` +
		`\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}` +
		`\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}` +
		`\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}` +
		`\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+`)
	reDeepseekPunct = regexp.MustCompile(`[` + ws + `]?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+`)
	reCJK           = regexp.MustCompile(`[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+`)
	reSpaceLetters  = regexp.MustCompile(`[` + ws + `]?\pL+`)
	reSpacePunct    = regexp.MustCompile(`[` + ws + `]?\pP+`)
)

// preFamilies lists the split rules and flags this package implements, each under every
// tokenizer.ggml.pre name llama.cpp gives it; newPreTokenizer refuses any other name.
var preFamilies = []struct {
	names []string
	rules preTokenizer
}{
	{[]string{"default"}, preTokenizer{steps: []splitStep{regexStep(reDefaultPunct), splitGPT2, regexStep(reDigitRun),
		regexStep(reThreeDigits)}, cleanSpaces: true}},
	{[]string{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code",
		"roberta-bpe", "mpt", "olmo", "jais", "a.x-4.0", "mellum", "modern-bert", "exaone4"},
		preTokenizer{steps: []splitStep{splitGPT2}, cleanSpaces: true}},
	{[]string{"trillion", "granite-docling"}, preTokenizer{steps: []splitStep{splitGPT2}}},
	{[]string{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"},
		preTokenizer{steps: []splitStep{splitLlama3}, ignoreMerges: true, cleanSpaces: true, addBOS: true}},
	{[]string{"dbrx", "smaug-bpe"}, preTokenizer{steps: []splitStep{splitLlama3}, cleanSpaces: true}},
	{[]string{"glm4", "chatglm-bpe"}, preTokenizer{steps: []splitStep{splitLlama3}, cleanSpaces: true, noBOS: true}},
	{[]string{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"},
		preTokenizer{steps: []splitStep{splitQwen2}}},
	{[]string{"stablelm2", "megrez"}, preTokenizer{steps: []splitStep{splitQwen2}, cleanSpaces: true}},
	{[]string{"qwen35"}, preTokenizer{steps: []splitStep{splitQwen35}}},
	{[]string{"deepseek-llm"}, preTokenizer{steps: []splitStep{regexStep(reNewline), regexStep(reDeepseekLetters),
		regexStep(reDeepseekPunct), regexStep(reTrailingSpace), regexStep(reCJK), regexStep(reDigitRun)}}},
	{[]string{"deepseek-coder"}, preTokenizer{steps: []splitStep{regexStep(reNewline), regexStep(reSpaceLetters),
		regexStep(reSpacePunct), regexStep(reCJK), regexStep(reOneDigit)}}},
	{[]string{"falcon"}, preTokenizer{steps: []splitStep{regexStep(reFalconPunct), splitGPT2, regexStep(reThreeDigits)},
		cleanSpaces: true}},
	{[]string{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"},
		preTokenizer{steps: []splitStep{regexStep(reOneDigit), splitGPT2}, cleanSpaces: true}},
	{[]string{"command-r", "smollm"}, preTokenizer{steps: []splitStep{regexStep(reOneDigit), splitGPT2}}},
}

// preNames is every tokenizer.ggml.pre name in preFamilies, sorted, for messages.
func preNames() []string {
	var names []string
	for _, f := range preFamilies {
		names = append(names, f.names...)
	}
	sort.Strings(names)
	return names
}

// newPreTokenizer returns the configuration llama.cpp uses for tokenizer.ggml.pre = name. Like
// llama.cpp, it refuses a name it does not know: other split rules would hand the model token
// sequences it was never trained on.
func newPreTokenizer(name string) (*preTokenizer, error) {
	for _, f := range preFamilies {
		if slices.Contains(f.names, name) {
			p := f.rules
			p.name = name
			return &p, nil
		}
	}
	return nil, fmt.Errorf("tokenizer.ggml.pre %q is not supported: other split rules would give the model tokens it was not trained on (supported: %s)",
		name, strings.Join(preNames(), ", "))
}

// view maps text to the code points the split rules see: llama.cpp hands every non-ASCII white
// space code point to the regex engine as \v. starts holds each code point's byte offset in text
// (plus len(text) at the end) so words can be cut from the original bytes.
func view(text string) (rs []rune, starts []int) {
	rs = make([]rune, 0, len(text))
	starts = make([]int, 0, len(text)+1)
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if r >= 0x80 && unicode.IsSpace(r) {
			r = '\v'
		}
		rs = append(rs, r)
		starts = append(starts, i)
		i += n
	}
	starts = append(starts, len(text))
	return rs, starts
}

// split returns the words of text (byte slices of it, in order) under the pre-tokenizer.
func (p *preTokenizer) split(text string) []string {
	rs, starts := view(text)
	pieces := []int{len(rs)}
	for _, step := range p.steps {
		next := make([]int, 0, len(pieces)*2)
		off := 0
		for _, n := range pieces {
			if n > 0 {
				next = append(next, step(rs[off:off+n])...)
			}
			off += n
		}
		pieces = next
	}
	words := make([]string, 0, len(pieces))
	off := 0
	for _, n := range pieces {
		if n > 0 {
			words = append(words, text[starts[off]:starts[off+n]])
		}
		off += n
	}
	return words
}

// regexStep splits a chunk into matches of re and the gaps between them.
func regexStep(re *regexp.Regexp) splitStep {
	return func(rs []rune) []int {
		s := string(rs)
		locs := re.FindAllStringIndex(s, -1)
		if len(locs) == 0 {
			return []int{len(rs)}
		}
		var out []int
		prevByte, prevRune := 0, 0
		runeAt := func(b int) int { // rune index of byte offset b, counting from the previous cut
			prevRune += utf8.RuneCountInString(s[prevByte:b])
			prevByte = b
			return prevRune
		}
		last := 0
		for _, loc := range locs {
			a := runeAt(loc[0])
			b := runeAt(loc[1])
			if a > last {
				out = append(out, a-last)
			}
			if b > a {
				out = append(out, b-a)
			}
			last = b
		}
		if last < len(rs) {
			out = append(out, len(rs)-last)
		}
		return out
	}
}

func isSpace(r rune) bool  { return r == ' ' || (r >= '\t' && r <= '\r') }
func isLetter(r rune) bool { return unicode.IsLetter(r) }
func isNumber(r rune) bool { return unicode.IsNumber(r) }

// other is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

// at returns rs[i] or -1 past the end of the chunk.
func at(rs []rune, i int) rune {
	if i < len(rs) {
		return rs[i]
	}
	return -1
}

// spaceRun counts white space from i.
func spaceRun(rs []rune, i int) int {
	n := 0
	for i+n < len(rs) && isSpace(rs[i+n]) {
		n++
	}
	return n
}

// splitGPT2 scans 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// with leftmost-first alternation; a single white space before a non-space that no alternative
// takes becomes a piece of its own (the gap between two matches).
func splitGPT2(rs []rune) []int {
	var out []int
	for i := 0; i < len(rs); {
		n := matchGPT2(rs, i)
		out = append(out, n)
		i += n
	}
	return out
}

func matchGPT2(rs []rune, i int) int {
	c := rs[i]
	if c == '\'' {
		c1, c2 := at(rs, i+1), at(rs, i+2)
		switch {
		case c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd':
			return 2
		case (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'):
			return 3
		}
	}
	j := i
	if c == ' ' && i+1 < len(rs) {
		j = i + 1
	}
	for _, class := range []func(rune) bool{isLetter, isNumber, isOther} {
		if class(rs[j]) {
			k := j + 1
			for k < len(rs) && class(rs[k]) {
				k++
			}
			return k - i
		}
	}
	// \s+(?!\S): all of a run that ends the chunk, otherwise all but its last space
	n := spaceRun(rs, i)
	if i+n == len(rs) {
		return n
	}
	if n > 1 {
		return n - 1
	}
	return 1 // unmatched: a gap of one code point
}

// llamaStyle is what varies across the llama-3 family of patterns
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?W+|\p{N}{1,D}| ?[^\sW\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// where W, the code points of a word, is \p{L}, or [\p{L}\p{M}] when words keep their combining
// marks, and D is the longest run of digits kept together.
type llamaStyle struct {
	marks     bool // W is [\p{L}\p{M}]: combining marks belong to words, never to punctuation
	maxDigits int
}

var (
	llama3Pattern = llamaStyle{maxDigits: 3}
	qwen2Pattern  = llamaStyle{maxDigits: 1}              // numbers one digit at a time
	qwen35Pattern = llamaStyle{marks: true, maxDigits: 1} // qwen2 with combining marks in words
)

func splitLlama3(rs []rune) []int { return llama3Pattern.split(rs) }
func splitQwen2(rs []rune) []int  { return qwen2Pattern.split(rs) }
func splitQwen35(rs []rune) []int { return qwen35Pattern.split(rs) }

func (s llamaStyle) split(rs []rune) []int {
	var out []int
	for i := 0; i < len(rs); {
		n := s.match(rs, i)
		out = append(out, n)
		i += n
	}
	return out
}

func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// isWord is W.
func (s llamaStyle) isWord(r rune) bool { return isLetter(r) || (s.marks && unicode.IsMark(r)) }

// isOther is [^\sW\p{N}].
func (s llamaStyle) isOther(r rune) bool { return !isSpace(r) && !s.isWord(r) && !isNumber(r) }

func (s llamaStyle) match(rs []rune, i int) int {
	c := rs[i]
	if c == '\'' {
		c1, c2 := unicode.ToLower(at(rs, i+1)), unicode.ToLower(at(rs, i+2))
		switch {
		case c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd':
			return 2
		case (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'):
			return 3
		}
	}
	// [^\r\n\p{L}\p{N}]?W+
	j := i
	if !isNewline(c) && !isLetter(c) && !isNumber(c) && i+1 < len(rs) && s.isWord(rs[i+1]) {
		j = i + 1
	}
	if s.isWord(rs[j]) {
		k := j + 1
		for k < len(rs) && s.isWord(rs[k]) {
			k++
		}
		return k - i
	}
	// \p{N}{1,maxDigits}
	if isNumber(c) {
		k := i + 1
		for k < len(rs) && k-i < s.maxDigits && isNumber(rs[k]) {
			k++
		}
		return k - i
	}
	// ' ?[^\sW\p{N}]+[\r\n]*'
	j = i
	if c == ' ' && i+1 < len(rs) && s.isOther(rs[i+1]) {
		j = i + 1
	}
	if s.isOther(rs[j]) {
		k := j + 1
		for k < len(rs) && s.isOther(rs[k]) {
			k++
		}
		for k < len(rs) && isNewline(rs[k]) {
			k++
		}
		return k - i
	}
	// \s*[\r\n]+ : up to and including the last newline of the white space run
	n := spaceRun(rs, i)
	for k := i + n - 1; k >= i; k-- {
		if isNewline(rs[k]) {
			return k + 1 - i
		}
	}
	// \s+(?!\S) then \s+
	if i+n == len(rs) || n == 1 {
		return n
	}
	return n - 1
}

// nameOr is the family name for messages ("" for SPM, which has no pre-tokenizer).
func (p *preTokenizer) nameOr() string {
	if p == nil {
		return ""
	}
	return p.name
}
