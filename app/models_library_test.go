package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/vkllm/vkllm/engine/model/modeltest"
	"github.com/vkllm/vkllm/engine/quant"
	"github.com/vkllm/vkllm/library"
)

// memLibrary is an in-memory LibraryStore.
type memLibrary struct {
	mu      sync.Mutex
	models  map[string]library.Model
	folders []string
	recent  []string
}

func newMemLibrary() *memLibrary { return &memLibrary{models: map[string]library.Model{}} }

func (m *memLibrary) LibraryModels(context.Context) ([]library.Model, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []library.Model
	for _, x := range m.models {
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (m *memLibrary) SaveLibraryModel(_ context.Context, x library.Model) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.models[x.Path] = x
	return nil
}

func (m *memLibrary) PruneLibrary(_ context.Context, keep []string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for p := range m.models {
		if !slices.Contains(keep, p) {
			delete(m.models, p)
			n++
		}
	}
	return n, nil
}

func (m *memLibrary) LibraryFolders(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.folders), nil
}

func (m *memLibrary) AddLibraryFolder(_ context.Context, p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.folders, p) {
		m.folders = append(m.folders, p)
	}
	return nil
}

func (m *memLibrary) RemoveLibraryFolder(_ context.Context, p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.folders = slices.DeleteFunc(m.folders, func(f string) bool { return f == p })
	return nil
}

func (m *memLibrary) RecentModels(_ context.Context, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.recent[:min(limit, len(m.recent))]), nil
}

func (m *memLibrary) AddRecentModel(_ context.Context, p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recent = append([]string{p}, slices.DeleteFunc(m.recent, func(r string) bool { return r == p })...)
	return nil
}

// TestLibraryScanRunsInTheBackgroundAndKeepsWhatItFound scans an LM Studio folder and an Ollama
// store laid out in a temporary home folder added by the user as "~/...", through the service:
// Scan returns at once, progress and finished arrive as library:event, and the library lists both
// models; a second scan reads nothing, and a removed file leaves the library.
func TestLibraryScanRunsInTheBackgroundAndKeepsWhatItFound(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	lms := filepath.Join(home, "models", "lmstudio", "acme", "Tiny-GGUF")
	if err := os.MkdirAll(lms, 0o755); err != nil {
		t.Fatal(err)
	}
	tiny := modeltest.TinySynth(t, lms, "llama", quant.Q8_0, 1)
	ollama := filepath.Join(home, ".ollama", "models")
	qwen := modeltest.TinySynth(t, t.TempDir(), "qwen3", quant.Q8_0, 2)
	b, err := os.ReadFile(qwen)
	if err != nil {
		t.Fatal(err)
	}
	const digest = "feed0123"
	for p, data := range map[string][]byte{
		filepath.Join(ollama, "blobs", "sha256-"+digest): b,
		filepath.Join(ollama, "manifests", "registry.ollama.ai", "library", "qwen3", "tiny"): []byte(
			fmt.Sprintf(`{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s"}]}`, digest)),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	st := newMemLibrary()
	rec := &recorder{}
	svc := NewLibraryService(context.Background(), st, rec, []library.Root{{Path: ollama, Source: library.SourceOllama}})
	added, err := svc.AddFolder("~/models/lmstudio")
	if err != nil || added != filepath.Join(home, "models", "lmstudio") {
		t.Fatalf("AddFolder(~/models/lmstudio) = %q, %v", added, err)
	}
	if _, err := svc.AddFolder("~/no-such-folder"); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("adding a missing folder: %v", err)
	}
	roots, err := svc.Roots()
	if err != nil || len(roots) != 2 || !roots[0].Exists || roots[1].Source != library.SourceFolder || !roots[1].Added {
		t.Fatalf("roots %+v, %v", roots, err)
	}

	state, err := svc.Scan()
	if err != nil || !state.Running {
		t.Fatalf("Scan = %+v, %v; want it running in the background", state, err)
	}
	svc.wait()
	models, err := svc.Models()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]library.Model{}
	for _, m := range models {
		names[m.Name] = m
	}
	if len(models) != 2 || names["qwen3:tiny"].Source != library.SourceOllama || names[strings.TrimSuffix(filepath.Base(tiny), ".gguf")].Path != tiny {
		t.Fatalf("library %+v, want the Ollama and the LM Studio model", models)
	}
	kinds := eventKinds(rec)
	if len(kinds) < 2 || kinds[0] != "progress" || kinds[len(kinds)-1] != "finished" {
		t.Fatalf("library events %v, want progress first and finished last", kinds)
	}
	if s := svc.Status(); s.Running || s.Progress.Found != 2 || s.Progress.Read != 2 {
		t.Fatalf("status after the scan %+v", s)
	}

	if _, err := svc.Scan(); err != nil {
		t.Fatal(err)
	}
	svc.wait()
	if s := svc.Status(); s.Progress.Read != 0 || s.Progress.Unchanged != 2 {
		t.Fatalf("second scan %+v, want both unchanged and none read", s.Progress)
	}

	if err := os.Remove(tiny); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Scan(); err != nil {
		t.Fatal(err)
	}
	svc.wait()
	if models, _ := svc.Models(); len(models) != 1 || models[0].Name != "qwen3:tiny" {
		t.Fatalf("after removing the LM Studio file the library is %+v", models)
	}
}

