package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// watchObjects polls fetch every s.watchInterval() until ctx ends and prints
// what it returns whenever it differs from the last print: the whole table
// again after a blank line, or one JSON or YAML document per change. The
// first fetch's error is returned; later errors are reported on s.err once
// per outage and polling goes on, so a controller restart does not end the
// watch. It returns nil when ctx ends.
func watchObjects(ctx context.Context, s *streams, format string, fetch func(context.Context) (any, error), show func(io.Writer, any) error) error {
	var last []byte
	failing := false
	interval := s.watchInterval()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		v, err := fetch(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && last == nil:
			return err
		case err != nil:
			if !failing {
				fmt.Fprintf(s.err, "edgesetctl: watch: %v (retrying every %s)\n", err, interval)
			}
			failing = true
		default:
			failing = false
			if last, err = showChanged(s.out, format, last, v, show); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// showChanged prints v unless its encoding equals last, and returns v's
// encoding. Tables after the first are preceded by a blank line.
func showChanged(w io.Writer, format string, last []byte, v any, show func(io.Writer, any) error) ([]byte, error) {
	cur, err := json.Marshal(v)
	if err != nil {
		return last, err
	}
	if bytes.Equal(cur, last) {
		return last, nil
	}
	if last != nil && format != outputJSON && format != outputYAML {
		fmt.Fprintln(w)
	}
	if last != nil && format == outputYAML {
		fmt.Fprintln(w, "---")
	}
	return cur, show(w, v)
}
