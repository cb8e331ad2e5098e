package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vkllm/vkllm/engine"
)

const childEnv = "VKLLM_SIDECAR_TEST_CHILD"

// TestMain doubles as the sidecar process for the supervisor tests: with childEnv set it parses
// `serve` flags and serves the scripted fake model until SIGTERM.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childServe(os.Args[1:]))
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func childServe(args []string) int {
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", DefaultListen, "")
	tokenFile := fs.String("token-file", "", "")
	delay := fs.Duration("delay", 20*time.Millisecond, "")
	crashAfter := fs.Duration("crash-after", 0, "exit with status 3 this long after start")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *crashAfter > 0 {
		go func() { time.Sleep(*crashAfter); os.Exit(3) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	load, _ := newFakeLoader(*delay)
	if err := Serve(ctx, ServeOptions{Listen: *listen, TokenFile: *tokenFile, Load: load}); err != nil {
		fmt.Fprintln(os.Stderr, "child serve:", err)
		return 1
	}
	return 0
}

type testServer struct {
	base  string
	token string
}

// startServer runs Serve in-process and returns its URL and token once it prints the listening line.
func startServer(t *testing.T, opts ServeOptions) testServer {
	t.Helper()
	if opts.TokenFile == "" {
		opts.TokenFile = filepath.Join(t.TempDir(), "token")
	}
	pr, pw := io.Pipe()
	opts.Out = pw
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, opts); pw.Close() }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return within 5 s of cancel")
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("read listening line: %v (Serve: %v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	base, ok := strings.CutPrefix(strings.TrimSpace(line), ListenPrefix)
	if !ok {
		t.Fatalf("listening line %q lacks %q", line, ListenPrefix)
	}
	tok, err := readToken(opts.TokenFile)
	if err != nil {
		t.Fatal(err)
	}
	ts := testServer{base: base, token: tok}
	// Wait for the start-up model.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var h Health
		code := ts.do(t, "GET", "/vkllm/health", "", &h)
		if code == 200 && h.Status != "loading" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server still loading after 30 s: %+v", h)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ts
}

func (ts testServer) do(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, ts.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ts.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

func (ts testServer) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.base+"/v1/"), option.WithAPIKey(ts.token), option.WithMaxRetries(0))
}

func TestOpenAIClientStreamsChatFromFakeModel(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	client := ts.client()
	ctx := context.Background()

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     "fake.gguf",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a story")},
		MaxTokens: openai.Int(8),
	})
	var acc openai.ChatCompletionAccumulator
	var deltas int
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			deltas++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got, want := acc.Choices[0].Message.Content, fakeText(8); got != want {
		t.Fatalf("streamed text %q, want %q", got, want)
	}
	if deltas != 8 {
		t.Errorf("%d content deltas, want one per token (8)", deltas)
	}
	if acc.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q, want length", acc.Choices[0].FinishReason)
	}
	if acc.Usage.CompletionTokens != 8 || acc.Usage.PromptTokens != 4 {
		t.Errorf("usage %+v, want 4 prompt and 8 completion tokens", acc.Usage)
	}

	// Non-streaming with a stop string.
	full, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:       "fake.gguf",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("go")},
		Temperature: openai.Float(0),
		Seed:        openai.Int(42),
		Stop:        openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(" fox")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := full.Choices[0].Message.Content; got != "Once upon a time there was a little" || full.Choices[0].FinishReason != "stop" {
		t.Fatalf("stop string: %q / %q, want the text before \" fox\" and finish_reason stop", got, full.Choices[0].FinishReason)
	}

	// Text completion.
	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel("fake.gguf"),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once")},
		MaxTokens: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text != fakeText(3) {
		t.Fatalf("completion %q, want %q", comp.Choices[0].Text, fakeText(3))
	}

	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(models.Data) != 1 || models.Data[0].ID != "fake.gguf" {
		t.Fatalf("models %+v, want fake.gguf", models.Data)
	}
}

func TestOpenAIClientStreamsChatFromEmbeddedModel(t *testing.T) {
	ts := startServer(t, ServeOptions{}) // the real engine with the embedded model
	var h Health
	ts.do(t, "GET", "/vkllm/health", "", &h)
	if h.Status != "ready" {
		t.Fatalf("embedded model did not load: %+v", h)
	}
	client := ts.client()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:       openai.ChatModel(h.Model.Name),
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens:   openai.Int(24),
		Temperature: openai.Float(0),
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	text := acc.Choices[0].Message.Content
	if strings.TrimSpace(text) == "" || chunks < 3 {
		t.Fatalf("embedded model streamed %q in %d chunks, want text over several chunks", text, chunks)
	}
	if acc.Usage.CompletionTokens == 0 || acc.Usage.CompletionTokens > 24 {
		t.Errorf("usage %+v, want 1..24 completion tokens", acc.Usage)
	}
	t.Logf("embedded model: %q", text)
}

