package tokenizer

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/sharedtest"
)

func TestPreTokenizersSplitTextAsTheirPublishedPatterns(t *testing.T) {
	cases := []struct {
		pre  string
		in   string
		want []string
	}{
		// llama-3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "I'm HERE'LL", []string{"I", "'m", " HERE", "'LL"}},
		{"llama-bpe", "don't", []string{"don", "'t"}},
		{"llama-bpe", "12345678", []string{"123", "456", "78"}},
		{"llama-bpe", "abc 123", []string{"abc", " ", "123"}},
		{"llama-bpe", "a  b", []string{"a", " ", " b"}},
		{"llama-bpe", "x\n\ny", []string{"x", "\n\n", "y"}},
		{"llama-bpe", "foo!!\n\nbar", []string{"foo", "!!\n\n", "bar"}},
		{"llama-bpe", "  \n  x", []string{"  \n", " ", " x"}},
		{"llama-bpe", "hello   ", []string{"hello", "   "}},
		{"llama-bpe", "$100", []string{"$", "100"}},
		{"llama-bpe", "café-au-lait", []string{"café", "-au", "-lait"}},
		{"llama-bpe", "3.14", []string{"3", ".", "14"}},
		{"llama-bpe", "\tword", []string{"\tword"}},
		{"llama-bpe", "日本語 text", []string{"日本語", " text"}},
		{"llama-bpe", " ?!", []string{" ?!"}},
		{"llama-bpe", "a\u00a0b", []string{"a", "\u00a0b"}}, // non-ASCII space prefixes a word like any other
		// qwen2: the llama-3 pattern with \p{N} one digit at a time
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"qwen2", "abc 123", []string{"abc", " ", "1", "2", "3"}},
		{"qwen2", "I'VE seen 2 cats", []string{"I", "'VE", " seen", " ", "2", " cats"}},
		{"qwen2", "x\r\n\r\n  y", []string{"x", "\r\n\r\n", " ", " y"}},
		{"qwen2", "cafe\u0301!!\u0301", []string{"cafe", "\u0301!!\u0301"}}, // a combining mark is punctuation here
		// qwen35: the qwen2 pattern with combining marks in words (more in TestQwen35SplitsAsJavaScriptsRegex)
		{"qwen35", "cafe\u0301!!\u0301", []string{"cafe\u0301", "!!", "\u0301"}},
		{"qwen35", "I'VE seen 2 cats", []string{"I", "'VE", " seen", " ", "2", " cats"}},
		// gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
		{"gpt-2", "Hello world's  end\n", []string{"Hello", " world", "'s", " ", " end", "\n"}},
		{"gpt-2", "I'M", []string{"I", "'", "M"}}, // contractions are case-sensitive here
		{"gpt-2", "a\tb", []string{"a", "\t", "b"}},
		{"gpt-2", "x  \n", []string{"x", "  \n"}},
		{"gpt-2", "  12345", []string{" ", " 12345"}},
		// starcoder: every digit alone first, then the gpt-2 pattern
		{"starcoder", "x 123", []string{"x", " ", "1", "2", "3"}},
		// falcon: punctuation runs first, then gpt-2, then three-digit groups
		{"falcon", "a, b 12345", []string{"a", ",", " b", " ", "123", "45"}},
	}
	for _, c := range cases {
		t.Run(c.pre+"/"+c.in, func(t *testing.T) {
			p, err := newPreTokenizer(c.pre)
			if err != nil {
				t.Fatal(err)
			}
			got := p.split(c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("split(%q) = %q, want %q", c.in, got, c.want)
			}
			if strings.Join(got, "") != c.in {
				t.Errorf("pieces %q do not add up to the input", got)
			}
		})
	}
}

// spmVocab is a tiny SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then pieces
// with the given scores.
func spmVocab(pieces map[string]float32) Vocab {
	v := NewVocab()
	v.Model = "llama"
	v.Tokens = []string{"<unk>", "<s>", "</s>"}
	v.Types = []int32{int32(TypeUnknown), int32(TypeControl), int32(TypeControl)}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, fmt.Sprintf("<0x%02X>", b))
		v.Types = append(v.Types, int32(TypeByte))
	}
	v.Scores = make([]float32, len(v.Tokens))
	for _, s := range []string{"▁", "h", "e", "l", "o", "he", "ll", "lo", "▁he"} {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, int32(TypeNormal))
		v.Scores = append(v.Scores, pieces[s])
	}
	return v
}

