package controller

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// loadOrCreateToken returns the API token kept at path, creating a random
// one (mode 0600) on first start. A token file readable by others is
// refused: it grants full control of the fleet.
func loadOrCreateToken(path string) (string, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return createToken(path)
	case err != nil:
		return "", fmt.Errorf("read API token %s: %w", path, err)
	case info.Mode().Perm()&0o077 != 0:
		return "", fmt.Errorf("API token %s is readable by group or others (mode %04o): chmod 600 it", path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read API token %s: %w", path, err)
	}
	token := strings.TrimSpace(string(b))
	if len(token) < 16 {
		return "", fmt.Errorf("API token %s is shorter than 16 characters; delete it to have a new one generated", path)
	}
	return token, nil
}

func createToken(path string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate API token: %w", err)
	}
	token := hex.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("create API token %s: %w", path, err)
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write API token %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("sync API token %s: %w", path, err)
	}
	return token, f.Close()
}