func TestRequestsWithoutOrWithWrongTokenGet401(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	for _, path := range []string{"/v1/models", "/vkllm/health", "/vkllm/model", "/nope"} {
		for _, tc := range []struct {
			name, header string
			want         int
		}{
			{"none", "", 401},
			{"wrong", "Bearer " + strings.Repeat("0", len(ts.token)), 401},
			{"prefix of the right one", "Bearer " + ts.token[:10], 401},
			{"right token as Basic", "Basic " + ts.token, 401},
			{"right", "Bearer " + ts.token, 0},
		} {
			req, _ := http.NewRequest("GET", ts.base+path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			req.Header.Set("Origin", "http://evil.example")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if tc.want == 401 && resp.StatusCode != 401 {
				t.Errorf("%s with %s token: %d, want 401", path, tc.name, resp.StatusCode)
			}
			if tc.want == 0 && resp.StatusCode == 401 {
				t.Errorf("%s with the right token: 401", path)
			}
			if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
				t.Errorf("%s answered a cross-origin request with Access-Control-Allow-Origin %q", path, v)
			}
		}
	}
	// The official client with a wrong key gets an authentication error too.
	bad := testServer{base: ts.base, token: "wrong-token-wrong-token"}
	badClient := bad.client()
	_, err := badClient.Models.List(context.Background())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("openai client with a wrong key: %v, want a 401 error", err)
	}
}

func TestNonLoopbackListenNeedsAllowRemote(t *testing.T) {
	for _, tc := range []struct {
		listen string
		allow  bool
		ok     bool
	}{
		{"127.0.0.1:0", false, true},
		{"127.0.0.5:8080", false, true},
		{"[::1]:0", false, true},
		{"localhost:0", false, true},
		{"0.0.0.0:0", false, false},
		{":0", false, false},
		{"[::]:0", false, false},
		{"192.168.1.7:8080", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:0", true, true},
		{"no-port", true, false},
	} {
		err := checkLoopback(tc.listen, tc.allow)
		if (err == nil) != tc.ok {
			t.Errorf("checkLoopback(%q, allow=%v) = %v, want ok=%v", tc.listen, tc.allow, err, tc.ok)
		}
		if err != nil && !tc.allow && !strings.Contains(err.Error(), "--allow-remote") {
			t.Errorf("refusal of %q does not name --allow-remote: %v", tc.listen, err)
		}
	}
	load, _ := newFakeLoader(0)
	err := Serve(context.Background(), ServeOptions{Listen: "0.0.0.0:0", TokenFile: filepath.Join(t.TempDir(), "tok"), Load: load, Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Fatalf("Serve on 0.0.0.0 without AllowNonLoopback: %v, want a refusal naming --allow-remote", err)
	}
}

func TestTokenFileIsCreated0600AndReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "token")
	a, err := loadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	if len(a) != 2*tokenBytes {
		t.Errorf("token has %d hex characters, want %d", len(a), 2*tokenBytes)
	}
	b, err := loadOrCreateToken(path)
	if err != nil || b != a {
		t.Fatalf("second load = %q, %v; want the same token", b, err)
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := loadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("a too-short token file: %v, want an error naming it", err)
	}
}

func TestDisconnectedClientCancelsItsGeneration(t *testing.T) {
	load, last := newFakeLoader(50 * time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	ctx, cancel := context.WithCancel(context.Background())
	client := ts.client()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:     "fake.gguf",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("long story")},
		MaxTokens: openai.Int(1000),
	})
	got := 0
	for stream.Next() {
		if len(stream.Current().Choices) > 0 && stream.Current().Choices[0].Delta.Content != "" {
			got++
		}
		if got == 2 {
			break
		}
	}
	cancel()
	stream.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, cancelled, _ := last().stats(); cancelled == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the generation was not cancelled within 3 s of the client leaving")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The queue is free again: a short request completes at once.
	start := time.Now()
	client2 := ts.client()
	if _, err := client2.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "fake.gguf", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(1),
	}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("next request took %v: the cancelled generation still held the queue", d)
	}
}

func TestConcurrentRequestsRunOneAtATime(t *testing.T) {
	load, last := newFakeLoader(5 * time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := ts.client()
			res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "fake.gguf", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(5),
			})
			if err == nil && res.Choices[0].Message.Content != fakeText(5) {
				err = fmt.Errorf("got %q", res.Choices[0].Message.Content)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxActive, _, calls := last().stats(); maxActive != 1 || calls != 4 {
		t.Fatalf("max concurrent generations %d over %d calls, want 1 over 4", maxActive, calls)
	}
}

