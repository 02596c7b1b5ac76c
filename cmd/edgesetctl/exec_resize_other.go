//go:build windows

package main

import "os"

// notifyResize does nothing: Windows has no SIGWINCH; the remote terminal
// keeps the size it started with.
func notifyResize(chan<- os.Signal) {}
