package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/plan"
	"github.com/vkllm/vkllm/engine/plan/planinput"
	"github.com/vkllm/vkllm/engine/vulkan"
	"github.com/vkllm/vkllm/library"
	"github.com/vkllm/vkllm/store"
)

func init() {
	register("models", "list the GGUF models in llama.cpp's, LM Studio's, Ollama's and Hugging Face's folders (and --dir), with the plan's verdict for this GPU", runModels)
}

// modelRow is one line of `vkllm models`: the library's facts and where the plan would put it.
type modelRow struct {
	library.Model
	Placement string `json:"placement"`         // "resident", "split K of L", "cpu", or "" when it cannot run
	Verdict   string `json:"verdict,omitempty"` // the plan's line, or why there is none
}

func runModels(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("models", flag.ContinueOnError)
	var dirs []string
	fs.Func("dir", "also scan this folder (repeatable; the app's added folders are scanned too)", func(s string) error {
		dirs = append(dirs, s)
		return nil
	})
	asJSON := fs.Bool("json", false, "print the models as JSON")
	reqCtx := fs.Int("ctx", 0, "plan at this context (default: each model's own)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 || *reqCtx < 0 {
		return fmt.Errorf("%w: vkllm models takes --dir DIR, --ctx N and --json only", errUsage)
	}
	rows, err := scanModels(ctx, library.SystemRoots(), dirs, *reqCtx)
	if err != nil {
		return err
	}
	return printModels(os.Stdout, *asJSON, rows)
}

// scanModels scans roots, the app's added folders and dirs through the store's library (so a
// second run reads only what changed, and the app sees what the CLI found), then plans each
// model on this machine's GPU.
func scanModels(ctx context.Context, roots []library.Root, dirs []string, reqCtx int) ([]modelRow, error) {
	st, err := store.Open("")
	if err != nil {
		return nil, err
	}
	defer st.Close()
	added, err := st.LibraryFolders(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range append(added, dirs...) {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("folder %s: %w", d, err)
		}
		roots = append(roots, library.Root{Path: abs, Source: library.SourceFolder})
	}
	known := map[string]string{}
	prev, err := st.LibraryModels(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range prev {
		known[m.Path] = m.ScanKey
	}
	res, err := library.Scan(ctx, library.Options{Roots: roots, Known: known})
	if err != nil {
		return nil, fmt.Errorf("scan the model folders: %w", err)
	}
	for _, s := range res.Skipped {
		slog.Warn("not scanned", "what", s)
	}
	for _, m := range res.Changed {
		if err := st.SaveLibraryModel(ctx, store.LibraryModel(m)); err != nil {
			return nil, err
		}
	}
	found := map[string]bool{}
	for _, p := range res.Paths {
		found[p] = true
	}
	all, err := st.LibraryModels(ctx)
	if err != nil {
		return nil, err
	}
	dev, devErr := modelsDevice()
	var rows []modelRow
	for _, m := range all {
		if !found[m.Path] {
			continue // not under this run's folders (a --dir of another run)
		}
		row := modelRow{Model: library.Model(m)}
		switch {
		case m.Problem != "" && !m.HeaderOnly:
			row.Verdict = "cannot run: " + m.Problem
		case devErr != nil:
			row.Placement, row.Verdict = "cpu", devErr.Error()
		default:
			row.Placement, row.Verdict = planPlacement(ctx, m.Path, dev, reqCtx)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// modelsDevice is the GPU the plan would choose (VKLLM_DEVICE, else the best).
func modelsDevice() (vulkan.DeviceInfo, error) {
	devs, err := vulkan.Devices()
	if err == nil && len(devs) == 0 {
		err = vulkan.ErrNoDevice
	}
	if err != nil {
		return vulkan.DeviceInfo{}, fmt.Errorf("no Vulkan device: it would run on the CPU (%v)", err)
	}
	return vulkan.ChooseDevice(devs, -1)
}

// planPlacement plans the model at path on dev from its header.
func planPlacement(ctx context.Context, path string, dev vulkan.DeviceInfo, reqCtx int) (placement, verdict string) {
	f, err := gguf.OpenHeader(path)
	if err != nil {
		return "", "no plan: " + err.Error()
	}
	defer f.Close()
	f.ShapesOnly()
	p, err := planinput.ForDevice(f, dev, store.StoredPinMB(ctx, dev.Key()), reqCtx, false)
	if err != nil {
		return "", "no plan: " + err.Error()
	}
	return placementOf(p), p.Verdict.Text
}

func placementOf(p plan.Plan) string {
	switch {
	case p.Verdict.Armed:
		return fmt.Sprintf("resident at ctx %d", p.Ctx.Chosen)
	case p.Split != nil && p.Split.GPULayers > 0:
		return fmt.Sprintf("split %d of %d", p.Split.GPULayers, p.Split.Layers)
	}
	return "cpu"
}

func printModels(w io.Writer, asJSON bool, rows []modelRow) error {
	if asJSON {
		if rows == nil {
			rows = []modelRow{}
		}
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no GGUF models found in llama.cpp's, LM Studio's, Ollama's or Hugging Face's folders; name a folder with --dir DIR")
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSOURCE\tARCH\tPARAMS\tQUANT\tSIZE\tCTX\tPATH\tPLACEMENT")
	for _, r := range rows {
		place := r.Placement
		if place == "" {
			place = r.Verdict
		} else if r.HeaderOnly {
			place += " (header only)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Name, r.Source, r.Arch, paramsText(r.Params), r.Quant, sizeText(r.SizeBytes), r.ContextLength, r.Path, place)
	}
	return tw.Flush()
}

func paramsText(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n > 0:
		return fmt.Sprintf("%.1fK", float64(n)/1e3)
	}
	return "-"
}

func sizeText(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}
