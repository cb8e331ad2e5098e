package store

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
)

const crashChildEnv = "VKLLM_STORE_CRASH_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashChild writes messages in a loop, committing each, and prints the id after each commit
// returns. The parent kills it with SIGKILL at a random moment.
func crashChild(dir string) {
	s, err := Open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	conv, err := s.CreateConversation(ctx, "crash", "m")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child conversation:", err)
		os.Exit(3)
	}
	fmt.Printf("conv %d\n", conv.ID)
	for i := 0; ; i++ {
		// Vary the size so commits span several pages and the WAL grows and checkpoints.
		body := strings.Repeat(fmt.Sprintf("row %d ", i), 1+i%400)
		m, err := s.AddMessage(ctx, Message{ConversationID: conv.ID, Role: "user", Content: body, State: StateComplete})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child add:", err)
			os.Exit(3)
		}
		fmt.Printf("msg %d %d\n", m.ID, len(body))
		if i%4 == 0 { // one bench invocation's three rows and their samples, in one transaction
			batch := fmt.Sprintf("batch-%d-%d", os.Getpid(), i)
			runs := []BenchRun{fullBenchRun("pp512", BenchOK), fullBenchRun("tg128", BenchOK), fullBenchRun("tg128 @ d512", BenchFailed)}
			for j := range runs {
				runs[j].ModelFile = batch
			}
			if _, err := s.SaveBenchRuns(ctx, runs); err != nil {
				fmt.Fprintln(os.Stderr, "child bench:", err)
				os.Exit(3)
			}
			fmt.Printf("bench %s %d\n", batch, len(runs))
		}
	}
}

// killRuns is how many writers TestKilledWriterLosesNoCommittedRow kills: VKLLM_KILL_RUNS, else
// 20 (docs/RELIABILITY.md records a run of 100).
func killRuns(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("VKLLM_KILL_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("VKLLM_KILL_RUNS=%q: want a positive count", v)
		}
		return n
	}
	return 20
}

func openTemp(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenTwiceKeepsSchemaVersionAndAppliesMigrationsOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		v, err := s.Version(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v != SchemaVersion() {
			t.Fatalf("open %d: version %d, want %d", i, v, SchemaVersion())
		}
		var rows int
		if err := s.db.QueryRow("SELECT count(*) FROM schema_version").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != len(migrations) {
			t.Fatalf("open %d: %d schema_version rows, want %d", i, rows, len(migrations))
		}
		s.Close()
	}
}

func TestOpenSetsWALForeignKeysBusyTimeoutAndFullSync(t *testing.T) {
	s := openTemp(t, t.TempDir())
	for _, tc := range []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
		{"foreign_keys", "1"},
		{"busy_timeout", "5000"},
		{"synchronous", "2"}, // FULL
	} {
		var got string
		if err := s.db.QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("PRAGMA %s = %s, want %s", tc.pragma, got, tc.want)
		}
	}
}

func TestConcurrentOpenOfAFreshFileMigratesOnce(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(dir)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent open: %v", err)
	}
	s := openTemp(t, dir)
	if v, err := s.Version(context.Background()); err != nil || v != SchemaVersion() {
		t.Fatalf("version %d, %v; want %d", v, err, SchemaVersion())
	}
}

func TestNewerSchemaVersionIsRefusedWithRemedy(t *testing.T) {
	dir := t.TempDir()
	s := openTemp(t, dir)
	if _, err := s.db.Exec("INSERT INTO schema_version(version, applied_at_ms) VALUES (?, 0)", SchemaVersion()+5); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), "upgrade vkllm") {
		t.Fatalf("Open of a newer schema: %v, want an error telling to upgrade vkllm", err)
	}
}

func TestDefaultDirFollowsVKLLMDataDirThenXDG(t *testing.T) {
	t.Setenv("VKLLM_DATA_DIR", "/tmp/vkllm-explicit")
	if d, err := DefaultDir(); err != nil || d != "/tmp/vkllm-explicit" {
		t.Fatalf("DefaultDir with VKLLM_DATA_DIR = %q, %v", d, err)
	}
	t.Setenv("VKLLM_DATA_DIR", "")
	t.Setenv("XDG_DATA_HOME", "/tmp/xdg-data")
	d, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(userDataDirForTest(t), "vkllm"); d != want {
		t.Fatalf("DefaultDir = %q, want %q", d, want)
	}
}