func (t *Tokenizer) texts(ids []int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, t.Token(id))
	}
	return out
}

func TestSPMMergesTheHighestScoringPairFirstAndFallsBackToBytes(t *testing.T) {
	cases := []struct {
		name   string
		scores map[string]float32
		in     string
		want   []string
	}{
		{"lo beats ll", map[string]float32{"he": -1, "ll": -2, "lo": -0.5, "▁he": -5}, "hello",
			[]string{"▁he", "l", "lo"}},
		{"ll beats lo", map[string]float32{"he": -1, "ll": -0.5, "lo": -2, "▁he": -5}, "hello",
			[]string{"▁he", "ll", "o"}},
		{"equal scores merge leftmost first", map[string]float32{"he": -1, "ll": -1, "lo": -1, "▁he": -1}, "hello",
			[]string{"▁he", "ll", "o"}},
		{"unknown character becomes its UTF-8 bytes", nil, "é", []string{"▁", "<0xC3>", "<0xA9>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := New(spmVocab(c.scores))
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode(c.in, false, false)
			if got := tok.texts(ids); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := tok.Decode(ids); got != c.in {
				t.Errorf("Decode = %q, want %q", got, c.in)
			}
		})
	}
}

func TestSPMDecodeKeepsThePrefixSpaceAfterABOSAsLlamaCppDoes(t *testing.T) {
	tok, err := New(spmVocab(nil))
	if err != nil {
		t.Fatal(err)
	}
	bare := tok.Encode("he", false, false)
	withBOS := tok.Encode("he", true, false)
	cases := []struct {
		name          string
		ids           []int
		removeSpecial bool
		renderSpecial bool
		want          string
	}{
		{"first piece loses the prefix space", bare, false, false, "he"},
		{"BOS (printed as nothing) takes the removal", withBOS, false, false, " he"},
		{"removed BOS keeps the space", withBOS, true, false, " he"},
		{"rendered BOS", withBOS, false, true, "<s> he"},
	}
	for _, c := range cases {
		if got := tok.Detokenize(c.ids, c.removeSpecial, c.renderSpecial); got != c.want {
			t.Errorf("%s: Detokenize(%v, %v, %v) = %q, want %q", c.name, c.ids, c.removeSpecial, c.renderSpecial, got, c.want)
		}
	}
}

func TestSPMAddsBOSByDefaultAndHonoursMetadataFlags(t *testing.T) {
	no, yes := false, true
	cases := []struct {
		name           string
		addBOS, addEOS *bool
		want           []string
	}{
		{"defaults: bos only", nil, nil, []string{"<s>", "▁he"}},
		{"add_bos_token false", &no, nil, []string{"▁he"}},
		{"add_eos_token true", nil, &yes, []string{"<s>", "▁he", "</s>"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := spmVocab(nil)
			v.AddBOS, v.AddEOS = c.addBOS, c.addEOS
			tok, err := New(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.texts(tok.Encode("he", true, false)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Encode = %q, want %q", got, c.want)
			}
			if got := tok.texts(tok.Encode("he", false, false)); !reflect.DeepEqual(got, []string{"▁he"}) {
				t.Errorf("Encode without specials = %q", got)
			}
		})
	}
}

// bpeVocab is a tiny byte-level BPE vocabulary over "a", "b", "c" and "Ġ" (the space byte).
func bpeVocab(merges []string) Vocab {
	v := NewVocab()
	v.Model, v.Pre = "gpt2", "gpt-2"
	v.Tokens = []string{"a", "b", "c", "Ġ", "ab", "bc", "abc", "Ġa", "<|endoftext|>"}
	v.Types = []int32{1, 1, 1, 1, 1, 1, 1, 1, int32(TypeControl)}
	v.Merges = merges
	v.BOS, v.EOS = 8, 8
	return v
}

func TestBPEMergesByRankWithinEachWord(t *testing.T) {
	cases := []struct {
		name   string
		merges []string
		in     string
		want   []string
	}{
		{"a b first then ab c", []string{"a b", "b c", "ab c"}, "abc", []string{"abc"}},
		{"b c first, no a bc merge", []string{"b c", "a b"}, "abc", []string{"a", "bc"}},
		{"lower rank wins inside a word", []string{"a b", "Ġ a"}, "ab ab", []string{"ab", "Ġ", "ab"}},
		{"space joins the word after it", []string{"Ġ a"}, "ab ab", []string{"a", "b", "Ġa", "b"}},
		{"no merges: one token per byte", nil, "cab", []string{"c", "a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok, err := New(bpeVocab(c.merges))
			if err != nil {
				t.Fatal(err)
			}
			ids := tok.Encode(c.in, true, false) // gpt-2 adds no BOS by default
			if got := tok.texts(ids); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
			}
			if got := tok.Decode(ids); got != c.in {
				t.Errorf("Decode = %q, want %q", got, c.in)
			}
		})
	}
}

