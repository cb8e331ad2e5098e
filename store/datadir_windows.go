package store

import (
	"errors"
	"os"
)

// userDataDir is %LocalAppData%: the models' data is per machine, not roamed with the profile.
func userDataDir() (string, error) {
	if d := os.Getenv("LocalAppData"); d != "" {
		return d, nil
	}
	return "", errors.New("%LocalAppData% is not set")
}
