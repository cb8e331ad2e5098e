package tokenizer

import (
	"context"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vkllm/vkllm/engine/gguf"
)

// hostileVocabGGUF writes a GGUF file whose tokenizer.ggml.* metadata comes from the fuzzer: the
// tokens are vocab split at '|' (empty tokens, duplicates, invalid UTF-8 and byte-token lookalikes
// included), the token types are the bytes of types read as signed, the scores come from the bits
// of scoreBits, the merges are merges split at newlines, and specials holds the special token ids.
// flags picks the model name, whether the types and scores have one entry per token (else their
// own length), the add_* flags and whether the merges are a string array at all.
func hostileVocabGGUF(t *testing.T, flags uint16, vocab string, types []byte, scoreBits uint64, merges string, specials uint64) []byte {
	t.Helper()
	models := []string{"llama", "gpt2", "gpt2", "llama", "", "bert"}
	pres := []string{"", "default", "llama-bpe", "qwen2", "gpt-2", "falcon", "starcoder", "deepseek-llm", "deepseek-coder", "no-such-pre"}
	w := gguf.NewWriter()
	w.SetString(gguf.KeyArchitecture, "llama")
	w.SetString("tokenizer.ggml.model", models[int(flags&7)%len(models)])
	w.SetString("tokenizer.ggml.pre", pres[int(flags>>3&15)%len(pres)])
	tokens := strings.Split(vocab, "|")
	if len(tokens) > 4096 {
		tokens = tokens[:4096]
	}
	w.SetStrings("tokenizer.ggml.tokens", tokens)
	n := len(tokens)
	if flags>>7&1 == 1 { // lengths of their own
		n = len(types)
	}
	if len(types) > 0 {
		ty := make([]int32, n)
		for i := range ty {
			ty[i] = int32(int8(types[i%len(types)]))
		}
		w.SetInt32s("tokenizer.ggml.token_type", ty)
	}
	if scoreBits != 0 {
		sc := make([]float32, n)
		for i := range sc {
			// every kind of float: the bits rotate through the seed, so NaN, Inf and -0 appear
			sc[i] = math.Float32frombits(uint32(scoreBits>>(uint(i)%32)) ^ uint32(i))
		}
		w.SetFloat32s("tokenizer.ggml.scores", sc)
	}
	if flags>>8&1 == 1 {
		w.SetString("tokenizer.ggml.merges", merges) // the wrong type
	} else if merges != "" || flags>>9&1 == 1 {
		w.SetStrings("tokenizer.ggml.merges", strings.Split(merges, "\n"))
	}
	var ids [8]byte
	binary.LittleEndian.PutUint64(ids[:], specials)
	for i, key := range []string{"bos", "eos", "unknown", "eot", "eom", "padding"} {
		id := uint32(ids[i])
		if ids[6]>>uint(i)&1 == 1 {
			id = math.MaxUint32 - id // far outside the vocabulary
		}
		w.SetUint32("tokenizer.ggml."+key+"_token_id", id)
	}
	for i, key := range []string{"add_bos_token", "add_eos_token", "add_space_prefix"} {
		if ids[7]>>uint(2*i)&1 == 1 {
			w.SetBool("tokenizer.ggml."+key, ids[7]>>uint(2*i+1)&1 == 1)
		}
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzTokenizerFromGGUFMetadata builds tokenizers from hostile GGUF vocabularies and runs random
// text through them: FromGGUF must refuse with an error naming the file or build a tokenizer
// whose Encode gives ids inside the vocabulary, whose bounds hold, and whose Decode and Piece
// take any id without panicking.
func FuzzTokenizerFromGGUFMetadata(f *testing.F) {
	byteTokens := make([]string, 0, 256)
	for b := 0; b < 256; b++ {
		byteTokens = append(byteTokens, string(byteRune[b]))
	}
	spm := "<unk>|<s>|</s>|<0x20>|<0xE2>|<0x96>|<0x81>|▁a|▁b|ab|▁ab|a|b|<0xZZ>|<0x>|<|im_end|>"
	f.Add(uint16(0), spm, []byte{2, 3, 3, 6, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 3}, uint64(0xbf800000bf800000), "", uint64(0x0000000000020100), "a ab b")
	f.Add(uint16(1), strings.Join(byteTokens, "|")+"|ĠĠ|he|Ġhe|<|endoftext|>", []byte{1}, uint64(0), "Ġ Ġ\nh e\nĠ he", uint64(0x00ff000000000000), "  hello\n\the")
	f.Add(uint16(1|3<<3), "a|b|ab| |", []byte{1, 4, 255, 127}, uint64(0x7fc00000), "a b\nab\n \nb", uint64(0x3f3f3f3f3f3f3f3f), "abab a")
	f.Add(uint16(0|1<<7), "||||", []byte{6, 6}, uint64(1), "", uint64(0), "\xff\xfe")
	f.Add(uint16(1|1<<8), "a|b", []byte{}, uint64(0), "a b", uint64(0), "ab")
	f.Add(uint16(4), "x", []byte{}, uint64(0), "", uint64(0), "x")
	f.Add(uint16(0), "<s>|</s>|<unk>", []byte{3, 3, 2}, uint64(0x7f800000ff800000), "", uint64(0xff00000000000000), "<s>x</s>日本")
	f.Add(uint16(1|9<<3|1<<9), "Ġ|a|\xff|<|im_end|>", []byte{1, 1, 1, 3}, uint64(0), "", uint64(0), "'s 'LL 12345")

	f.Fuzz(func(t *testing.T, flags uint16, vocab string, types []byte, scoreBits uint64, merges string, specials uint64, input string) {
		data := hostileVocabGGUF(t, flags, vocab, types, scoreBits, merges, specials)
		file, err := gguf.OpenBytes("vocab.gguf", data)
		if err != nil {
			t.Fatalf("the writer's file does not open: %v", err)
		}
		tok, err := FromGGUF(file)
		if err != nil {
			if !strings.Contains(err.Error(), "vocab.gguf") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		size := tok.VocabSize()
		inRange := func(what string, ids []int) {
			for _, id := range ids {
				if id < 0 || id >= size {
					t.Fatalf("%s of %q: id %d outside the vocabulary of %d", what, input, id, size)
				}
			}
		}
		for _, special := range []bool{false, true} {
			ids := tok.Encode(input, special, special)
			inRange("Encode", ids)
			// MinTokens bounds the tokens without BOS/EOS, whether special tokens are parsed or not.
			if plain, low := tok.Encode(input, false, special), tok.MinTokens(input); low > len(plain) {
				t.Fatalf("MinTokens(%q) = %d, more than the %d tokens Encode gave (parseSpecial %v)", input, low, len(plain), special)
			}
			limited, err := tok.EncodeContext(context.Background(), input, special, special, 3)
			if err == nil {
				inRange("EncodeContext", limited)
			}
			_ = tok.Decode(ids)
			_ = tok.Detokenize(ids, special, !special)
		}
		if most := tok.MaxTextBytes(8); most < -1 {
			t.Fatalf("MaxTextBytes(8) = %d, want -1 (no bound) or a byte count", most)
		}
		// Any id, in range or not, decodes without panicking.
		odd := []int{-1, 0, size - 1, size, size + 7, math.MaxInt32}
		for _, r := range input {
			odd = append(odd, int(r))
		}
		for _, id := range odd {
			if id >= 0 && id < size {
				_ = tok.Piece(id)
				_ = tok.Token(id)
				_ = tok.IsControl(id)
			}
		}
		_ = tok.Detokenize(odd, false, true)
		_ = utf8.ValidString(tok.Decode(odd))
		for _, id := range []int{tok.BOS(), tok.EOS(), tok.EOT()} {
			if id < -1 || id >= size {
				t.Fatalf("special id %d outside the vocabulary of %d", id, size)
			}
		}
		inRange("EOGs", tok.EOGs())
	})
}
