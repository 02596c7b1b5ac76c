package main

import (
	"os"
	// edgesetctl validates maintenance windows' time zones as the
	// controller does, with the zone database built in.
	_ "time/tzdata"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
