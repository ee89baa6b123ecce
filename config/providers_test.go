package config_test

// The providers config's tests build: config imports none itself (a binary
// links the ones it wants, as cmd/corral/providers_all.go does).
import (
	_ "github.com/d10ffeed/corral/provider/docker"
	_ "github.com/d10ffeed/corral/provider/local"
)
