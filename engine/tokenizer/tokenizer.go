package tokenizer

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Tokenizer encodes and decodes text for one vocabulary. It is safe for concurrent use.
type Tokenizer struct {
	kind   kind
	tokens []string
	attrs  []attr
	scores []float32
	ids    map[string]int    // token text -> id (the last id wins for duplicate texts, as in llama.cpp)
	ranks  map[mergePair]int // BPE merge rank
	pre    *preTokenizer     // BPE only

	bos, eos, unk, eot, eom, pad int // -1 = none
	eog                          map[int]bool
	addBOS, addEOS               bool
	addSpacePrefix, cleanSpaces  bool

	specials []int // control, user-defined and unknown tokens, longest text first
	bound    bound // for MinTokens and MaxTextBytes
}

// New builds a tokenizer from a vocabulary description.
func New(v Vocab) (*Tokenizer, error) {
	if err := validate(&v); err != nil {
		return nil, err
	}
	n := len(v.Tokens)
	t := &Tokenizer{
		tokens: v.Tokens,
		attrs:  make([]attr, n),
		scores: v.Scores,
		ids:    make(map[string]int, n),
		bos:    -1, eos: -1, unk: -1, eot: -1, eom: -1, pad: -1,
		eog: map[int]bool{},
	}
	if t.scores == nil {
		t.scores = make([]float32, n)
	}
	for i, s := range v.Tokens {
		t.ids[s] = i
		typ := TypeNormal
		if v.Types != nil {
			typ = TokenType(v.Types[i])
		}
		t.attrs[i] = attrOf(typ)
	}
	switch v.Model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addBOS, t.addEOS, t.addSpacePrefix, t.cleanSpaces = true, false, true, false
	case "gpt2":
		t.kind = kindBPE
		name := v.Pre
		if name == "" {
			// as llama.cpp: a file converted before the key existed gets the default rules
			slog.Warn("tokenizer.ggml.pre is missing, using the default BPE pre-tokenizer; tokenization may differ from the model's own")
			name = "default"
		}
		pre, err := newPreTokenizer(name)
		if err != nil {
			return nil, err
		}
		t.pre = pre
		t.bos, t.eos = 11, 11
		if pre.noBOS {
			t.bos = -1
		}
		t.addBOS, t.cleanSpaces = pre.addBOS, pre.cleanSpaces
		t.ranks = make(map[mergePair]int, len(v.Merges))
		for i, m := range v.Merges {
			// the separator is the first space after the first character (a merge may start with one)
			sp := strings.IndexByte(m[min(1, len(m)):], ' ')
			if sp < 0 {
				return nil, fmt.Errorf("tokenizer.ggml.merges[%d] = %q: expected \"left right\"", i, m)
			}
			sp += min(1, len(m))
			p := mergePair{m[:sp], m[sp+1:]}
			if _, dup := t.ranks[p]; !dup {
				t.ranks[p] = i
			}
		}
	case "":
		return nil, fmt.Errorf("tokenizer.ggml.model is missing; expected \"llama\" (SentencePiece) or \"gpt2\" (BPE)")
	default:
		return nil, fmt.Errorf("tokenizer model %q is not supported (supported: llama, gpt2)", v.Model)
	}
	setID := func(dst *int, id int) {
		if id >= 0 && id < n {
			*dst = id
		}
	}
	setID(&t.bos, v.BOS)
	setID(&t.eos, v.EOS)
	setID(&t.unk, v.UNK)
	setID(&t.eot, v.EOT)
	setID(&t.eom, v.EOM)
	setID(&t.pad, v.PAD)
	if t.unk >= n {
		t.unk = -1
	}
	if v.AddSpacePrefix != nil {
		t.addSpacePrefix = *v.AddSpacePrefix
	}
	if v.AddBOS != nil {
		t.addBOS = *v.AddBOS
	}
	if v.AddEOS != nil {
		t.addEOS = *v.AddEOS
	}
	if t.bos >= n {
		t.bos = -1
	}
	if t.eos >= n {
		t.eos = -1
	}

	// end-of-turn, end-of-message and end-of-generation tokens recognised by their text; llama.cpp
	// makes every token it finds this way a control token whatever its stored type.
	forceControl := func(id int) {
		t.attrs[id] = t.attrs[id]&^(attrNormal|attrUserDefined|attrUnknown|attrByte|attrUnused) | attrControl
	}
	if t.eot < 0 {
		for _, s := range eotTexts {
			if id, ok := t.ids[s]; ok {
				t.eot = id
				forceControl(id)
				break
			}
		}
	}
	if t.eom < 0 {
		if id, ok := t.ids["<|eom_id|>"]; ok {
			t.eom = id
			forceControl(id)
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			forceControl(id)
		}
	}
	for _, id := range []int{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}

	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 && t.tokens[id] != "" {
			t.specials = append(t.specials, id)
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool {
		return len(t.tokens[t.specials[i]]) > len(t.tokens[t.specials[j]])
	})

	// per-model token attributes llama.cpp sets by name
	name := strings.ToLower(v.Name)
	switch {
	case containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code"):
		if id, ok := t.ids["<mask>"]; ok {
			t.attrs[id] |= attrLStrip
		}
	case containsAny(name, "phi-3", "phi3"):
		for _, id := range t.specials {
			t.attrs[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}
	t.computeBound()
	return t, nil
}

// fragment is a piece of the input: raw text still to tokenize, or an already matched special token.
type fragment struct {
	text  string
	token int // -1 for raw text
}

// partition cuts the text at every occurrence of a special token, longest tokens first. Without
// parseSpecial only user-defined tokens are matched (control and unknown tokens stay text).
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{text: text, token: -1}}
	// byte pairs present in the text: most special tokens can be ruled out without a search
	pairs := make([]bool, 1<<16)
	for i := 0; i+1 < len(text); i++ {
		pairs[int(text[i])<<8|int(text[i+1])] = true
	}
	for _, id := range t.specials {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.tokens[id]
		if len(tok) > len(text) || (len(tok) >= 2 && !pairs[int(tok[0])<<8|int(tok[1])]) {
			continue
		}
		var next []fragment
		changed := false
		for _, f := range frags {
			if f.token >= 0 || !strings.Contains(f.text, tok) {
				next = append(next, f)
				continue
			}
			changed = true
			rest := f.text
			for {
				k := strings.Index(rest, tok)
				if k < 0 {
					if rest != "" {
						next = append(next, fragment{text: rest, token: -1})
					}
					break
				}
				left := rest[:k]
				if a&attrLStrip != 0 {
					left = strings.TrimRight(left, " \t\n\v\f\r")
				}
				if left != "" {
					next = append(next, fragment{text: left, token: -1})
				}
				next = append(next, fragment{token: id})
				rest = rest[k+len(tok):]
				if a&attrRStrip != 0 {
					rest = strings.TrimLeft(rest, " \t\n\v\f\r")
				}
			}
		}
		if changed {
			frags = next
		}
	}
	return frags
}

