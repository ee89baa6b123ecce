// Package daytona is corral's provider for Daytona sandboxes (see the
// package's README-level notes below; the fake is daytonafake).
package daytona