func eventKinds(r *recorder) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if ev, ok := e.payload.(LibraryEvent); ok && e.name == EventLibrary {
			out = append(out, ev.Kind)
		}
	}
	return out
}

// TestOpenExpandsTheHomeFolderAndKeepsARecentList: "~/m.gguf" reaches the engine as the full
// path, a loaded model tops the recent list, Embedded loads "" and Browse without a dialog says
// to type the path.
func TestOpenExpandsTheHomeFolderAndKeepsARecentList(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	eng := &fakeEngine{}
	rec := &recorder{}
	svc := NewModelService(context.Background(), eng, rec)
	lib := newMemLibrary()
	UseRecents(svc, lib)
	for _, p := range []string{"~/a.gguf", " '~/b.gguf' ", "~/a.gguf"} {
		if _, err := svc.Open(p); err != nil {
			t.Fatal(err)
		}
	}
	a, b := filepath.Join(home, "a.gguf"), filepath.Join(home, "b.gguf")
	if fmt.Sprint(eng.loadPaths) != fmt.Sprint([]string{a, b, a}) {
		t.Fatalf("the engine was asked for %v", eng.loadPaths)
	}
	recent, err := svc.Recent()
	if err != nil || len(recent) != 2 || recent[0].Path != a || recent[0].Name != "a" || recent[0].Exists || recent[1].Path != b {
		t.Fatalf("recent %+v, %v", recent, err)
	}
	if _, err := svc.Embedded(); err != nil || eng.loadPaths[len(eng.loadPaths)-1] != "" {
		t.Fatalf("Embedded: %v, loads %v", err, eng.loadPaths)
	}
	if _, err := svc.Browse(); err != ErrNoFileDialog || svc.HasFileDialog() {
		t.Fatalf("Browse without a window: %v", err)
	}
	UseFileDialog(svc, func(string) (string, error) { return "/picked.gguf", nil })
	if p, err := svc.Browse(); err != nil || p != "/picked.gguf" {
		t.Fatalf("Browse = %q, %v", p, err)
	}
	svc.DropFiles([]string{"/x/readme.txt"})
	svc.DropFiles([]string{"/x/notes.txt", "/x/model.GGUF"})
	var drops []LibraryEvent
	rec.mu.Lock()
	for _, e := range rec.events {
		if ev, ok := e.payload.(LibraryEvent); ok && ev.Kind == "dropped" {
			drops = append(drops, ev)
		}
	}
	rec.mu.Unlock()
	if len(drops) != 2 || drops[0].Error == "" || drops[0].Path != "" || drops[1].Path != "/x/model.GGUF" {
		t.Fatalf("drops %+v, want a refusal of the text file and the .gguf offered", drops)
	}
}
