package selfupdate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/edgeset/edgeset/schema"
)

// Platform is the platform this binary was built for, as the agent's
// daemonset names it: "linux-amd64", "linux-arm64", "linux-arm-v7".
func Platform() string {
	return schema.AgentPlatform(runtime.GOOS, runtime.GOARCH, goarm())
}

// goarm is the GOARM variant of an arm build ("7"), read from the build
// information; "" on other architectures or when it is not recorded.
func goarm() string {
	if runtime.GOARCH != "arm" {
		return ""
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "GOARM" && s.Value != "" {
			return s.Value[:1] // "7", or "7,softfloat"
		}
	}
	return ""
}

// VersionInfo is what `edgeset-agent version --json` prints, and what an
// upgrade checks a new binary against.
type VersionInfo struct {
	Version  string `json:"version"`
	Platform string `json:"platform"`
	// SelfUpgrade is the trial record format the binary reads (0: a
	// binary that cannot upgrade itself, nor roll itself back).
	SelfUpgrade int `json:"selfUpgrade"`
}

// Info is this binary's VersionInfo.
func Info() VersionInfo {
	return VersionInfo{Version: schema.Version, Platform: Platform(), SelfUpgrade: RecordFormat}
}

// runningBinary is the file to digest for the binary that runs: on Linux
// /proc/self/exe, which stays the running file even once another was
// renamed over its path.
func runningBinary(exe string) string {
	if runtime.GOOS == "linux" {
		if _, err := os.Stat("/proc/self/exe"); err == nil {
			return "/proc/self/exe"
		}
	}
	return exe
}

// fileDigest returns the sha256 of the file at path, "sha256:<hex>".
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("digest %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
