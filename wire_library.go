package main

import (
	"context"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/library"
	"github.com/vkllm/vkllm/store"
)

// wireLibrary adds the model library (over the store, scanning the tools' folders of this user)
// and the recent list to the services.
func wireLibrary(ctx context.Context, svc *services, sa storeAdapter, em app.Emitter) {
	svc.Library = app.NewLibraryService(ctx, sa, em, library.SystemRoots())
	app.UseRecents(svc.Model, sa)
}

// The store's library rows and the library package's models have the same fields.

func (a storeAdapter) LibraryModels(ctx context.Context) ([]library.Model, error) {
	list, err := a.st.LibraryModels(ctx)
	out := make([]library.Model, len(list))
	for i, m := range list {
		out[i] = library.Model(m)
	}
	return out, err
}

func (a storeAdapter) SaveLibraryModel(ctx context.Context, m library.Model) error {
	return a.st.SaveLibraryModel(ctx, store.LibraryModel(m))
}

func (a storeAdapter) PruneLibrary(ctx context.Context, keep []string) (int, error) {
	return a.st.PruneLibrary(ctx, keep)
}

func (a storeAdapter) LibraryFolders(ctx context.Context) ([]string, error) {
	return a.st.LibraryFolders(ctx)
}

func (a storeAdapter) AddLibraryFolder(ctx context.Context, path string) error {
	return a.st.AddLibraryFolder(ctx, path)
}

func (a storeAdapter) RemoveLibraryFolder(ctx context.Context, path string) error {
	return a.st.RemoveLibraryFolder(ctx, path)
}

func (a storeAdapter) RecentModels(ctx context.Context, limit int) ([]string, error) {
	return a.st.RecentModels(ctx, limit)
}

func (a storeAdapter) AddRecentModel(ctx context.Context, path string) error {
	return a.st.AddRecentModel(ctx, path)
}

// UnloadModel empties the engine process.
func (e sidecarEngine) UnloadModel(ctx context.Context) error { return e.sup.UnloadModel(ctx) }
