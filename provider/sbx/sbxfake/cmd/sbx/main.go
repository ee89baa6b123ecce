// Command sbx is the fake Docker Sandboxes CLI the sbx provider's tests
// run (see package sbxfake): build it with sbxfake.Build.
package main

import (
	"os"

	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
)

func main() { os.Exit(sbxfake.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