func userDataDirForTest(t *testing.T) string {
	d, err := userDataDir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPinsRoundTripPerDeviceKey(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	if _, ok, err := s.Pin(ctx, "10de:2335:aa"); err != nil || ok {
		t.Fatalf("Pin before set: ok=%v err=%v", ok, err)
	}
	if err := s.SetPin(ctx, "10de:2335:aa", 8000); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(ctx, "1002:73bf:bb", 4000); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(ctx, "10de:2335:aa", 9000); err != nil { // overwrite
		t.Fatal(err)
	}
	if mb, ok, err := s.Pin(ctx, "10de:2335:aa"); err != nil || !ok || mb != 9000 {
		t.Fatalf("Pin = %d %v %v, want 9000 true nil", mb, ok, err)
	}
	pins, err := s.ListPins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[0].DeviceKey != "1002:73bf:bb" || pins[0].MB != 4000 || pins[1].MB != 9000 {
		t.Fatalf("ListPins = %+v", pins)
	}
	if err := s.ClearPin(ctx, "10de:2335:aa"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Pin(ctx, "10de:2335:aa"); ok {
		t.Fatal("pin still set after ClearPin")
	}
	for _, bad := range []int{0, -5} {
		if err := s.SetPin(ctx, "10de:2335:aa", bad); err == nil {
			t.Errorf("SetPin(%d) accepted a non-positive amount", bad)
		}
	}
}

func TestGPUsModelsAndMachinesUpsertByKey(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	g := GPU{Key: "10de:2335:0011", VendorID: 0x10de, DeviceID: 0x2335, UUID: "0011", Name: "H200", DriverName: "NVIDIA", DriverInfo: "570.1", APIVersion: "1.4.303"}
	if err := s.UpsertGPU(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.DriverInfo = "575.2"
	if err := s.UpsertGPU(ctx, g); err != nil {
		t.Fatal(err)
	}
	gpus, err := s.GPUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 1 || gpus[0] != g {
		t.Fatalf("GPUs = %+v, want [%+v]", gpus, g)
	}
	if err := s.UpsertGPU(ctx, GPU{Name: "nokey"}); err == nil {
		t.Error("UpsertGPU without a key accepted")
	}

	m := Model{Path: "/m/a.gguf", SHA256: "abc", Arch: "llama", Quant: "Q4_K", SizeBytes: 123, Params: 456}
	id, err := s.UpsertModel(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	m.Quant = "Q8_0"
	id2, err := s.UpsertModel(ctx, m)
	if err != nil || id2 != id {
		t.Fatalf("second UpsertModel id %d (%v), want %d", id2, err, id)
	}
	got, ok, err := s.ModelByPath(ctx, "/m/a.gguf")
	m.ID = id
	if err != nil || !ok || got != m {
		t.Fatalf("ModelByPath = %+v %v %v, want %+v", got, ok, err, m)
	}
	if _, ok, _ := s.ModelByPath(ctx, "/nope"); ok {
		t.Error("ModelByPath found a model never saved")
	}

	machines, err := s.Machines(ctx)
	if err != nil || len(machines) != 1 || machines[0].Hostname != LocalMachine().Hostname {
		t.Fatalf("Machines = %+v, %v; want the local machine once", machines, err)
	}
}

func fullBenchRun(test string, status string) BenchRun {
	return BenchRun{
		Status: status, Backend: "vulkan", GPUKey: "10de:2335:0011", GPUName: "NVIDIA H200", GPUVendorID: 0x10de,
		GPUDeviceID: 0x2335, GPUUUID: "0011", DriverName: "NVIDIA", DriverVersion: "570.1", VulkanAPI: "1.4.303",
		Hostname: "box", OS: "linux", Kernel: "6.12", CPU: "EPYC", RAMBytes: 1 << 40, Threads: 16,
		EngineVersion: "0.1.0", EngineCommit: "deadbeef", ModelFile: "stories260K.gguf", ModelSHA256: "270cba1b",
		ModelArch: "llama", ModelType: "llama ?B F32", ModelParams: 260000, ModelQuant: "F32", ModelSize: 1 << 20,
		Context: 512, Placement: "resident", PlanVerdict: "resident", PlanHeadroomBytes: 1 << 30, PlanSource: "budget",
		PlanPinMB: 8000, Test: test, NPrompt: 512, NGen: 0, NDepth: 4096, Reps: 2, Warmup: 1, AvgNs: 1500, StddevNs: 700,
		AvgTS: 1000.5, StddevTS: 3.25, TTFTNs: 42, LoadNs: 1210000000, RunKey: "run-" + test, Decode: "greedy-chained",
		Samples: []BenchSample{{Rep: 0, Ns: 1000, TokensPerSec: 1001}, {Rep: 1, Ns: 2000, TokensPerSec: 1000}},
	}
}

func TestBenchRunRoundTripKeepsEveryFieldAndSample(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	want := fullBenchRun("pp512", BenchOK)
	want.CreatedAtMs = 1700000000000
	id, err := s.SaveBenchRun(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	failed := fullBenchRun("tg128", BenchCancelled)
	failed.GPUName, failed.GPUKey, failed.ModelFile, failed.ModelSHA256 = "AMD RX 6800", "1002:73bf:22", "other.gguf", "ffee"
	failed.Error, failed.Samples = "cancelled by the user", nil
	if _, err := s.SaveBenchRun(ctx, failed); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ListBenchRuns(ctx, BenchFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	want.ID, want.Source = id, "vkllm"
	got := runs[1] // newest first; want is older
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if runs[0].Status != BenchCancelled || runs[0].Error == "" || len(runs[0].Samples) != 0 {
		t.Fatalf("cancelled run = %+v", runs[0])
	}
	for _, tc := range []struct {
		f    BenchFilter
		want []string
	}{
		{BenchFilter{GPU: "h200"}, []string{"pp512"}},
		{BenchFilter{GPU: "1002:73bf:22"}, []string{"tg128"}},
		{BenchFilter{Model: "stories"}, []string{"pp512"}},
		{BenchFilter{Model: "FFE"}, []string{"tg128"}},
		{BenchFilter{GPU: "h200", Model: "other"}, nil},
		{BenchFilter{GPU: "%"}, nil}, // LIKE wildcards are literal
	} {
		runs, err := s.ListBenchRuns(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var tests []string
		for _, r := range runs {
			tests = append(tests, r.Test)
		}
		if fmt.Sprint(tests) != fmt.Sprint(tc.want) {
			t.Errorf("filter %+v: %v, want %v", tc.f, tests, tc.want)
		}
	}
	if _, err := s.SaveBenchRun(ctx, BenchRun{Test: "pp1", Status: "great"}); err == nil {
		t.Error("SaveBenchRun accepted an unknown status")
	}
}

func TestConversationsAndMessagesRoundTripAndCascade(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	a, err := s.CreateConversation(ctx, "first", "stories260K")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.CreateConversation(ctx, "second", "other")
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.AddMessage(ctx, Message{ConversationID: a.ID, Role: "user", Content: "hi", State: StateComplete})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.AddMessage(ctx, Message{ConversationID: a.ID, Role: "assistant", State: StateStreaming, Model: "stories260K", Settings: `{"temperature":0}`})
	if err != nil {
		t.Fatal(err)
	}
	r.Content, r.State, r.TokensPerSec, r.TTFTMs = "Once upon", StateInterrupted, 123.5, 7
	if err := s.UpdateMessage(ctx, r); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0] != u || msgs[1] != r {
		t.Fatalf("Messages = %+v\nwant %+v and %+v", msgs, u, r)
	}
	convs, err := s.ListConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 2 || convs[0].ID != a.ID { // a was updated last
		t.Fatalf("ListConversations = %+v, want %d first", convs, a.ID)
	}
	if err := s.RenameConversation(ctx, b.ID, "renamed"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Message{
		{ConversationID: a.ID, Role: "robot", State: StateComplete},
		{ConversationID: a.ID, Role: "user", State: "half"},
		{ConversationID: 9999, Role: "user", State: StateComplete},
	} {
		if _, err := s.AddMessage(ctx, bad); err == nil {
			t.Errorf("AddMessage(%+v) accepted", bad)
		}
	}
	if err := s.UpdateMessage(ctx, Message{ID: 9999, Role: "user", State: StateComplete}); err == nil {
		t.Error("UpdateMessage of a missing id accepted")
	}
	if err := s.DeleteConversation(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if msgs, _ := s.Messages(ctx, a.ID); len(msgs) != 0 {
		t.Fatalf("messages survive their conversation: %+v", msgs)
	}
	if err := s.DeleteConversation(ctx, a.ID); err == nil {
		t.Error("deleting a missing conversation is not reported")
	}
}

func TestInterruptStreamingMarksLeftoverRepliesInterrupted(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	c, _ := s.CreateConversation(ctx, "t", "m")
	done, _ := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: "q", State: StateComplete})
	live, _ := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Content: "partial", State: StateStreaming})
	n, err := s.InterruptStreaming(ctx)
	if err != nil || n != 1 {
		t.Fatalf("InterruptStreaming = %d, %v; want 1", n, err)
	}
	msgs, _ := s.Messages(ctx, c.ID)
	if msgs[0].State != StateComplete || msgs[1].ID != live.ID || msgs[1].State != StateInterrupted || msgs[1].Content != "partial" {
		t.Fatalf("after InterruptStreaming: %+v (done=%d)", msgs, done.ID)
	}
}

func TestTwoHandlesWriteTheSameFileConcurrently(t *testing.T) {
	dir := t.TempDir()
	a, b := openTemp(t, dir), openTemp(t, dir)
	ctx := context.Background()
	c, err := a.CreateConversation(ctx, "shared", "m")
	if err != nil {
		t.Fatal(err)
	}
	const perWriter = 40
	var wg sync.WaitGroup
	errs := make(chan error, 4*perWriter)
	for w, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				if _, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: fmt.Sprintf("w%d-%d", w, i), State: StateComplete}); err != nil {
					errs <- err
				}
				if err := s.SetPin(ctx, fmt.Sprintf("gpu-%d", w), i+1); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent write: %v", err)
	}
	msgs, err := b.Messages(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4*perWriter {
		t.Fatalf("%d messages, want %d", len(msgs), 4*perWriter)
	}
}

func TestCorruptFileErrorNamesPathAndRemedy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte(strings.Repeat("this is not sqlite ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	if err == nil {
		t.Fatal("Open of a garbage file succeeded")
	}
	t.Logf("corrupt file: %v", err)
	for _, want := range []string{path, "corrupt", "move it aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReadOnlyDirErrorNamesPathAndRemedy(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: file permissions do not stop root from writing")
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "ro")
	if err := os.Mkdir(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	_, err := Open(dir)
	if err == nil {
		t.Fatal("Open in a read-only dir succeeded")
	}
	for _, want := range []string{dir, "VKLLM_DATA_DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestUncreatableDirErrorNamesPathAndRemedy(t *testing.T) {
	parent := t.TempDir()
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "sub") // a path under a regular file can never be created, even by root
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "VKLLM_DATA_DIR") {
		t.Fatalf("Open under a file: %v, want an error naming %s and VKLLM_DATA_DIR", err, dir)
	}
}

func TestFullDatabaseErrorSaysDiskFullAndRemedy(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	s.db.SetMaxOpenConns(1) // the page cap below is per connection
	var pages int
	if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages+2)); err != nil {
		t.Fatal(err)
	}
	c, err := s.CreateConversation(ctx, "big", "m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "user", Content: strings.Repeat("x", 1<<20), State: StateComplete})
	if err == nil {
		t.Fatal("a write past the page cap succeeded")
	}
	t.Logf("full disk: %v", err)
	for _, want := range []string{s.Path(), "disk is full", "free some space"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestKilledWriterLosesNoCommittedRow runs a child process that commits rows in a loop, kills it
// with SIGKILL at random moments, and checks after each kill that the file is intact and holds
// every row the child reported as committed.
func TestKilledWriterLosesNoCommittedRow(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns and kills 20 writer processes")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	committed := map[int64]int{} // message id -> content length
	batches := map[string]int{}  // bench batch -> rows, for the batches whose commit returned
	ctx := context.Background()
	kills := killRuns(t)
	start := time.Now()
	for iter := 0; iter < kills; iter++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Wait for the first commit so every iteration kills a writer mid-loop, then let it run
		// a random while longer.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("iteration %d: child wrote nothing; stderr: %s", iter, stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Read everything the child printed before Wait closes the pipe.
		reported := append([]string{first}, drain(lines)...)
		err = cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("iteration %d: child ended with %v, want killed; stderr: %s", iter, err, stderr.String())
		}
		n := 0
		for _, line := range reported {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == "msg" {
				id, _ := strconv.ParseInt(f[1], 10, 64)
				size, _ := strconv.Atoi(f[2])
				committed[id] = size
				n++
			}
			if len(f) == 3 && f[0] == "bench" {
				batches[f[1]], _ = strconv.Atoi(f[2])
			}
		}
		if strings.Contains(stderr.String(), "child") {
			t.Fatalf("iteration %d: child reported an error: %s", iter, stderr.String())
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatalf("iteration %d: open after kill: %v", iter, err)
		}
		res, err := s.IntegrityCheck(ctx)
		if err != nil || res != "ok" {
			t.Fatalf("iteration %d: integrity_check = %q, %v", iter, res, err)
		}
		if err := checkRows(s.db, committed); err != nil {
			t.Fatalf("iteration %d (%d new commits): %v", iter, n, err)
		}
		if err := checkBatches(s.db, batches); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		s.Close()
	}
	if len(committed) < kills || len(batches) == 0 {
		t.Fatalf("only %d committed messages and %d bench batches over all iterations; the child barely ran", len(committed), len(batches))
	}
	t.Logf("%d kills in %.1f s: %d committed messages and %d committed bench batches all present, integrity_check ok, no partial batch",
		kills, time.Since(start).Seconds(), len(committed), len(batches))
}

