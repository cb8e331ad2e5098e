package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
)

const systemPrompt = "You are a storyteller who answers in one short line every time."

// turnText is the user message of turn i (from 1): ten words, the first naming the turn.
func turnText(i int) string {
	return fmt.Sprintf("turn%d tell me one more short story about a red fox", i)
}

// longChat is a conversation with a system prompt whose 20 turns outgrow a fake context of 160
// tokens by the 8th: each turn is a 12-token user message and a 6-token reply.
func longChat(t *testing.T, policy ContextPolicy) (*ChatService, *fakeEngine, *memStore, *recorder, int64) {
	t.Helper()
	eng := &fakeEngine{pieces: []string{"Once", " upon", " a", " time"}, context: 160, timings: engine.Timings{GeneratedTokens: 4}}
	st, rec := newMemStore(), &recorder{}
	svc := NewChatService(context.Background(), eng, st, rec)
	settings := DefaultChatSettings()
	settings.MaxTokens = 16
	svc.SetSettings(settings)
	conv, err := svc.CreateConversation("long")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddMessage(context.Background(), Message{ConversationID: conv.ID, Role: "system", Content: systemPrompt, State: StateComplete}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetContextPolicy(conv.ID, string(policy)); err != nil {
		t.Fatalf("SetContextPolicy(%q): %v", policy, err)
	}
	return svc, eng, st, rec, conv.ID
}

func has(msgs []engine.Message, text string) bool {
	for _, m := range msgs {
		if m.Content == text {
			return true
		}
	}
	return false
}

func TestContextPoliciesKeepALongConversationWorking(t *testing.T) {
	cases := []struct {
		policy         ContextPolicy
		keepsFirstTurn bool
	}{
		{PolicyRolling, false},
		{PolicyTruncateMiddle, true},
	}
	for _, tc := range cases {
		t.Run(string(tc.policy), func(t *testing.T) {
			svc, eng, st, rec, conv := longChat(t, tc.policy)
			for i := 1; i <= 20; i++ {
				if i == 9 {
					// the negative control: the whole history would not fit the context any more
					msgs, _ := st.Messages(context.Background(), conv)
					full := promptHistory("", append(msgs, Message{Role: "user", Content: turnText(i)}))
					var em []engine.Message
					for _, m := range full {
						em = append(em, engine.Message{Role: m.Role, Content: m.Content})
					}
					if n := fakeTokens(em); n < eng.context {
						t.Fatalf("the 9th turn's whole history has %d tokens, under the context of %d: the test does not overflow", n, eng.context)
					}
				}
				got, err := svc.Send(conv, turnText(i))
				if err != nil || got.State != StateComplete {
					t.Fatalf("turn %d: %+v, %v; want a complete reply", i, got, err)
				}
			}
			if len(eng.requests) != 20 {
				t.Fatalf("%d requests reached the engine, want 20", len(eng.requests))
			}
			for i, req := range eng.requests {
				if req.Messages[0].Role != "system" || req.Messages[0].Content != systemPrompt {
					t.Fatalf("turn %d: the prompt starts with %+v, want the system prompt", i+1, req.Messages[0])
				}
				if last := req.Messages[len(req.Messages)-1]; last.Content != turnText(i+1) {
					t.Fatalf("turn %d: the prompt ends with %q, want the new message", i+1, last.Content)
				}
				if n := fakeTokens(req.Messages); n+16 > eng.context {
					t.Fatalf("turn %d: the prompt has %d tokens, no room for a 16-token reply in %d", i+1, n, eng.context)
				}
			}
			for i, req := range eng.requests {
				// the turns after the kept head are the latest ones, without a gap, up to the new one
				var turns []int
				for _, m := range req.Messages {
					var n int
					if _, err := fmt.Sscanf(m.Content, "turn%d", &n); m.Role == "user" && err == nil {
						turns = append(turns, n)
					}
				}
				if tc.keepsFirstTurn && turns[0] != 1 {
					t.Fatalf("turn %d: the prompt's first turn is %d, want turn 1 kept", i+1, turns[0])
				}
				rest := turns
				if tc.keepsFirstTurn && len(turns) > 1 {
					rest = turns[1:]
				}
				for j := range rest {
					if rest[j] != i+1-(len(rest)-1-j) {
						t.Fatalf("turn %d: the prompt holds turns %v, want the latest ones without a gap", i+1, turns)
					}
				}
			}
			if last := eng.requests[19].Messages; has(last, turnText(5)) || has(last, turnText(1)) != tc.keepsFirstTurn {
				t.Errorf("the 20th prompt holds turn 5 or misses the first turn's policy (keep: %v): %+v", tc.keepsFirstTurn, last)
			}
			var finished []ChatEvent
			for _, ev := range rec.chatEvents() {
				if ev.Kind == "finished" {
					finished = append(finished, ev)
				}
			}
			use := finished[len(finished)-1].Context
			if use == nil || use.Context != 160 || use.Used != use.PromptTokens+4 || use.Used > 160 || use.Dropped == 0 || use.Policy != string(tc.policy) {
				t.Fatalf("the 20th reply's context use = %+v, want used = prompt + 4 within 160, messages dropped, policy %s", use, tc.policy)
			}
		})
	}
}

// A turn that does not roll sends the previous prompt and its reply unchanged at the front, so
// the engine's prefix cache covers the whole history; the window rolls rarely.
func TestRollingWindowKeepsThePromptFrontBetweenRolls(t *testing.T) {
	svc, eng, _, _, conv := longChat(t, PolicyRolling)
	for i := 1; i <= 20; i++ {
		if _, err := svc.Send(conv, turnText(i)); err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
	}
	rolls := 0
	for i := 1; i < len(eng.requests); i++ {
		prev, cur := eng.requests[i-1].Messages, eng.requests[i].Messages
		extended := len(cur) == len(prev)+2
		for j := 0; extended && j < len(prev); j++ {
			extended = prev[j] == cur[j]
		}
		if extended && cur[len(prev)].Content != "Once upon a time" {
			extended = false
		}
		if !extended {
			rolls++
		}
	}
	// 20 turns of 18 tokens in a 160-token context: a window that rolled by one turn would roll
	// on each of the 13 turns after the first overflow.
	if rolls == 0 || rolls > 4 {
		t.Fatalf("the window rolled on %d of 19 turns, want 1 to 4", rolls)
	}
}

func TestStopPolicyRefusesWithTheNumbersUntilThePolicyChanges(t *testing.T) {
	svc, eng, st, _, conv := longChat(t, PolicyStop)
	var stopped int
	for i := 1; i <= 12 && stopped == 0; i++ {
		got, err := svc.Send(conv, turnText(i))
		if err == nil {
			continue
		}
		stopped = i
		msg := err.Error()
		for _, want := range []string{"160", "16 for the reply", "start a new chat", "rolling window"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the stop message %q does not say %q", msg, want)
			}
		}
		if strings.Count(msg, ". ") > 0 || !strings.HasSuffix(msg, ".") || strings.Contains(msg, "engine chat") {
			t.Errorf("the stop message %q is not one sentence of its own", msg)
		}
		if got.State != StateError || got.Content != msg {
			t.Errorf("the refused reply is saved as %+v, want state error with the message", got)
		}
	}
	if stopped < 7 || stopped > 9 {
		t.Fatalf("the stop policy refused at turn %d, want the first turn that overflows (7 to 9)", stopped)
	}
	requests := len(eng.requests)
	if requests != stopped-1 {
		t.Fatalf("%d requests reached the engine, want the %d before the stop", requests, stopped-1)
	}
	if _, err := svc.Send(conv, "and again"); err == nil {
		t.Fatal("the stop policy let a later message through")
	}
	if _, err := svc.SetContextPolicy(conv, string(PolicyRolling)); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Send(conv, "now go on")
	if err != nil || got.State != StateComplete {
		t.Fatalf("after switching to the rolling window: %+v, %v; want a complete reply", got, err)
	}
	if c, _ := st.Conversation(context.Background(), conv); c.ContextPolicy != string(PolicyRolling) {
		t.Fatalf("the stored policy is %q, want rolling", c.ContextPolicy)
	}
}