// Encode tokenizes text. addSpecial adds BOS/EOS as the model's add_bos_token/add_eos_token say;
// parseSpecial matches control tokens written in the text (e.g. "<|im_start|>") as single ids.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int {
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}
	out := make([]int, 0, len(text)/3+2)
	if addSpecial && t.addBOS && t.bos >= 0 {
		out = append(out, t.bos)
	}
	switch t.kind {
	case kindSPM:
		prevSpecial := true // the first text gets the space prefix, as does text after a special token
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f.token)
				prevSpecial = true
				continue
			}
			s := f.text
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.spmEncode(strings.ReplaceAll(s, " ", "\u2581"), out)
			prevSpecial = false
		}
	case kindBPE:
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f.token)
				continue
			}
			out = t.bpeEncode(f.text, out)
		}
	}
	if addSpecial && t.addEOS && t.eos >= 0 {
		out = append(out, t.eos)
	}
	return out
}

// piece renders one token: control and unknown tokens only when special is set, user-defined
// tokens as written, byte tokens as their byte, SPM's U+2581 as a space, GPT-2 characters as bytes.
func (t *Tokenizer) piece(id int, special bool) []byte {
	if id < 0 || id >= len(t.tokens) {
		return nil
	}
	a := t.attrs[id]
	text := t.tokens[id]
	if a&(attrControl|attrUnknown) != 0 && !special {
		return nil
	}
	if a&(attrControl|attrUnknown|attrUserDefined) != 0 {
		return []byte(text)
	}
	switch t.kind {
	case kindSPM:
		if a&attrNormal != 0 {
			return []byte(strings.ReplaceAll(text, "\u2581", " "))
		}
		if a&attrByte != 0 {
			if b, ok := parseByteToken(text); ok {
				return []byte{b}
			}
		}
	case kindBPE:
		if a&attrNormal != 0 {
			return byteDecode(text)
		}
	}
	return nil
}

