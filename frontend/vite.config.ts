import { defineConfig } from "vite";

// The built UI is embedded into the Go binary (frontend/embed.go) and served by Wails or by the
// browser-mode server, so every asset path is relative and nothing is fetched from elsewhere.
export default defineConfig({
  base: "./",
  build: { outDir: "dist", emptyOutDir: false, assetsDir: "assets", target: "es2022" },
});