func TestBPEControlTokensAreParsedOnlyWhenAsked(t *testing.T) {
	tok, err := New(bpeVocab([]string{"a b"}))
	if err != nil {
		t.Fatal(err)
	}
	parsed := tok.texts(tok.Encode("ab<|endoftext|>", false, true))
	if want := []string{"ab", "<|endoftext|>"}; !reflect.DeepEqual(parsed, want) {
		t.Errorf("parseSpecial: %q, want %q", parsed, want)
	}
	plain := tok.Encode("ab<|endoftext|>", false, false)
	for _, id := range plain {
		if id == 8 {
			t.Errorf("without parseSpecial the control token was matched: %q", tok.texts(plain))
		}
	}
	if !tok.IsEOG(8) || tok.IsEOG(0) {
		t.Errorf("IsEOG(<|endoftext|>) = %v, IsEOG(a) = %v", tok.IsEOG(8), tok.IsEOG(0))
	}
}

func TestNewRejectsMalformedVocabularies(t *testing.T) {
	good := bpeVocab([]string{"a b"})
	cases := []struct {
		name   string
		mutate func(v *Vocab)
		want   string
	}{
		{"no tokens", func(v *Vocab) { v.Tokens, v.Types = nil, nil }, "empty vocabulary"},
		{"types length", func(v *Vocab) { v.Types = v.Types[:2] }, "token_type"},
		{"scores length", func(v *Vocab) { v.Scores = []float32{1} }, "scores"},
		{"merge without space", func(v *Vocab) { v.Merges = []string{"ab"} }, "merges[0]"},
		{"unknown model", func(v *Vocab) { v.Model = "wordpiece" }, `"wordpiece" is not supported`},
		{"no model", func(v *Vocab) { v.Model = "" }, "tokenizer.ggml.model is missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := good
			v.Tokens = append([]string(nil), good.Tokens...)
			v.Types = append([]int32(nil), good.Types...)
			c.mutate(&v)
			_, err := New(v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestFromGGUFReadsTokenizerMetadataOfAWrittenFile(t *testing.T) {
	v := spmVocab(map[string]float32{"he": -1, "▁he": -0.5})
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetString("tokenizer.ggml.model", "llama")
	w.SetStrings("tokenizer.ggml.tokens", v.Tokens)
	w.SetFloat32s("tokenizer.ggml.scores", v.Scores)
	w.SetInt32s("tokenizer.ggml.token_type", v.Types)
	w.SetUint32("tokenizer.ggml.bos_token_id", 1)
	w.SetUint32("tokenizer.ggml.eos_token_id", 2)
	w.SetUint32("tokenizer.ggml.padding_token_id", 0xFFFFFFFF) // out of range: ignored, as llama.cpp does
	w.SetBool("tokenizer.ggml.add_bos_token", false)
	path := filepath.Join(t.TempDir(), "tok.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	tok := loadTokenizer(t, path)
	if got := tok.texts(tok.Encode("he", true, false)); !reflect.DeepEqual(got, []string{"▁he"}) {
		t.Errorf("Encode = %q, want [▁he] (add_bos_token false)", got)
	}
	if tok.BOS() != 1 || tok.EOS() != 2 || !tok.IsEOG(2) || tok.VocabSize() != len(v.Tokens) {
		t.Errorf("BOS %d EOS %d IsEOG(2) %v size %d", tok.BOS(), tok.EOS(), tok.IsEOG(2), tok.VocabSize())
	}

	w.Delete("tokenizer.ggml.model")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := FromGGUF(f); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.model is missing") {
		t.Errorf("FromGGUF without tokenizer.ggml.model: %v", err)
	}
}

func TestPhi3SpecialTokensAreParsedAndStripTheWhiteSpaceAfterThem(t *testing.T) {
	tok := loadTokenizer(t, filepath.Join(sharedtest.Path(t, "reference/tokenizer"), "ggml-vocab-phi-3.gguf"))
	const user, end, assistant = 32010, 32007, 32001
	hello := tok.Encode("Hello", false, false)
	var want []int
	want = append(want, tok.BOS(), user)
	want = append(want, hello...) // "\n" after <|user|> is stripped; the text gets the space prefix
	want = append(want, end, assistant)
	got := tok.Encode("<|user|>\nHello<|end|>\n<|assistant|>", true, true)
	if !equalIDs(got, want) {
		t.Errorf("parsed: %v (%q), want %v (%q)", got, tok.texts(got), want, tok.texts(want))
	}
	plain := tok.Encode("<|user|>", false, false)
	if len(plain) < 2 {
		t.Errorf("without parseSpecial <|user|> should be spelled as text, got %v", plain)
	}
	for _, id := range []int{end, 32000, tok.EOS()} {
		if !tok.IsEOG(id) {
			t.Errorf("IsEOG(%d %q) = false", id, tok.Token(id))
		}
	}
	if tok.IsEOG(user) {
		t.Error("<|user|> must not end generation")
	}
	if p := tok.Piece(end); len(p) != 0 {
		t.Errorf("Piece(<|end|>) = %q, control tokens print nothing", p)
	}
	if got := tok.Detokenize([]int{end}, false, true); got != "<|end|>" {
		t.Errorf("Detokenize with renderSpecial = %q", got)
	}
}

func TestDecodeInvertsEncodeOnEveryReferenceCase(t *testing.T) {
	dir := sharedtest.Path(t, "reference/tokenizer")
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2", "falcon", "deepseek-llm", "starcoder"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			tok := loadTokenizer(t, base)
			inputs, _ := readVocabCases(t, base)
			for _, in := range inputs {
				ids := tok.Encode(in, false, false)
				// pieces are lossless: the leading space of SPM's prefix is the only addition
				var raw []byte
				for _, id := range ids {
					raw = append(raw, tok.Piece(id)...)
				}
				want := in
				if tok.Model() == "llama" && in != "" {
					want = " " + in
				}
				if string(raw) != want {
					t.Errorf("pieces of %q join to %q", in, raw)
				}
				// Decode removes SPM's prefix space; BPE families with clean-up rejoin punctuation
				dec := tok.Decode(ids)
				if tok.cleanSpaces {
					want = string(cleanSpaces([]byte(in)))
				} else {
					want = in
				}
				if dec != want {
					t.Errorf("Decode(Encode(%q)) = %q, want %q", in, dec, want)
				}
			}
		})
	}
}

func TestCleanSpacesRemovesTokenizationSpacing(t *testing.T) {
	cases := map[string]string{
		"Hello , world !":  "Hello, world!",
		"it 's and I 'm":   "it's and I'm",
		"we 're , you 've": "we're, you've",
		"don 't":           "don 't", // llama.cpp keeps " 't" and " 'd"
		"a ' b":            "a'b",
		"":                 "",
	}
	for in, want := range cases {
		if got := string(cleanSpaces([]byte(in))); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPiecesOfReferenceGenerationsSpellTheReferenceText(t *testing.T) {
	refDir := sharedtest.Path(t, "reference/generation")
	modelDir := sharedtest.Path(t, "models")
	for _, name := range []string{"stories260K", "rand-llama-f32"} {
		t.Run(name, func(t *testing.T) {
			tok := loadTokenizer(t, filepath.Join(modelDir, name+".gguf"))
			cases := readGenerationCases(t, filepath.Join(refDir, name+".jsonl"))
			for _, c := range cases {
				var b bytes.Buffer
				for _, id := range c.Generated {
					b.Write(tok.Piece(id))
				}
				// the reference text was written as UTF-8 with invalid bytes replaced
				if got := strings.ToValidUTF8(b.String(), "\uFFFD"); got != c.Text {
					t.Errorf("prompt %q: pieces spell %q, want %q", c.Prompt, got, c.Text)
				}
			}
		})
	}
}