func TestSetContextPolicyRefusesAnUnknownPolicy(t *testing.T) {
	cases := []struct {
		in      string
		want    ContextPolicy
		wantErr bool
	}{
		{"", PolicyRolling, false},
		{"rolling", PolicyRolling, false},
		{"truncate-middle", PolicyTruncateMiddle, false},
		{" stop ", PolicyStop, false},
		{"forget", "", true},
	}
	for _, tc := range cases {
		got, err := ParseContextPolicy(tc.in)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("ParseContextPolicy(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	svc, _, st, _, conv := longChat(t, PolicyTruncateMiddle)
	if _, err := svc.SetContextPolicy(conv, "forget"); err == nil {
		t.Fatal("SetContextPolicy accepted an unknown policy")
	}
	if c, _ := st.Conversation(context.Background(), conv); c.ContextPolicy != string(PolicyTruncateMiddle) {
		t.Fatalf("a refused policy changed the stored one to %q", c.ContextPolicy)
	}
}

func TestAMessageTooLongForWhatIsAlwaysKeptFailsAloneAndTheChatGoesOn(t *testing.T) {
	svc, eng, _, _, conv := longChat(t, PolicyRolling)
	if _, err := svc.Send(conv, turnText(1)); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("word ", 200)
	got, err := svc.Send(conv, huge)
	if err == nil || got.State != StateError || !strings.Contains(err.Error(), "shorten the message") {
		t.Fatalf("a 200-word message in a 160-token context: %+v, %v; want a one-sentence refusal", got, err)
	}
	if len(eng.requests) != 1 {
		t.Fatalf("the refused message reached the engine (%d requests)", len(eng.requests))
	}
	if got, err := svc.Send(conv, turnText(3)); err != nil || got.State != StateComplete {
		t.Fatalf("the message after the refused one: %+v, %v; want a complete reply", got, err)
	}
}

func TestWebServerSetsAConversationsContextPolicy(t *testing.T) {
	srv, _, st := newTestServer(t)
	_, r := post(t, srv.URL+"/api/ChatService/CreateConversation", `["Stories"]`, nil)
	var c Conversation
	if err := json.Unmarshal(r.Result, &c); err != nil || c.ContextPolicy != string(PolicyRolling) {
		t.Fatalf("a new conversation %s, want the rolling policy", r.Result)
	}
	code, r := post(t, srv.URL+"/api/ChatService/SetContextPolicy", fmt.Sprintf(`[%d, "truncate-middle"]`, c.ID), nil)
	if err := json.Unmarshal(r.Result, &c); code != 200 || err != nil || c.ContextPolicy != string(PolicyTruncateMiddle) {
		t.Fatalf("SetContextPolicy: %d %s %q, want the conversation with truncate-middle", code, r.Result, r.Error)
	}
	if got, _ := st.Conversation(context.Background(), c.ID); got.ContextPolicy != string(PolicyTruncateMiddle) {
		t.Fatalf("stored policy %q", got.ContextPolicy)
	}
	if code, r := post(t, srv.URL+"/api/ChatService/SetContextPolicy", fmt.Sprintf(`[%d, "forget"]`, c.ID), nil); !strings.Contains(r.Error, "pick one of those") {
		t.Fatalf("an unknown policy: %d %q, want a refusal saying what to pick", code, r.Error)
	}
}
