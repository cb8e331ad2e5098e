// Writes qwen35_split.json: the words the qwen35 pre-tokenizer pattern cuts from llama.cpp's test
// strings for that vocabulary and from edge cases of our own. JavaScript's regex engine has the
// \p{..} classes and the lookahead the pattern needs, so the expected splits come from the
// published pattern itself, not from the Go scanner they test (TestQwen35SplitsAsJavaScriptsRegex).
//
// Regenerate, from this directory, with llama.cpp's test strings (any Node.js with the u flag):
//
//	git -C LLAMA_CPP show HEAD:models/ggml-vocab-qwen35.gguf.inp > /tmp/qwen35.inp
//	node qwen35_split.mjs /tmp/qwen35.inp > qwen35_split.json

import { readFileSync } from 'node:fs';

// The pattern as llama.cpp publishes it for tokenizer.ggml.pre = "qwen35" (its case-insensitive
// contractions spelled out as character classes).
const pattern = String.raw`(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;

// llama.cpp's white space: ASCII \t \n \v \f \r and space, and these others, which its regex sees
// as \v. JavaScript's \s differs (it takes U+FEFF, not U+0085), so the text's non-ASCII white space
// becomes \v (one UTF-16 unit for one: match offsets stay offsets into the original) and \s, \S
// are spelled out as the ASCII six.
const otherWhiteSpace = new Set([0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
	0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);
const ws = String.raw`\t\n\v\f\r `;

function spellOutSpace(p) {
	let out = '', inClass = false;
	for (let i = 0; i < p.length; i++) {
		const c = p[i];
		if (c === '\\') {
			const e = p[i + 1];
			i++;
			if (e === 's') out += inClass ? ws : `[${ws}]`;
			else if (e === 'S') {
				if (inClass) throw new Error('\\S inside a class');
				out += `[^${ws}]`;
			} else out += c + e;
			continue;
		}
		if (c === '[') inClass = true;
		if (c === ']') inClass = false;
		out += c;
	}
	return out;
}

const re = new RegExp(spellOutSpace(pattern), 'gu');

// split cuts text into the matches of the pattern and the gaps between them, as llama.cpp does.
function split(text) {
	const seen = Array.from(text, (ch) => (otherWhiteSpace.has(ch.codePointAt(0)) ? '\v' : ch)).join('');
	const words = [];
	let last = 0;
	for (const m of seen.matchAll(re)) {
		if (m.index > last) words.push(text.slice(last, m.index));
		words.push(text.slice(m.index, m.index + m[0].length));
		last = m.index + m[0].length;
	}
	if (last < text.length) words.push(text.slice(last));
	return words;
}

// Edge cases of our own, each for a rule of the pattern. Only code points of Unicode 15.0 (Go's
// tables) appear, so both sides agree on every category.
const edges = [
	// contractions, either case; a look-alike that is not one
	"it's IT'S we're WE'RE they've THEY'VE I'm I'M you'll YOU'LL he'd HE'D",
	"'s'S're'Re'x 'll'", "don\u2019t", "'\u017f", "rock'n'roll", "''s",
	// combining marks stay in their word (W is [\p{L}\p{M}]), never in punctuation
	"cafe\u0301 nai\u0308ve", "e\u0301te\u0301", " \u0301abc", "\u0301\u0301", "a\u20dd b", "1\u0301", "!\u0301x",
	"!!\u0301", "x \u0301", "\u0915\u094d\u0937 \u0939\u093f\u0928\u094d\u0926\u0940", "\u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627",
	"\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a", "Tie\u0302\u0301ng Vie\u0323\u0302t", "\u05e9\u05b8\u05c1\u05dc\u05d5\u05b9\u05dd",
	// digits, one at a time, of any script and kind
	"12345", "abc 123", "x1y22", "\u0663\u0664\u0665", "\u216b and \u00bd and x\u00b2", " 7", "3.14",
	// CJK and other letters
	"\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\uc548\ub155\ud558\uc138\uc694 \uc138\uc0c1",
	// emoji: symbols, joiners, a variation selector (a mark), skin tones, flags
	"\u{1f44d}\u{1f3fd} \u{1f468}\u200d\u{1f469}\u200d\u{1f467}", "\u2764\ufe0f love", "\u{1f1ef}\u{1f1f5}!", " \u{1f680}\u{1f680}x",
	// white space: runs before a word, before newlines, at the end; \r\n; tabs
	"a  b", "a   \n\nb", "  \n  x", "x   \n", "\r\n", "a\r\n\r\nb", "x\r\n\r\n  y", "\t\tx", "x\t", "trailing   ",
	" \n \r\n\t ", "\v\fx", "\n\nword", "\nword", "\tword", "-word", "foo!!\n\nbar", " ?!\r\n", "...\n \n", "a, b (c)",
	"$100", "<|im_start|>user\nhi<|im_end|>", "   1", "\t\n", "x \n",
	// non-ASCII white space is white space (U+FEFF and U+001C are not)
	"a\u00a0b", "a \u00a0b", "a\u3000\u3000b", "a\u0085b", "a\u2028\nb", "x\u00a0", "\u00a0\u00a0\u00a0x", "a\ufeffb", "x\u001cy",
	"\u00a0\u0301",
];

const inp = process.argv[2];
if (!inp) {
	console.error('usage: node qwen35_split.mjs ggml-vocab-qwen35.gguf.inp > qwen35_split.json');
	process.exit(2);
}
const sep = '\n__ggml_vocab_test__\n';
const parts = readFileSync(inp, 'utf8').split(sep);
if (parts.pop() !== '') throw new Error(`${inp}: last string not followed by ${JSON.stringify(sep)}`);

const cases = [
	...parts.map((s) => ({ from: 'llama.cpp', in: s, want: split(s) })),
	...edges.map((s) => ({ from: 'edge', in: s, want: split(s) })),
];
for (const c of cases) {
	if (c.want.join('') !== c.in) throw new Error(`words of ${JSON.stringify(c.in)} do not add up to it`);
}
// JSON with one case a line, and with white space, format characters and marks escaped so that
// a reader sees them.
const hex = (u) => '\\u' + u.toString(16).padStart(4, '0');
const visible = (json) => json.replace(/(?! )[\p{Z}\p{C}\p{M}\u0085]/gu, (ch) => {
	const cp = ch.codePointAt(0);
	return cp <= 0xffff ? hex(cp) : hex(ch.charCodeAt(0)) + hex(ch.charCodeAt(1));
});
process.stdout.write('{\n"pattern": ' + JSON.stringify(pattern) + ',\n"cases": [\n' +
	cases.map((c) => visible(JSON.stringify(c))).join(',\n') + '\n]}\n');