// checkBatches checks that every bench batch whose commit returned has all its rows, each with
// its samples, and that no batch is in the file in part (one killed mid-transaction).
func checkBatches(db *sql.DB, committed map[string]int) error {
	rows, err := db.Query(`SELECT r.model_file, count(DISTINCT r.id), count(s.run_id) FROM bench_runs r
		LEFT JOIN bench_samples s ON s.run_id = r.id WHERE r.model_file LIKE 'batch-%' GROUP BY r.model_file`)
	if err != nil {
		return fmt.Errorf("count bench batches: %w", err)
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var batch string
		var runs, samples int
		if err := rows.Scan(&batch, &runs, &samples); err != nil {
			return fmt.Errorf("count bench batches: %w", err)
		}
		seen[batch] = true
		if runs != 3 || samples != 3*len(fullBenchRun("x", BenchOK).Samples) {
			return fmt.Errorf("bench batch %s is in the file in part: %d of 3 runs, %d samples", batch, runs, samples)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count bench batches: %w", err)
	}
	for batch := range committed {
		if !seen[batch] {
			return fmt.Errorf("committed bench batch %s is missing", batch)
		}
	}
	return nil
}

func drain(c chan string) []string {
	var out []string
	for l := range c {
		out = append(out, l)
	}
	return out
}

func checkRows(db *sql.DB, committed map[int64]int) error {
	for id, size := range committed {
		var got int
		if err := db.QueryRow("SELECT length(content) FROM messages WHERE id = ?", id).Scan(&got); err != nil {
			return fmt.Errorf("committed message %d: %w", id, err)
		}
		if got != size {
			return fmt.Errorf("committed message %d has %d bytes, want %d", id, got, size)
		}
	}
	return nil
}

func TestDatabaseFileIsPrivateToItsOwner(t *testing.T) {
	s := openTemp(t, t.TempDir())
	st, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %v, want 0600", s.Path(), st.Mode().Perm())
	}
}