// parseByteToken reads "<0xNN>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var v byte
	for _, c := range s[3:5] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= byte(c - '0')
		case c >= 'A' && c <= 'F':
			v |= byte(c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			v |= byte(c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// Piece returns the raw bytes of one token for streaming output: byte tokens give their byte (a
// multi-byte character may span several pieces), control tokens give nothing.
func (t *Tokenizer) Piece(id int) []byte { return t.piece(id, false) }

// Decode turns ids back into text the way llama.cpp's detokenizer does without special-token
// rendering (llama_detokenize with remove_special and unparse_special false): control tokens print
// nothing, and for SPM the space prefix is removed from the first token's piece — when that first
// token is a BOS, the BOS takes the removal and the text keeps its leading space, as in llama.cpp.
func (t *Tokenizer) Decode(ids []int) string { return t.Detokenize(ids, false, false) }

// Detokenize is llama_detokenize: removeSpecial drops a leading BOS and trailing EOS (when the model
// adds them), renderSpecial prints control tokens as their text. The leading space of the first
// piece is removed when the model adds a space prefix, unless a BOS was removed before it.
func (t *Tokenizer) Detokenize(ids []int, removeSpecial, renderSpecial bool) string {
	removeSpace := t.addSpacePrefix
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var buf []byte
	for _, id := range ids {
		p := t.piece(id, renderSpecial)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false
		buf = append(buf, p...)
	}
	if t.cleanSpaces {
		buf = cleanSpaces(buf)
	}
	return string(buf)
}

// cleanSpaces undoes tokenization spacing: " ?", " !", " .", " ," lose the space, a lone "'"
// between spaces loses both, and " 's", " 'm", " 're", " 've" lose the space.
func cleanSpaces(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	out := b[:1]
	for i := 1; i < len(b); i++ {
		x := b[i]
		if b[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			out = out[:len(out)-1]
		}
		out = append(out, x)
	}
	b = out
	out = b[:1]
	for i := 1; i < len(b); i++ {
		x := b[i]
		if x == '\'' && i+1 < len(b) && b[i-1] == ' ' && b[i+1] == ' ' {
			out = out[:len(out)-1]
			out = append(out, x)
			i++ // the space after is dropped too
			continue
		}
		out = append(out, x)
	}
	b = out
	out = b[:1]
	for i := 1; i < len(b); i++ {
		x := b[i]
		if b[i-1] == ' ' && x == '\'' && i+1 < len(b) {
			x1 := b[i+1]
			switch {
			case x1 == 's' || x1 == 'm':
				out = out[:len(out)-1]
			case i+2 < len(b) && ((x1 == 'r' && b[i+2] == 'e') || (x1 == 'v' && b[i+2] == 'e')):
				out = out[:len(out)-1]
			}
		}
		out = append(out, x)
	}
	return out
}

// BOS is the beginning-of-sequence id (-1 if the vocabulary has none).
func (t *Tokenizer) BOS() int { return t.bos }

// EOS is the end-of-sequence id (-1 if the vocabulary has none).
func (t *Tokenizer) EOS() int { return t.eos }

// EOT is the end-of-turn id (-1 if none was stated or recognised).
func (t *Tokenizer) EOT() int { return t.eot }

// AddBOS says whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS says whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation (EOS, EOT, EOM and the known end-of-turn tokens).
func (t *Tokenizer) IsEOG(id int) bool { return t.eog[id] }

// EOGs lists the end-of-generation ids in ascending order.
func (t *Tokenizer) EOGs() []int {
	ids := make([]int, 0, len(t.eog))
	for id := range t.eog {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token is the stored text of id ("" when out of range).
func (t *Tokenizer) Token(id int) string {
	if id < 0 || id >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// IsControl reports whether id is a control token (rendered only on request).
func (t *Tokenizer) IsControl(id int) bool {
	return id >= 0 && id < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Model is "llama" (SentencePiece) or "gpt2" (byte-level BPE).
func (t *Tokenizer) Model() string {
	if t.kind == kindSPM {
		return "llama"
	}
	return "gpt2"
}
