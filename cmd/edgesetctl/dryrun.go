package main

import (
	"fmt"

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
)

// dryRunValue parses --dry-run=none|client|server as current kubectl
// does: a value is required (a bare --dry-run or an old boolean is
// refused).
type dryRunValue struct {
	mode dryRunMode
}

func (v *dryRunValue) String() string {
	if v.mode == "" {
		return string(dryRunNone)
	}
	return string(v.mode)
}

func (v *dryRunValue) Set(s string) error {
	switch m := dryRunMode(s); m {
	case dryRunNone, dryRunClient, dryRunServer:
		v.mode = m
		return nil
	}
	return invalidDryRun(s)
}

func (v *dryRunValue) Type() string { return "string" }

// active reports whether nothing may be changed.
func (v *dryRunValue) active() bool { return v.mode == dryRunClient || v.mode == dryRunServer }

// addDryRunFlag adds --dry-run to fs.
func addDryRunFlag(fs *pflag.FlagSet, v *dryRunValue) {
	fs.Var(v, "dry-run", `Must be "none", "server", or "client". If client strategy, only print what would be sent (the controller is only read); if server strategy, the controller runs the request and keeps nothing`)
}

// suffix is what kubectl appends to an object's line in this mode.
func (v *dryRunValue) suffix() string {
	switch v.mode {
	case dryRunClient:
		return " (client dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}

// invalidDryRun is kubectl's error for a --dry-run value it does not know
// (a type, to keep kubectl's capitalised sentence).
type invalidDryRun string

func (v invalidDryRun) Error() string {
	return fmt.Sprintf(`Invalid dry-run value (%v). Must be "none", "server", or "client".`, string(v))
}
