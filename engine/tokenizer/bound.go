package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Bounds on the token count of a text, so that a prompt too long for the context can be refused
// before it is tokenized (which costs about 2 s and 100 MB per MB of text).

// bound is what MinTokens needs, computed once in New.
type bound struct {
	maxTokenBytes int       // the longest token text: no token covers more bytes of input
	stripsSpaces  bool      // a special token swallows the whitespace beside it (phi-3's rstrip)
	dropped       [256]bool // BPE: bytes without a one-character token, which Encode drops
	anyDropped    bool
	ok            bool // the bound holds for this vocabulary
}

func (t *Tokenizer) computeBound() {
	b := bound{ok: true}
	for _, s := range t.tokens {
		b.maxTokenBytes = max(b.maxTokenBytes, len(s))
	}
	for _, a := range t.attrs {
		if a&(attrLStrip|attrRStrip) != 0 {
			b.stripsSpaces = true
		}
	}
	if t.kind == kindBPE {
		// A symbol missing from the vocabulary is dropped (its bytes looked up one by one). A
		// byte without its one-character token is dropped: it does not count. A merge whose
		// result is not a token would drop what it merged: then there is no bound.
		for c, r := range byteRune {
			if _, found := t.ids[string(r)]; !found {
				b.dropped[c], b.anyDropped = true, true
			}
		}
		for p := range t.ranks {
			if _, found := t.ids[p.left+p.right]; !found {
				b.ok = false
				break
			}
		}
	}
	if b.maxTokenBytes == 0 {
		b.ok = false
	}
	t.bound = b
}

// MinTokens is a lower bound on len(Encode(text, false, parseSpecial)) for either parseSpecial:
// a token's text (SentencePiece's U+2581 and GPT-2's byte characters included) is never shorter
// than the input it covers, so text needs at least len(text)/longest-token tokens. Input that
// Encode may drop does not count: whitespace beside a special token that strips it (phi-3),
// and bytes a BPE vocabulary has no token for. 0 when the vocabulary gives no bound.
func (t *Tokenizer) MinTokens(text string) int {
	if !t.bound.ok {
		return 0
	}
	n := len(text)
	if t.bound.stripsSpaces || t.bound.anyDropped {
		n = 0
		for i := 0; i < len(text); i++ {
			c := text[i]
			if t.bound.dropped[c] || (t.bound.stripsSpaces && (c == ' ' || (c >= '\t' && c <= '\r'))) {
				continue
			}
			n++
		}
	}
	return n / t.bound.maxTokenBytes
}

// MaxTextBytes is the most bytes a text encoding to at most tokens tokens can have, or -1 when
// there is no such bound (a vocabulary where Encode may drop input: special tokens that
// swallow whitespace, bytes without a token).
func (t *Tokenizer) MaxTextBytes(tokens int) int64 {
	if !t.bound.ok || t.bound.stripsSpaces || t.bound.anyDropped {
		return -1
	}
	return int64(tokens+1)*int64(t.bound.maxTokenBytes) - 1
}

// ErrTooManyTokens is returned by EncodeContext when the text has more tokens than its limit.
var ErrTooManyTokens = errors.New("text has more tokens than the limit")

// EncodeContext is Encode that stops early: with an error wrapping ctx.Err() when ctx ends,
// and with ErrTooManyTokens as soon as the tokens exceed limit (limit <= 0: no limit). The
// tokens of a finished encoding equal Encode's.
func (t *Tokenizer) EncodeContext(ctx context.Context, text string, addSpecial, parseSpecial bool, limit int) ([]int, error) {
	const checkEvery = 256 // words between checks
	check := func(out []int) error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		if limit > 0 && len(out) > limit {
			return fmt.Errorf("tokenize: more than %d tokens: %w", limit, ErrTooManyTokens)
		}
		return nil
	}
	if err := check(nil); err != nil {
		return nil, err
	}
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}
	out := make([]int, 0, len(text)/3+2)
	if addSpecial && t.addBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	prevSpecial := true // SentencePiece: the space prefix as in Encode
	for _, f := range frags {
		if f.token >= 0 {
			out = append(out, f.token)
			prevSpecial = true
			continue
		}
		switch t.kind {
		case kindSPM:
			// SentencePiece merges across a whole fragment: it is checked between fragments.
			s := f.text
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.spmEncode(strings.ReplaceAll(s, " ", "\u2581"), out)
			prevSpecial = false
		case kindBPE:
			for i, raw := range t.pre.split(f.text) {
				if i%checkEvery == 0 {
					if err := check(out); err != nil {
						return nil, err
					}
				}
				out = t.bpeWord(byteEncode(raw), out)
			}
		}
		if err := check(out); err != nil {
			return nil, err
		}
	}
	if addSpecial && t.addEOS && t.eos >= 0 {
		out = append(out, t.eos)
	}
	return out, check(out)
}