func TestExplainGivesTheRemedyForEachFixableFailure(t *testing.T) {
	const path = "/data/vkllm.db"
	for _, tc := range []struct {
		code sqlite3.ErrNo
		want []string
	}{
		{sqlite3.ErrFull, []string{"disk is full", "free some space", "VKLLM_DATA_DIR"}},
		{sqlite3.ErrReadonly, []string{"read-only", "writable", "VKLLM_DATA_DIR"}},
		{sqlite3.ErrPerm, []string{"read-only", "writable"}},
		{sqlite3.ErrCantOpen, []string{"cannot open", "VKLLM_DATA_DIR"}},
		{sqlite3.ErrCorrupt, []string{"corrupt", "move it aside"}},
		{sqlite3.ErrNotADB, []string{"corrupt", "move it aside"}},
		{sqlite3.ErrIoErr, []string{"I/O error", "check the disk"}},
		{sqlite3.ErrBusy, []string{"locked by another vkllm process", "close other vkllm"}},
	} {
		err := explain(path, "save thing", fmt.Errorf("exec: %w", sqlite3.Error{Code: tc.code}))
		for _, want := range append(tc.want, path, "save thing") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("code %d: %q lacks %q", tc.code, err, want)
			}
		}
		var se sqlite3.Error
		if !errors.As(err, &se) || se.Code != tc.code {
			t.Errorf("code %d: the sqlite error is not kept in the chain: %v", tc.code, err)
		}
	}
}

