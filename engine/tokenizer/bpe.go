package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Byte-level BPE as llama.cpp runs it for tokenizer.ggml.model "gpt2": the pre-tokenizer cuts the
// text into words, each word's bytes are mapped to printable characters (GPT-2's byte-to-unicode
// table), and within a word the adjacent pair with the lowest merge rank is merged, repeatedly
// (ties: the leftmost pair).

// byteRune is GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for themselves, the
// other 68 bytes map to U+0100 onwards in byte order. runeByte is its inverse.
var (
	byteRune [256]rune
	runeByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = rune(256 + n)
			n++
		}
		runeByte[byteRune[b]] = byte(b)
	}
}

// byteEncode maps raw bytes to the GPT-2 characters the BPE vocabulary is written in.
func byteEncode(s string) string {
	var sb strings.Builder
	sb.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		sb.WriteRune(byteRune[s[i]])
	}
	return sb.String()
}

// byteDecode maps GPT-2 characters back to raw bytes; characters outside the table pass through.
func byteDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := runeByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

type bpeBigram struct {
	left, right int
	rank        int
	size        int // bytes of the merged text when queued
}

// bpeBefore orders pairs: lower merge rank first, then the leftmost.
func bpeBefore(a, b bpeBigram) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.left < b.left
}

type mergePair struct{ left, right string }

func (t *Tokenizer) bpeEncode(text string, out []int) []int {
	for _, raw := range t.pre.split(text) {
		out = t.bpeWord(byteEncode(raw), out)
	}
	return out
}

func (t *Tokenizer) bpeWord(word string, out []int) []int {
	if t.pre.ignoreMerges {
		if id, ok := t.ids[word]; ok {
			return append(out, id)
		}
	}
	syms := splitChars(word)
	q := queue[bpeBigram]{less: bpeBefore}
	str := func(i int) string { return word[syms[i].start : syms[i].start+syms[i].n] }
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l, r := str(left), str(right)
		rank, ok := t.ranks[mergePair{l, r}]
		if !ok {
			return
		}
		q.push(bpeBigram{left: left, right: right, rank: rank, size: len(l) + len(r)})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			// stale: one side changed since the pair was queued (both only grow rightwards, so
			// equal length means equal text)
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := range syms {
		if syms[i].n == 0 {
			continue
		}
		s := str(i)
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		// llama.cpp's fallback: each byte of the symbol as a one-byte token, where one exists
		for j := 0; j < len(s); j++ {
			if id, ok := t.ids[s[j:j+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
