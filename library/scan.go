package library

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/vkllm/vkllm/engine/gguf"
	"github.com/vkllm/vkllm/engine/model"
	"github.com/vkllm/vkllm/engine/tokenizer"
)

// Model is one model a scan found: a GGUF file, a split model's parts together under its first
// part's path. Its fields are store.LibraryModel's, so the caller converts it as it is.
type Model struct {
	Path          string `json:"path"`
	Source        string `json:"source"`
	Name          string `json:"name"`
	Arch          string `json:"arch"`
	Params        int64  `json:"params"`
	Quant         string `json:"quant"`
	SizeBytes     int64  `json:"sizeBytes"`
	ContextLength int    `json:"contextLength"`
	Parts         int    `json:"parts"`
	FileMtimeMs   int64  `json:"fileMtimeMs"`
	HeaderOnly    bool   `json:"headerOnly"`
	Problem       string `json:"problem"` // why the engine cannot run it, one sentence; "" = it can
	ScanKey       string `json:"-"`
}

// Progress is where a running scan is, for a progress line.
type Progress struct {
	Root      string `json:"root"`      // the folder being listed or read
	Found     int    `json:"found"`     // models found so far
	Read      int    `json:"read"`      // headers read (new or changed files)
	Unchanged int    `json:"unchanged"` // files skipped as unchanged since the last scan
	Current   string `json:"current"`   // the file being read, "" while listing
}

// Options are a scan's roots and what the last scan saw.
type Options struct {
	Roots []Root
	// Known maps each model path of the last scan to its scan key; a model found with the same
	// key is not read again.
	Known      map[string]string
	OnProgress func(Progress) // may be nil
}

// Result is what a scan found.
type Result struct {
	Paths    []string // the path of every model found, unchanged ones included
	Changed  []Model  // the models read this time (new, or changed since the last scan)
	Progress Progress // the counts at the end
	// Skipped lists what could not be scanned (an unreadable folder, a bad Ollama manifest),
	// one line each; the scan carries on past them.
	Skipped []string
}

// Scan lists the models under every root and reads the header of each new or changed one. It
// stops with ctx's error when ctx ends.
func Scan(ctx context.Context, o Options) (Result, error) {
	var res Result
	report := func() {
		if o.OnProgress != nil {
			o.OnProgress(res.Progress)
		}
	}
	seen := map[string]bool{} // real paths, so a file reached twice (a symlink, a second snapshot) is one model
	for _, root := range o.Roots {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if st, err := os.Stat(root.Path); err != nil || !st.IsDir() {
			continue // a tool that is not installed
		}
		res.Progress.Root, res.Progress.Current = root.Path, ""
		report()
		var cands []candidate
		if root.Source == SourceOllama {
			cands = ollamaModels(root, &res.Skipped)
		} else {
			cands = folderModels(ctx, root, &res.Skipped)
		}
		for _, c := range cands {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			real, err := filepath.EvalSymlinks(c.parts[0])
			if err != nil {
				real = c.parts[0]
			}
			if seen[real] {
				continue
			}
			seen[real] = true
			key, mtime := scanKey(c.parts)
			res.Paths = append(res.Paths, c.path)
			res.Progress.Found++
			if k, ok := o.Known[c.path]; ok && k == key {
				res.Progress.Unchanged++
				report()
				continue
			}
			res.Progress.Current = c.path
			report()
			m := describe(c)
			m.ScanKey, m.FileMtimeMs = key, mtime
			res.Changed = append(res.Changed, m)
			res.Progress.Read++
		}
	}
	res.Progress.Root, res.Progress.Current = "", ""
	report()
	return res, nil
}

// candidate is a model found before its header is read.
type candidate struct {
	path   string   // what Open takes: the file, or a split model's first part
	parts  []string // every part that should exist (one for an unsplit file)
	source string
	name   string
	// missing names the parts of a split model that are not there
	missing []string
}