func TestBenchRunsOfOneInvocationAreSavedWholeOrNotAtAll(t *testing.T) {
	for _, tc := range []struct {
		name     string
		full     bool // the disk fills up while the second run is written
		wantRows int
	}{
		{"room for all", false, 3},
		{"disk full at the second", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTemp(t, t.TempDir())
			ctx := context.Background()
			s.db.SetMaxOpenConns(1) // the page cap below is per connection
			var pages int
			if err := s.db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
				t.Fatal(err)
			}
			if _, err := s.db.Exec(fmt.Sprintf("PRAGMA max_page_count = %d", pages+8)); err != nil {
				t.Fatal(err)
			}
			second := fullBenchRun("tg128", BenchOK)
			if tc.full {
				second.Error = strings.Repeat("x", 1<<20) // far past the 8 pages left
			}
			_, err := s.SaveBenchRuns(ctx, []BenchRun{fullBenchRun("pp512", BenchOK), second, fullBenchRun("tg128 @ d512", BenchFailed)})
			if tc.full != (err != nil) {
				t.Fatalf("save: %v, want an error only when the disk is full", err)
			}
			if tc.full && !strings.Contains(err.Error(), "disk is full") {
				t.Errorf("error %q does not say the disk is full", err)
			}
			runs, err := s.ListBenchRuns(ctx, BenchFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != tc.wantRows {
				t.Fatalf("%d runs saved, want %d (all or none)", len(runs), tc.wantRows)
			}
		})
	}
}

