//go:build !windows

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize relays the terminal's size changes (SIGWINCH) to c.
func notifyResize(c chan<- os.Signal) { signal.Notify(c, syscall.SIGWINCH) }
