package store

import (
	"os"
	"path/filepath"
)

// userDataDir is ~/Library/Application Support, where macOS apps keep their data.
func userDataDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "Library", "Application Support"), nil
}
