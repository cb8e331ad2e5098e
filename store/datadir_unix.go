//go:build !windows && !darwin

package store

import (
	"errors"
	"os"
	"path/filepath"
)

// userDataDir follows the XDG base directory spec: $XDG_DATA_HOME, else ~/.local/share.
func userDataDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if home == "" {
		return "", errors.New("$HOME is not set")
	}
	return filepath.Join(home, ".local", "share"), nil
}
