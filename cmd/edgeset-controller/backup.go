package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
)

// backupOptions are the flags of the backup command.
type backupOptions struct {
	out       string
	server    string
	tokenFile string
	dataDir   string
	offline   bool
}

func newBackupCmd(stdout io.Writer) *cobra.Command {
	var o backupOptions
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent copy of the controller's store to FILE",
		Long: `backup writes a consistent copy of the controller's store (edgeset.db) to
FILE, checks it and prints its size.

By default it asks the running controller at --server for the copy, which
it makes without stopping (the store file is locked while the controller
runs); the API token is read from --token-file. With --offline it reads
the store in --data-dir directly, which needs the controller stopped.

To restore, stop the controller and put the copy in place of
DATA-DIR/edgeset.db (see docs/operations.md, "Backing up and restoring
the store").`,
		Example: `  edgeset-controller backup --out /backup/edgeset-$(date +%F).db
  edgeset-controller backup --offline --data-dir /var/lib/edgeset --out edgeset.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBackup(cmd.Context(), o, stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "file to write the copy to (required; replaced only once the copy is complete)")
	f.StringVar(&o.server, "server", "http://"+controller.DefaultAPIAddr, "API of the running controller")
	f.StringVar(&o.tokenFile, "token-file", "", "API token file (default: DATA-DIR/admin.token)")
	f.StringVar(&o.dataDir, "data-dir", controller.DefaultDataDir, "the controller's data directory")
	f.BoolVar(&o.offline, "offline", false, "read the store in --data-dir directly (the controller must be stopped)")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

func runBackup(ctx context.Context, o backupOptions, stdout io.Writer) error {
	cfg := controller.Config{DataDir: o.dataDir}
	var n int64
	err := writeAtomically(o.out, func(w io.Writer) (err error) {
		if o.offline {
			n, err = offlineBackup(cfg.StorePath(), w)
			return err
		}
		n, err = onlineBackup(ctx, o, cfg, w)
		return err
	})
	if err != nil {
		return err
	}
	if err := store.Verify(o.out); err != nil {
		return fmt.Errorf("the copy in %s does not pass the check: %w", o.out, err)
	}
	fmt.Fprintf(stdout, "backed up the store to %s (%d bytes, checked)\n", o.out, n)
	return nil
}

// onlineBackup asks the running controller for the copy.
func onlineBackup(ctx context.Context, o backupOptions, cfg controller.Config, w io.Writer) (int64, error) {
	tokenFile := o.tokenFile
	if tokenFile == "" {
		tokenFile = cfg.TokenPath()
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return 0, fmt.Errorf("read API token: %w (give --token-file, or --offline with the controller stopped)", err)
	}
	if len(bytes.TrimSpace(token)) == 0 {
		return 0, fmt.Errorf("API token file %s is empty (give --token-file, or --offline with the controller stopped)", tokenFile)
	}
	// No overall timeout: a large store takes its time; ctx ends it.
	c := api.NewClient(o.server, strings.TrimSpace(string(token)), &http.Client{})
	n, err := c.Backup(ctx, w)
	if err != nil {
		return n, fmt.Errorf("online backup from %s: %w", o.server, err)
	}
	return n, nil
}

// offlineBackup copies the store file of a stopped controller.
func offlineBackup(path string, w io.Writer) (int64, error) {
	s, err := store.OpenReadOnly(path, store.Options{})
	if err != nil {
		return 0, fmt.Errorf("offline backup: %w", err)
	}
	defer s.Close()
	return s.Backup(w, nil)
}

// writeAtomically writes path through fill into a temporary file beside
// it, fsynced and renamed into place only when fill succeeded: a failed
// backup never replaces a good one.
func writeAtomically(path string, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create backup file in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := errors.Join(bw.Flush(), tmp.Sync()); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("move the backup into place: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
