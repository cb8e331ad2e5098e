package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/vkllm/vkllm/engine"
)

// RecentStore keeps the models opened recently.
type RecentStore interface {
	RecentModels(ctx context.Context, limit int) ([]string, error)
	AddRecentModel(ctx context.Context, path string) error
}

// FileDialog shows the native open-file dialog and returns the path chosen ("" when cancelled).
// main.go makes one from Wails' runtime.OpenFileDialog once the window has started.
type FileDialog func(title string) (string, error)

// UnloadEngine is an Engine that can drop its model and stay empty.
type UnloadEngine interface {
	UnloadModel(ctx context.Context) error
}

// ErrNoFileDialog is Browse's answer where there is no native dialog.
var ErrNoFileDialog = errors.New("there is no file dialog in the browser: type or paste the model's path into the field instead")

// recentLimit is how many models the recent list keeps.
const recentLimit = 8

// UseRecents gives s the store of the recent list. (A function, not a method: the UI binds every
// method of the service.)
func UseRecents(s *ModelService, st RecentStore) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recents = st
}

// UseFileDialog gives s the window's native file dialog.
func UseFileDialog(s *ModelService, d FileDialog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dialog = d
}

// HasFileDialog reports whether Browse can show a native dialog (false in browser mode).
func (s *ModelService) HasFileDialog() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dialog != nil
}

// Browse shows the native file dialog for a .gguf file and returns its path, "" when the user
// cancelled. It does not open the model: the UI plans it first and opens it through Open.
func (s *ModelService) Browse() (string, error) {
	s.mu.Lock()
	d := s.dialog
	s.mu.Unlock()
	if d == nil {
		return "", ErrNoFileDialog
	}
	p, err := d("Open a GGUF model")
	if err != nil {
		return "", fmt.Errorf("the file dialog failed (%v): type the model's path into the field instead", err)
	}
	return p, nil
}

// RecentModel is one entry of the recent list.
type RecentModel struct {
	Path   string `json:"path"`
	Name   string `json:"name"`
	Exists bool   `json:"exists"` // the file is still there
}

// Recent lists the models opened most recently, newest first.
func (s *ModelService) Recent() ([]RecentModel, error) {
	s.mu.Lock()
	st := s.recents
	s.mu.Unlock()
	out := []RecentModel{}
	if st == nil {
		return out, nil
	}
	paths, err := st.RecentModels(s.ctx, recentLimit)
	if err != nil {
		return nil, fmt.Errorf("list the recent models: %w", err)
	}
	for _, p := range paths {
		_, err := os.Stat(p)
		out = append(out, RecentModel{Path: p, Name: strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), Exists: err == nil})
	}
	return out, nil
}

func (s *ModelService) remember(path string) {
	s.mu.Lock()
	st := s.recents
	s.mu.Unlock()
	if st == nil || path == "" {
		return
	}
	if err := st.AddRecentModel(s.ctx, path); err != nil {
		slog.Warn("add to the recent models", "path", path, "err", err)
	}
}

// Embedded loads the embedded model (stories260K) in place of the current one.
func (s *ModelService) Embedded() (engine.ModelInfo, error) {
	info, err := s.engine.LoadModel(s.ctx, "")
	if err != nil {
		return engine.ModelInfo{}, fmt.Errorf("go back to the embedded model: %w", err)
	}
	s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &info, AtMs: nowMs()})
	return info, nil
}

// Unload drops the loaded model, freeing its memory and VRAM; chat waits until a model is opened.
// It is announced as an engine:event of kind "unloaded".
func (s *ModelService) Unload() error {
	u, ok := s.engine.(UnloadEngine)
	if !ok {
		return errors.New("unload: this engine cannot unload its model; open another model instead")
	}
	if err := u.UnloadModel(s.ctx); err != nil {
		return fmt.Errorf("unload the model: %w", err)
	}
	s.emit.Emit(EventEngine, EngineEvent{Kind: "unloaded", AtMs: nowMs()})
	return nil
}

// DropFiles takes the files dropped on the window (Wails' OnFileDrop) and offers the first .gguf
// among them to the UI as a library:event of kind "dropped", which plans and opens it like a
// typed path. A drop without a .gguf says so.
func (s *ModelService) DropFiles(paths []string) {
	for _, p := range paths {
		if strings.EqualFold(filepath.Ext(p), ".gguf") {
			s.emit.Emit(EventLibrary, LibraryEvent{Kind: "dropped", Path: p, AtMs: nowMs()})
			return
		}
	}
	if len(paths) > 0 {
		s.emit.Emit(EventLibrary, LibraryEvent{Kind: "dropped", Error: fmt.Sprintf("%s is not a .gguf model file: drop a .gguf file to open it.", filepath.Base(paths[0])), AtMs: nowMs()})
	}
}

// OpenAt is Open at a context of ctx tokens (the library's "lower the context" remedy); ctx 0,
// or an engine that takes no load options, opens as Open does.
func (s *ModelService) OpenAt(path string, ctx int) (engine.ModelInfo, error) {
	loader, ok := s.engine.(OptionsLoader)
	if ctx <= 0 || !ok {
		return s.Open(path)
	}
	p, err := ExpandHome(path)
	if err != nil {
		return engine.ModelInfo{}, err
	}
	info, err := loader.LoadModelWith(s.ctx, EngineLoad{Path: p, Ctx: ctx, Backend: string(engine.BackendAuto)})
	if err != nil {
		if serving, merr := s.engine.Model(s.ctx); merr == nil {
			s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &serving, AtMs: nowMs()})
		}
		return engine.ModelInfo{}, fmt.Errorf("open model %q at a context of %d: %w", p, ctx, err)
	}
	s.emit.Emit(EventEngine, EngineEvent{Kind: "model", Model: &info, AtMs: nowMs()})
	s.remember(p)
	return info, nil
}
