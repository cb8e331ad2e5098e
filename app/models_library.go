package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vkllm/vkllm/library"
)

// EventLibrary carries the model library's scan progress and the files dropped on the window.
const EventLibrary = "library:event"

// LibraryStore keeps the model library, the folders added to its scan and the recent models;
// *store.Store satisfies it through main.go's adapter.
type LibraryStore interface {
	LibraryModels(ctx context.Context) ([]library.Model, error)
	SaveLibraryModel(ctx context.Context, m library.Model) error
	PruneLibrary(ctx context.Context, keep []string) (int, error)
	LibraryFolders(ctx context.Context) ([]string, error)
	AddLibraryFolder(ctx context.Context, path string) error
	RemoveLibraryFolder(ctx context.Context, path string) error
	RecentModels(ctx context.Context, limit int) ([]string, error)
	AddRecentModel(ctx context.Context, path string) error
}

// LibraryEvent is the payload of library:event.
type LibraryEvent struct {
	Kind     string            `json:"kind"` // "progress" | "finished" | "failed" | "dropped"
	Progress *library.Progress `json:"progress,omitempty"`
	Models   int               `json:"models,omitempty"`  // finished: models in the library
	Removed  int               `json:"removed,omitempty"` // finished: models gone since the last scan
	Skipped  []string          `json:"skipped,omitempty"` // finished: what could not be scanned
	Error    string            `json:"error,omitempty"`
	Path     string            `json:"path,omitempty"` // dropped: the file dropped on the window
	AtMs     int64             `json:"atMs"`
}

// LibraryRoot is one folder the scan covers.
type LibraryRoot struct {
	Path   string `json:"path"`
	Source string `json:"source"`
	Exists bool   `json:"exists"`
	Added  bool   `json:"added"` // added by the user (can be removed)
}

// ScanState says whether a scan runs and what the last one found.
type ScanState struct {
	Running  bool             `json:"running"`
	Progress library.Progress `json:"progress"`
	Error    string           `json:"error,omitempty"`
	Skipped  []string         `json:"skipped,omitempty"`
	DoneAtMs int64            `json:"doneAtMs,omitempty"`
}

// LibraryService is the model library: the GGUF files found in the folders other tools keep
// models in and the folders the user adds, each described from its header alone. A scan runs in
// the background and reports on library:event.
type LibraryService struct {
	ctx   context.Context
	store LibraryStore
	emit  Emitter
	roots []library.Root // the tools' folders (library.SystemRoots() outside tests)

	mu    sync.Mutex
	state ScanState
	done  chan struct{} // closed when the running scan ends; nil when none runs
}

// NewLibraryService returns the library over st; roots are the tools' folders to scan besides
// the ones the user adds.
func NewLibraryService(ctx context.Context, st LibraryStore, em Emitter, roots []library.Root) *LibraryService {
	return &LibraryService{ctx: ctx, store: st, emit: em, roots: roots}
}

// Models lists the library.
func (s *LibraryService) Models() ([]library.Model, error) {
	ms, err := s.store.LibraryModels(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("list the model library: %w", err)
	}
	if ms == nil {
		ms = []library.Model{}
	}
	return ms, nil
}

// Roots lists the folders a scan covers: the tools' folders, then the ones the user added.
func (s *LibraryService) Roots() ([]LibraryRoot, error) {
	roots, err := s.allRoots()
	if err != nil {
		return nil, err
	}
	out := make([]LibraryRoot, 0, len(roots))
	for _, r := range roots {
		st, err := os.Stat(r.Path)
		out = append(out, LibraryRoot{Path: r.Path, Source: r.Source, Exists: err == nil && st.IsDir(), Added: r.Source == library.SourceFolder})
	}
	return out, nil
}

func (s *LibraryService) allRoots() ([]library.Root, error) {
	added, err := s.store.LibraryFolders(s.ctx)
	if err != nil {
		return nil, fmt.Errorf("list the library folders: %w", err)
	}
	roots := append([]library.Root{}, s.roots...)
	for _, p := range added {
		roots = append(roots, library.Root{Path: p, Source: library.SourceFolder})
	}
	return roots, nil
}

