package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestLibraryKeepsModelsFoldersAndRecents(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := LibraryModel{Path: "/m/a.gguf", Source: "lmstudio", Name: "a", Arch: "llama", Params: 7, Quant: "Q4_K_M", SizeBytes: 100, ContextLength: 4096, Parts: 1, FileMtimeMs: 5, ScanKey: "100:5;"}
	b := LibraryModel{Path: "/m/b.gguf", Source: "ollama", Name: "B", Arch: "gemma3", Problem: `architecture "gemma3" is not supported`, HeaderOnly: true, ScanKey: "1:1;"}
	for _, m := range []LibraryModel{a, b, a} {
		if err := s.SaveLibraryModel(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LibraryModels(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Parts = 1 // saved as at least one part
	if fmt.Sprint(got) != fmt.Sprint([]LibraryModel{a, b}) {
		t.Fatalf("library %+v, want %+v and %+v by name", got, a, b)
	}
	if n, err := s.PruneLibrary(ctx, []string{b.Path}); err != nil || n != 1 {
		t.Fatalf("prune: %d, %v; want a.gguf removed", n, err)
	}
	if got, _ := s.LibraryModels(ctx); len(got) != 1 || got[0].Path != b.Path {
		t.Fatalf("after the prune %+v", got)
	}

	for _, f := range []string{"/x", "/y", "/x"} {
		if err := s.AddLibraryFolder(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RemoveLibraryFolder(ctx, "/x"); err != nil {
		t.Fatal(err)
	}
	if fs, err := s.LibraryFolders(ctx); err != nil || fmt.Sprint(fs) != "[/y]" {
		t.Fatalf("folders %v, %v", fs, err)
	}

	for _, p := range []string{"/r1", "/r2", "/r1"} {
		if err := s.AddRecentModel(ctx, p); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if r, err := s.RecentModels(ctx, 5); err != nil || fmt.Sprint(r) != "[/r1 /r2]" {
		t.Fatalf("recent %v, %v; want the latest first", r, err)
	}
}