func TestStopReasonIsSavedAndDeleteMessagesDropsOneOrTheTail(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "chat", "m")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for i, role := range []string{"user", "assistant", "user", "assistant", "user", "assistant"} {
		m, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: role, Content: fmt.Sprint("m", i), State: StateComplete})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	cut := Message{ID: ids[5], ConversationID: c.ID, Role: "assistant", Content: "m5 cut", State: StateComplete, StopReason: "length"}
	if err := s.UpdateMessage(ctx, cut); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		from     int64
		andLater bool
		removed  int64
		left     []string
	}{
		{"one message", ids[1], false, 1, []string{"m0", "m2", "m3", "m4", "m5 cut"}},
		{"a message and every later one", ids[3], true, 3, []string{"m0", "m2"}},
	}
	for _, tc := range tests {
		n, err := s.DeleteMessages(ctx, c.ID, tc.from, tc.andLater)
		if err != nil || n != tc.removed {
			t.Fatalf("%s: removed %d, %v; want %d", tc.name, n, err, tc.removed)
		}
		msgs, err := s.Messages(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.Content)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.left) {
			t.Fatalf("%s: left %v, want %v", tc.name, got, tc.left)
		}
	}
	if _, err := s.DeleteMessages(ctx, c.ID, ids[1], false); err == nil {
		t.Fatal("deleting a message that is gone succeeded")
	}
	other, err := s.CreateConversation(ctx, "other", "m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteMessages(ctx, other.ID, ids[0], true); err == nil {
		t.Fatal("deleting a message through another conversation succeeded")
	}
}

func TestStopReasonRoundTrips(t *testing.T) {
	s := openTemp(t, t.TempDir())
	ctx := context.Background()
	c, err := s.CreateConversation(ctx, "chat", "m")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.AddMessage(ctx, Message{ConversationID: c.ID, Role: "assistant", Content: "x", State: StateComplete, StopReason: "length"})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Messages(ctx, c.ID)
	if err != nil || len(msgs) != 1 || msgs[0].StopReason != "length" || msgs[0].ID != m.ID {
		t.Fatalf("messages: %+v, %v; want the reply with stop reason length", msgs, err)
	}
}