// AddFolder adds a folder (a leading ~ is the home folder) to the scan.
func (s *LibraryService) AddFolder(path string) (string, error) {
	p, err := ExpandHome(path)
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("add a folder: no path given; enter the folder that holds your .gguf files")
	}
	p = filepath.Clean(p)
	st, err := os.Stat(p)
	if err != nil || !st.IsDir() {
		return "", fmt.Errorf("add folder %s: it is not a folder on this machine; enter the path of the folder that holds your .gguf files", p)
	}
	if err := s.store.AddLibraryFolder(s.ctx, p); err != nil {
		return "", fmt.Errorf("add folder %s: %w", p, err)
	}
	return p, nil
}

// RemoveFolder takes a folder the user added out of the scan (its models go at the next scan).
func (s *LibraryService) RemoveFolder(path string) error {
	if err := s.store.RemoveLibraryFolder(s.ctx, path); err != nil {
		return fmt.Errorf("remove folder %s: %w", path, err)
	}
	return nil
}

// Status says whether a scan runs and how far it got, or what the last one found.
func (s *LibraryService) Status() ScanState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Scan starts a scan of every folder in the background and returns at once (a scan already
// running is left to finish). Progress, then "finished" or "failed", arrive on library:event.
func (s *LibraryService) Scan() (ScanState, error) {
	roots, err := s.allRoots()
	if err != nil {
		return ScanState{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return s.state, nil
	}
	s.state = ScanState{Running: true}
	s.done = make(chan struct{})
	go s.run(roots, s.done)
	return s.state, nil
}

// wait blocks until the running scan (if any) ends.
func (s *LibraryService) wait() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// progressEvery is the least time between two progress events of a scan.
const progressEvery = 100 * time.Millisecond

func (s *LibraryService) run(roots []library.Root, done chan struct{}) {
	known := map[string]string{}
	if ms, err := s.store.LibraryModels(s.ctx); err == nil {
		for _, m := range ms {
			known[m.Path] = m.ScanKey
		}
	}
	var last time.Time
	res, err := library.Scan(s.ctx, library.Options{Roots: roots, Known: known, OnProgress: func(p library.Progress) {
		s.mu.Lock()
		s.state.Progress = p
		s.mu.Unlock()
		if time.Since(last) >= progressEvery {
			last = time.Now()
			s.emit.Emit(EventLibrary, LibraryEvent{Kind: "progress", Progress: &p, AtMs: nowMs()})
		}
	}})
	removed := 0
	if err == nil {
		for _, m := range res.Changed {
			if err = s.store.SaveLibraryModel(s.ctx, m); err != nil {
				err = fmt.Errorf("save %s in the library: %w", m.Path, err)
				break
			}
		}
	}
	if err == nil {
		removed, err = s.store.PruneLibrary(s.ctx, res.Paths)
	}
	total := len(res.Paths)
	s.mu.Lock()
	s.state = ScanState{Progress: res.Progress, Skipped: res.Skipped, DoneAtMs: nowMs()}
	if err != nil {
		s.state.Error = fmt.Sprintf("The scan stopped: %v.", err)
	}
	s.done = nil
	state := s.state
	s.mu.Unlock()
	defer close(done) // after the last event, so Wait returns once it is out
	if err != nil {
		slog.Warn("model library scan", "err", err)
		s.emit.Emit(EventLibrary, LibraryEvent{Kind: "failed", Progress: &state.Progress, Error: state.Error, AtMs: nowMs()})
		return
	}
	slog.Info("model library scanned", "models", total, "read", res.Progress.Read, "unchanged", res.Progress.Unchanged, "removed", removed, "skipped", len(res.Skipped))
	s.emit.Emit(EventLibrary, LibraryEvent{Kind: "finished", Progress: &state.Progress, Models: total, Removed: removed, Skipped: res.Skipped, AtMs: nowMs()})
}

// ExpandHome expands a leading "~" or "~/" to the user's home folder and trims spaces and the
// quotes a copied path may carry; other paths come back as they are.
func ExpandHome(path string) (string, error) {
	p := strings.TrimSpace(path)
	if len(p) >= 2 && (p[0] == '"' && p[len(p)-1] == '"' || p[0] == '\'' && p[len(p)-1] == '\'') {
		p = p[1 : len(p)-1]
	}
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, `~\`) {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("expand %s: this user has no home folder (%v); give the full path", p, err)
	}
	return filepath.Join(home, p[1:]), nil
}
