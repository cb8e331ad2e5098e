package chat

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/sharedtest"
)

// Published chat templates, as their models' tokenizer_config.json ship them.
const (
	llama3Template = `{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}`

	qwen2Template = `{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`

	mistralTemplate = `{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}`
)

var conversation = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Hi"},
	{Role: "assistant", Content: "Hello!"},
	{Role: "user", Content: "Bye"},
}

// writeTemplateGGUF writes a metadata-only GGUF carrying tmpl as tokenizer.chat_template and
// returns the template as read back.
func writeTemplateGGUF(t *testing.T, tmpl string) string {
	t.Helper()
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	w.SetString(TemplateKey, tmpl)
	path := filepath.Join(t.TempDir(), "chat.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, ok := Template(f)
	if !ok || got != tmpl {
		t.Fatalf("template read back %q (ok %v), wrote %q", got, ok, tmpl)
	}
	return got
}

func TestWellKnownTemplatesRenderTheirPublishedLayout(t *testing.T) {
	cases := []struct {
		name      string
		tmpl      string
		msgs      []Message
		genPrompt bool
		bos, eos  string
		want      string
	}{
		{"llama-3 trims content and adds the assistant header", llama3Template,
			[]Message{{"system", "You are helpful."}, {"user", "  Hi there \n"}}, true, "<|begin_of_text|>", "<|eot_id|>",
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama-3 without generation prompt", llama3Template,
			[]Message{{"user", "Hi"}}, false, "<|begin_of_text|>", "<|eot_id|>",
			"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"},
		{"chatml/qwen2 inserts the default system prompt", qwen2Template,
			[]Message{{"user", "Hello"}}, true, "", "<|im_end|>",
			"<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
		{"chatml/qwen2 keeps a given system prompt", qwen2Template, conversation, false, "", "<|im_end|>",
			"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n" +
				"<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"},
		{"mistral wraps user turns in [INST]", mistralTemplate, conversation[1:], true, "<s>", "</s>",
			"<s>[INST] Hi [/INST]Hello!</s>[INST] Bye [/INST]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tmpl := writeTemplateGGUF(t, c.tmpl)
			got, err := Render(context.Background(), tmpl, c.msgs, c.genPrompt, c.bos, c.eos)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Render:\n got  %q\n want %q", got, c.want)
			}
		})
	}
}

func TestPhi3TemplateFromTheSharedVocabRendersUserAndAssistantTurns(t *testing.T) {
	path := filepath.Join(sharedtest.Path(t, "reference/tokenizer"), "ggml-vocab-phi-3.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmpl, ok := Template(f)
	if !ok {
		t.Fatal("phi-3 vocab has no tokenizer.chat_template")
	}
	got, err := Render(context.Background(), tmpl, conversation, true, "<s>", "<|endoftext|>")
	if err != nil {
		t.Fatal(err)
	}
	// phi-3's template drops system turns and always ends a user turn with the assistant tag
	want := "<s><|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n"
	if got != want {
		t.Errorf("Render:\n got  %q\n want %q", got, want)
	}
}

func TestRenderReportsWhyTheCallerMustFallBack(t *testing.T) {
	cases := []struct {
		name string
		tmpl string
		msgs []Message
		want string
	}{
		{"no template", "  ", conversation, ErrNoTemplate.Error()},
		{"template raises", mistralTemplate, []Message{{"assistant", "Hi"}}, "Conversation roles must alternate"},
		{"template does not compile", "{% for m in messages %}{{ m.content }", conversation, "compile chat template"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Render(context.Background(), c.tmpl, c.msgs, true, "<s>", "</s>")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Render = %q, %v; want an error containing %q", out, err, c.want)
			}
		})
	}
	if _, err := Render(context.Background(), "", nil, false, "", ""); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("empty template: %v, want ErrNoTemplate", err)
	}
}

func TestTemplateIsAbsentWhenTheModelHasNone(t *testing.T) {
	w := gguf.NewWriter()
	w.SetString("general.architecture", "llama")
	path := filepath.Join(t.TempDir(), "bare.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tmpl, ok := Template(f); ok {
		t.Errorf("Template = %q, true on a file without one", tmpl)
	}
}

func TestFallbackWritesOneLabelledTurnPerLine(t *testing.T) {
	cases := []struct {
		name      string
		msgs      []Message
		genPrompt bool
		want      string
	}{
		{"with generation prompt", conversation, true,
			"System: Be brief.\nUser: Hi\nAssistant: Hello!\nUser: Bye\nAssistant:"},
		{"without generation prompt", conversation[1:2], false, "User: Hi\n"},
		{"unknown and empty roles", []Message{{"tool", "42"}, {"", "q"}}, true, "Tool: 42\nUser: q\nAssistant:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Fallback(c.msgs, c.genPrompt); got != c.want {
				t.Errorf("Fallback:\n got  %q\n want %q", got, c.want)
			}
		})
	}
}

// Templates as an attacker would put them in a GGUF file. Upstream ardanlabs/jinja v1.8.0 had
// no bound on any of them: the recursive macro overflowed the Go stack (a fatal error that
// ends the process), the others ran for minutes holding gigabytes. ("1e9" is not a number
// literal in this engine, so the counts are written out.)
var hostileTemplates = []struct{ name, tmpl string }{
	{"recursive macro", `{% macro f(m) %}{{ f(m) }}{% endmacro %}{% for m in messages %}{{ f(m) }}{% endfor %}`},
	{"range of a billion", `{% for i in range(1000000000) %}{{ i }}{% endfor %}`},
	{"a string two billion long", `{{ 'a' * 2000000000 }}`},
	{"nested loops", `{% for m in messages %}{% for i in range(100000) %}{% for j in range(100000) %}{{ m.content }}{% endfor %}{% endfor %}{% endfor %}`},
}

func TestHostileTemplatesFromAModelFileStopWithinTwoSeconds(t *testing.T) {
	for _, c := range hostileTemplates {
		t.Run(c.name, func(t *testing.T) {
			tmpl := writeTemplateGGUF(t, c.tmpl)
			start := time.Now()
			out, err := Render(context.Background(), tmpl, conversation, true, "<s>", "</s>")
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("Render = %d bytes, %v; want an error wrapping ErrLimit", len(out), err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %v, want under 2s", took)
			}
		})
	}
}

func TestRenderStopsWhenTheRequestIsCancelled(t *testing.T) {
	tmpl := writeTemplateGGUF(t, `{% for i in range(900000) %}{% for m in messages %}{% endfor %}{% endfor %}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Render(ctx, tmpl, conversation, true, "", "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Render on a cancelled context: %v, want context.Canceled", err)
	}
}

// The bounds leave room for real templates: a long conversation through the published Qwen2
// template renders whole, 16 MiB of it, whose concatenations (five copies of every message)
// build more than the 64 MiB floor of the byte limit.
func TestLongConversationRendersUnderTheLimits(t *testing.T) {
	var msgs []Message
	for i := range 64 {
		msgs = append(msgs, Message{Role: []string{"user", "assistant"}[i%2], Content: strings.Repeat("x", 256<<10)})
	}
	out, err := Render(context.Background(), qwen2Template, msgs, true, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	if want := 64 * 256 << 10; len(out) < want {
		t.Errorf("rendered %d bytes, want more than %d", len(out), want)
	}
}
