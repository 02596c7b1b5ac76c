package main

import (
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

func main() { fmt.Println("edgeset-agent", schema.Version) }
