// Package frontend embeds the built UI (npm run build writes dist/) so the desktop window and the
// browser-mode server serve it from the binary. dist/.gitkeep keeps the folder in a fresh clone, so
// the embed compiles before the first build; the UI is then just that empty folder.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built UI with index.html at its root.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("frontend: embedded dist folder missing: " + err.Error()) // cannot happen: the embed names it
	}
	return sub
}

// Built reports whether the embedded UI has an index.html, i.e. npm run build ran before go build.
func Built() bool {
	_, err := fs.Stat(Dist(), "index.html")
	return err == nil
}