func TestQueueGrantsInArrivalOrderAndDropsCancelledWaiters(t *testing.T) {
	var q fifo
	if err := q.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	cctx, cancel := context.WithCancel(context.Background())
	for i := 0; i < 5; i++ {
		ctx := context.Background()
		if i == 2 {
			ctx = cctx
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.acquire(ctx); err != nil {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			q.release()
		}()
		for q.waiting() != i+1 { // each waiter is in line before the next arrives
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	for q.waiting() != 4 {
		time.Sleep(time.Millisecond)
	}
	q.release()
	wg.Wait()
	if fmt.Sprint(order) != "[0 1 3 4]" {
		t.Fatalf("grant order %v, want [0 1 3 4] (2 cancelled)", order)
	}
}

func TestLoadUnloadAndBadRequests(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load})
	var info struct{ Name string }
	if code := ts.do(t, "POST", "/vkllm/load", `{"path":"/models/other.gguf"}`, &info); code != 200 || info.Name != "/models/other.gguf" {
		t.Fatalf("load: %d %+v", code, info)
	}
	if code := ts.do(t, "GET", "/vkllm/model", "", &info); code != 200 || info.Name != "/models/other.gguf" {
		t.Fatalf("model after load: %d %+v", code, info)
	}
	if code := ts.do(t, "POST", "/vkllm/load", `{"path":"/models/x.broken"}`, nil); code != http.StatusUnprocessableEntity {
		t.Fatalf("load of a broken file: %d, want 422", code)
	}
	if code := ts.do(t, "POST", "/vkllm/unload", "", nil); code != 200 {
		t.Fatalf("unload: %d", code)
	}
	if code := ts.do(t, "GET", "/vkllm/model", "", nil); code != 404 {
		t.Fatalf("model after unload: %d, want 404", code)
	}
	if code := ts.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, nil); code != 503 {
		t.Fatalf("chat without a model: %d, want 503", code)
	}
	ts.do(t, "POST", "/vkllm/load", `{"path":""}`, nil)
	for _, tc := range []struct{ name, body string }{
		{"not json", `{`},
		{"no messages", `{"messages":[]}`},
		{"bad role", `{"messages":[{"role":"wizard","content":"x"}]}`},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`},
		{"n=2", `{"n":2,"messages":[{"role":"user","content":"x"}]}`},
		{"top_p>1", `{"top_p":1.5,"messages":[{"role":"user","content":"x"}]}`},
		{"negative max_tokens", `{"max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`},
	} {
		if code := ts.do(t, "POST", "/v1/chat/completions", tc.body, nil); code != 400 {
			t.Errorf("%s: %d, want 400", tc.name, code)
		}
	}
	var out chatResponse
	if code := ts.do(t, "POST", "/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, &out); code != 200 || out.Choices[0].Message.Content != fakeText(2) {
		t.Fatalf("text parts: %d %+v", code, out)
	}
}

func TestRequestDuringStartupLoadWaitsForTheModel(t *testing.T) {
	fake, _ := newFakeLoader(time.Millisecond)
	slow := func(ctx context.Context, opts engine.LoadOptions) (Model, error) {
		time.Sleep(300 * time.Millisecond)
		return fake(ctx, opts)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ServeOptions{TokenFile: tokenFile, Load: slow, Out: pw}) }()
	defer func() { cancel(); <-done }()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, pr)
	tok, _ := readToken(tokenFile)
	ts := testServer{base: strings.TrimPrefix(strings.TrimSpace(line), ListenPrefix), token: tok}
	var out chatResponse
	if code := ts.do(t, "POST", "/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"early"}]}`, &out); code != 200 || out.Choices[0].Message.Content != fakeText(2) {
		t.Fatalf("chat sent while the model loads: %d %+v, want it to wait and answer", code, out)
	}
}

func TestGenerationErrorMidStreamReachesTheOpenAIClient(t *testing.T) {
	load, _ := newFakeLoader(time.Millisecond)
	ts := startServer(t, ServeOptions{Load: load, ModelPath: "/models/gpu.failing"})
	client := ts.client()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("go")}, MaxTokens: openai.Int(10),
	})
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "device lost") {
		t.Fatalf("stream error %v, want the engine's \"device lost\"", err)
	}
	if text.String() != fakeText(2) {
		t.Fatalf("text before the error %q, want %q", text.String(), fakeText(2))
	}
}
