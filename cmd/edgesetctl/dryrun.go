package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
)

// dryRunMode is --dry-run's strategy, as kubectl's.
type dryRunMode string

// Dry-run strategies: none changes things; client only reads from the
// controller and prints what would be sent; server has the controller run
// the request and roll it back.
const (
	dryRunNone   dryRunMode = "none"
	dryRunClient dryRunMode = "client"
	dryRunServer dryRunMode = "server"
	// dryRunBare is the value of a bare --dry-run (kubectl's NoOptDefVal).
	dryRunBare = "unchanged"
)

// dryRunValue parses --dry-run=none|client|server as kubectl does: a bare
// --dry-run and the old booleans are accepted with a deprecation warning
// (bare and true mean client).
type dryRunValue struct {
	mode       dryRunMode
	deprecated string // the warning to print, if any
}

func (v *dryRunValue) String() string {
	if v.mode == "" {
		return string(dryRunNone)
	}
	return string(v.mode)
}

func (v *dryRunValue) Set(s string) error {
	v.deprecated = ""
	switch s {
	case string(dryRunNone), string(dryRunClient), string(dryRunServer):
		v.mode = dryRunMode(s)
		return nil
	case dryRunBare:
		v.mode, v.deprecated = dryRunClient, "--dry-run is deprecated and can be replaced with --dry-run=client."
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return invalidDryRun(s)
	}
	v.mode = dryRunNone
	if b {
		v.mode = dryRunClient
	}
	v.deprecated = fmt.Sprintf("--dry-run=%v is deprecated (boolean value) and can be replaced with --dry-run=%s.", s, v.mode)
	return nil
}

func (v *dryRunValue) Type() string { return "string" }

// addDryRunFlag adds --dry-run to fs.
func addDryRunFlag(fs *pflag.FlagSet, v *dryRunValue) {
	fs.Var(v, "dry-run", `Must be "none", "server", or "client". If client strategy, only print what would be sent (the controller is only read); if server strategy, the controller runs the request and keeps nothing`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunBare
}

// suffix is what kubectl appends to an object's line in this mode.
func (v *dryRunValue) suffix() string {
	switch v.mode {
	case dryRunClient:
		return " (dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}

// warn prints the deprecation warning of the value given, if any.
func (v *dryRunValue) warn(s *streams) {
	if v.deprecated != "" {
		fmt.Fprintf(s.err, "warning: %s\n", v.deprecated)
	}
}

// invalidDryRun is kubectl's error for a --dry-run value it does not know
// (a type, to keep kubectl's capitalised sentence).
type invalidDryRun string

func (v invalidDryRun) Error() string {
	return fmt.Sprintf(`Invalid dry-run value (%v). Must be "none", "server", or "client".`, string(v))
}
