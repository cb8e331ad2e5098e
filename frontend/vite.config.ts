import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// The built UI is embedded into the Go binary (frontend/embed.go) and served by Wails or by the
// browser-mode server, so every asset path is relative and nothing is fetched from elsewhere.
// Svelte compiles the components to plain JavaScript modules: no inline script, so the CSP in
// index.html holds.
export default defineConfig({
  base: "./",
  plugins: [svelte()],
  build: { outDir: "dist", emptyOutDir: false, assetsDir: "assets", target: "es2022" },
});
