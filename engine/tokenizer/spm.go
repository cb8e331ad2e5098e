package tokenizer

// SentencePiece-style tokenization as llama.cpp runs it for tokenizer.ggml.model "llama": the text
// (spaces already replaced by U+2581) is cut into UTF-8 characters, then the adjacent pair whose
// concatenation is a vocabulary token with the highest score is merged, repeatedly (ties: the
// leftmost pair). Symbols that are not tokens at the end are emitted byte by byte (<0xNN>).

type symbol struct {
	start, n   int // byte span in the text
	prev, next int // neighbours in the linked list, -1 at the ends
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
}

// spmBefore orders pairs: higher score first, then the leftmost.
func spmBefore(a, b spmBigram) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return a.left < b.left
}

// utf8Len is the sequence length announced by a UTF-8 lead byte (continuation and invalid bytes
// count as one), the rule llama.cpp uses to cut text into characters.
func utf8Len(b byte) int {
	switch {
	case b < 0xC0:
		return 1
	case b < 0xE0:
		return 2
	case b < 0xF0:
		return 3
	default:
		return 4
	}
}

// splitChars cuts text into llama.cpp's UTF-8 "characters" as a linked list of symbols.
func splitChars(text string) []symbol {
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		idx := len(syms)
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: idx - 1, next: next})
		off += n
	}
	return syms
}

func (t *Tokenizer) spmEncode(text string, out []int) []int {
	if text == "" {
		return out
	}
	syms := splitChars(text)
	q := queue[spmBigram]{less: spmBefore}
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		s := text[syms[left].start : syms[left].start+syms[left].n+syms[right].n]
		id, ok := t.ids[s]
		if !ok {
			return
		}
		q.push(spmBigram{left: left, right: right, score: t.scores[id], size: len(s)})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side was merged since this pair was queued
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
	for i := 0; i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			out = append(out, t.byteToken(s[j]))
		}
	}
	return out
}

// byteToken is the token for one raw byte: <0xNN> for SPM (or the byte as a one-character token
// when the vocabulary has no byte tokens), the GPT-2 byte character for BPE; unk when neither exists.
func (t *Tokenizer) byteToken(b byte) int {
	if t.kind == kindSPM {
		const hex = "0123456789ABCDEF"
		if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
			return id
		}
		if id, ok := t.ids[string([]byte{b})]; ok {
			return id
		}
		return t.unk
	}
	if id, ok := t.ids[string(byteRune[b])]; ok {
		return id
	}
	return t.unk
}
