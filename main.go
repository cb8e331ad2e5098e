// Command vkllm-app is the vkllm desktop app: a Wails window over the app services, or, with no
// display, the same UI served to a browser on a printed loopback address. It also is its own
// engine sidecar: `vkllm-app serve ...` runs the engine process the app spawns, so one binary
// ships the whole product.
//
// Build the window with `wails build -tags webkit2_41` (Debian 12 ships webkit2gtk 4.1) or
// `go build -tags desktop,production,webkit2_41`; a plain `go build .` still runs browser mode and
// serve, and says how to get the window.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/wailsapp/wails/v2"
	"github.com/wailsapp/wails/v2/pkg/options"
	"github.com/wailsapp/wails/v2/pkg/options/assetserver"
	wailsruntime "github.com/wailsapp/wails/v2/pkg/runtime"

	"github.com/vkllm/vkllm/app"
	"github.com/vkllm/vkllm/engine/config"
	"github.com/vkllm/vkllm/frontend"
)

func main() {
	setupLogging()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serveSidecar(ctx, os.Args[2:]); err != nil && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "vkllm serve: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := runApp(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "vkllm: %v\n", err)
		os.Exit(1)
	}
}

func setupLogging() {
	level := slog.LevelInfo
	switch strings.ToLower(config.LogLevel.String()) {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
}

func runApp(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("vkllm", flag.ContinueOnError)
	model := fs.String("m", "", "GGUF model to load (default: the embedded stories260K model)")
	listen := fs.String("listen", "127.0.0.1:0", "browser mode: loopback address to serve the UI on")
	browser := fs.Bool("browser", false, "serve the UI to a browser even when a display is available")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !frontend.Built() {
		return errors.New("this binary has no UI: the frontend was not built before it; run `make build` (npm run build in frontend/, then wails build)")
	}

	emitter := &switchEmitter{}
	svc, closeAll, err := startServices(ctx, *model, emitter)
	if err != nil {
		return err
	}
	defer closeAll()

	display := os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != ""
	if display && !*browser {
		return runWindow(ctx, svc, emitter)
	}
	if !display {
		fmt.Println("No display found (neither DISPLAY nor WAYLAND_DISPLAY is set), so vkllm serves its UI to a browser instead.")
	}
	return runBrowser(ctx, *listen, svc, emitter)
}

// services are the app services both shells bind.
type services struct {
	Chat    *app.ChatService
	Model   *app.ModelService
	Devices *app.DevicesService
	Pins    *app.PinService
	Plan    *app.PlanService
	Bench   *app.BenchService
	Library *app.LibraryService
	// LoadOptions is the loaded model's context, device and KV cache type (wire_loadopts.go).
	LoadOptions *app.LoadOptionsService
}

// benchEngine is the engine as the bench service needs it.
type benchEngine interface {
	app.Engine
	app.BenchEngine
}

func newServices(ctx context.Context, eng benchEngine, chats app.ChatStore, pins app.PinStore, benches app.BenchStore, em app.Emitter) services {
	return services{
		Chat:    app.NewChatService(ctx, eng, chats, em),
		Model:   app.NewModelService(ctx, eng, em),
		Devices: app.NewDevicesService(ctx, eng),
		Pins:    app.NewPinService(ctx, pins, eng),
		Plan:    app.NewPlanService(ctx, eng),
		Bench:   app.NewBenchService(ctx, eng, benches, em),
	}
}

// switchEmitter forwards events to whichever shell is running: the Wails runtime once the window
// has started, or the browser-mode event hub.
type switchEmitter struct {
	target atomic.Pointer[app.Emitter]
}

func (s *switchEmitter) set(em app.Emitter) { s.target.Store(&em) }

func (s *switchEmitter) Emit(name string, payload any) {
	if em := s.target.Load(); em != nil {
		(*em).Emit(name, payload)
		return
	}
	slog.Debug("event before the UI started; dropped", "event", name)
}

func runWindow(ctx context.Context, svc services, em *switchEmitter) error {
	err := wails.Run(&options.App{
		Title:            "vkllm",
		Width:            1180,
		Height:           780,
		MinWidth:         720,
		MinHeight:        480,
		BackgroundColour: &options.RGBA{R: 15, G: 17, B: 21, A: 255},
		AssetServer:      &assetserver.Options{Assets: frontend.Dist()},
		// A .gguf dropped on the window arrives with its path (OnFileDrop below).
		DragAndDrop: &options.DragAndDrop{EnableFileDrop: true, DisableWebViewDrop: true},
		OnStartup: func(wctx context.Context) {
			em.set(app.EmitterFunc(func(name string, payload any) { wailsruntime.EventsEmit(wctx, name, payload) }))
			app.UseFileDialog(svc.Model, func(title string) (string, error) {
				return wailsruntime.OpenFileDialog(wctx, wailsruntime.OpenDialogOptions{
					Title:   title,
					Filters: []wailsruntime.FileFilter{{DisplayName: "GGUF models (*.gguf)", Pattern: "*.gguf"}},
				})
			})
			wailsruntime.OnFileDrop(wctx, func(_, _ int, paths []string) { svc.Model.DropFiles(paths) })
			go func() {
				<-ctx.Done() // Ctrl-C in the terminal closes the window too
				wailsruntime.Quit(wctx)
			}()
		},
		Bind: []any{svc.Chat, svc.Model, svc.Devices, svc.Pins, svc.Plan, svc.Bench, svc.Library, svc.LoadOptions},
	})
	if err != nil {
		return fmt.Errorf("open the window: %w (build it with `wails build -tags webkit2_41`, or run with --browser)", err)
	}
	return nil
}

func runBrowser(ctx context.Context, listen string, svc services, em *switchEmitter) error {
	if err := checkLoopback(listen); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	hub := app.NewEventHub()
	em.set(hub)
	ws := app.NewWebServer(frontend.Dist(), hub, map[string]any{
		"ChatService":        svc.Chat,
		"ModelService":       svc.Model,
		"DevicesService":     svc.Devices,
		"PinService":         svc.Pins,
		"PlanService":        svc.Plan,
		"BenchService":       svc.Bench,
		"LibraryService":     svc.Library,
		"LoadOptionsService": svc.LoadOptions,
	})
	fmt.Printf("vkllm UI at http://%s/ (Ctrl-C stops it)\n", ln.Addr())
	return ws.Serve(ctx, ln)
}

// checkLoopback refuses a browser-mode address other than loopback: the UI has no login.
func checkLoopback(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w (want host:port such as 127.0.0.1:8080)", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--listen %q: the UI has no login, so it only listens on loopback (127.0.0.1 or ::1)", listen)
	}
	return nil
}