// splitRe matches llama.cpp's split names, "NAME-00001-of-00003.gguf".
var splitRe = regexp.MustCompile(`(?i)^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// folderModels walks a folder of plain files (llama.cpp's cache, LM Studio's publisher/repo/file
// layout, the Hugging Face hub's snapshots, a folder the user added) for .gguf files. Hidden
// folders below the root are skipped, symbolic links to files followed, links to folders not.
func folderModels(ctx context.Context, root Root, skipped *[]string) []candidate {
	var out []candidate
	err := filepath.WalkDir(root.Path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != root.Path {
				*skipped = append(*skipped, fmt.Sprintf("%s: %v", p, err))
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.IsDir() {
			if p != root.Path && strings.HasPrefix(d.Name(), ".") {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.EqualFold(filepath.Ext(p), ".gguf") {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		c := candidate{path: p, parts: []string{p}, source: root.Source, name: stem(d.Name())}
		if m := splitRe.FindStringSubmatch(d.Name()); m != nil {
			no, _ := strconv.Atoi(m[2])
			total, _ := strconv.Atoi(m[3])
			if no != 1 || total < 1 {
				return nil // listed with its first part
			}
			c.name = m[1]
			c.parts = nil
			dir := filepath.Dir(p)
			for k := 1; k <= total; k++ {
				part := filepath.Join(dir, fmt.Sprintf("%s-%05d-of-%05d%s", m[1], k, total, filepath.Ext(p)))
				c.parts = append(c.parts, part)
				if _, err := os.Stat(part); err != nil {
					c.missing = append(c.missing, filepath.Base(part))
				}
			}
		}
		if root.Source == SourceHuggingFace {
			c.name = hubRepo(p) + "/" + c.name
		}
		out = append(out, c)
		return nil
	})
	if err != nil && !errors.Is(err, ctx.Err()) {
		*skipped = append(*skipped, fmt.Sprintf("%s: %v", root.Path, err))
	}
	return out
}

// hubRepo is "org/repo" of a path inside the Hugging Face hub cache (models--org--repo/...).
func hubRepo(p string) string {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if rest, ok := strings.CutPrefix(part, "models--"); ok {
			return strings.ReplaceAll(rest, "--", "/")
		}
	}
	return "huggingface"
}

func stem(name string) string { return strings.TrimSuffix(name, filepath.Ext(name)) }

// ollamaModelType is the media type of the layer that holds the GGUF in an Ollama manifest.
const ollamaModelType = "application/vnd.ollama.image.model"

// ollamaModels reads Ollama's manifests (manifests/HOST/NAMESPACE/NAME/TAG, JSON with layers
// naming blobs by digest) and lists each model's GGUF blob under blobs/sha256-HEX with the name
// Ollama shows ("llama3.2:1b", or "namespace/name:tag" outside the library).
func ollamaModels(root Root, skipped *[]string) []candidate {
	base := filepath.Join(root.Path, "manifests")
	var out []candidate
	_ = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return nil
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) < 4 {
			return nil
		}
		host, ns, name, tag := parts[0], strings.Join(parts[1:len(parts)-2], "/"), parts[len(parts)-2], parts[len(parts)-1]
		shown := ns + "/" + name + ":" + tag
		switch {
		case host == "registry.ollama.ai" && ns == "library":
			shown = name + ":" + tag
		case host != "registry.ollama.ai":
			shown = host + "/" + shown
		}
		blob, err := ollamaBlob(p)
		if err != nil {
			*skipped = append(*skipped, fmt.Sprintf("Ollama model %s: %v", shown, err))
			return nil
		}
		bp := filepath.Join(root.Path, "blobs", blob)
		if _, err := os.Stat(bp); err != nil {
			*skipped = append(*skipped, fmt.Sprintf("Ollama model %s: its model blob %s is missing", shown, blob))
			return nil
		}
		out = append(out, candidate{path: bp, parts: []string{bp}, source: SourceOllama, name: shown})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// ollamaBlob reads a manifest and names the file of its model layer ("sha256-HEX").
func ollamaBlob(manifest string) (string, error) {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return "", fmt.Errorf("read the manifest: %w", err)
	}
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return "", fmt.Errorf("the manifest is not JSON: %w", err)
	}
	for _, l := range m.Layers {
		if l.MediaType != ollamaModelType {
			continue
		}
		algo, hex, ok := strings.Cut(l.Digest, ":")
		if !ok || algo == "" || hex == "" || strings.ContainsAny(hex, `/\.`) {
			return "", fmt.Errorf("the model layer's digest %q is not ALGO:HEX", l.Digest)
		}
		return algo + "-" + hex, nil
	}
	return "", fmt.Errorf("the manifest has no layer of type %s", ollamaModelType)
}

// scanKey is the parts' sizes and modification times, and the first part's time in ms.
func scanKey(parts []string) (string, int64) {
	var b strings.Builder
	var first int64
	for i, p := range parts {
		st, err := os.Stat(p)
		if err != nil {
			b.WriteString("missing;")
			continue
		}
		if i == 0 {
			first = st.ModTime().UnixMilli()
		}
		fmt.Fprintf(&b, "%d:%d;", st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), first
}

// describe reads a candidate's header and says what it is, and why the engine cannot run it
// when it cannot.
func describe(c candidate) Model {
	m := Model{Path: c.path, Source: c.source, Name: c.name, Parts: len(c.parts)}
	for _, p := range c.parts {
		if st, err := os.Stat(p); err == nil {
			m.SizeBytes += st.Size()
		}
	}
	if len(c.missing) > 0 {
		m.Problem = fmt.Sprintf("%d of its %d parts are missing (%s): download every part into the same folder", len(c.missing), len(c.parts), strings.Join(c.missing, ", "))
		return m
	}
	f, err := gguf.OpenHeader(c.path)
	if err != nil {
		m.Problem = reason(err, c.path)
		return m
	}
	defer f.Close()
	f.ShapesOnly() // the checks below read the header, never a weight
	m.Arch = f.Architecture()
	m.Params = f.ParamCount()
	m.Quant = quantOf(f)
	m.HeaderOnly = !f.Complete()
	if n, ok := f.Uint(m.Arch + ".context_length"); ok && n < 1<<31 {
		m.ContextLength = int(n)
	}
	if _, err := model.Load(f); err != nil {
		m.Problem = reason(err, c.path)
	} else if _, err := tokenizer.FromGGUF(f); err != nil {
		m.Problem = "its tokenizer cannot be built: " + reason(err, c.path)
	} else if m.HeaderOnly {
		m.Problem = fmt.Sprintf("only its header is here, %s of the weights are missing (a download cut short?): it can be planned, and loaded once the file is whole", humanBytes(f.MissingBytes))
	}
	return m
}

// reason is an error as the library shows it: the cause, without the path the row already shows.
func reason(err error, path string) string {
	var fe *gguf.FormatError
	if errors.As(err, &fe) {
		s := fe.Msg
		if fe.Tensor != "" {
			s = fmt.Sprintf("tensor %q: %s", fe.Tensor, s)
		}
		if r := fe.Remedy(); r != "" {
			s += "; " + r
		}
		return s
	}
	s := err.Error()
	for _, prefix := range []string{"model " + path + ": ", "model " + path + " "} {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			s = rest
			if strings.HasPrefix(s, "(") { // "(arch): cause"
				if _, after, ok := strings.Cut(s, "): "); ok {
					s = after
				}
			}
			break
		}
	}
	return strings.ReplaceAll(s, path, filepath.Base(path))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
