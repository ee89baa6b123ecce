package main

// The providers this binary links. Each registers itself with
// provider/registry (name, summary, capabilities, corral.yaml section, CLI
// flags, limits); adding a provider to corral is one line here.
import (
	_ "github.com/d10ffeed/corral/provider/blaxel"
	_ "github.com/d10ffeed/corral/provider/cloudflare"
	_ "github.com/d10ffeed/corral/provider/daytona"
	_ "github.com/d10ffeed/corral/provider/docker"
	_ "github.com/d10ffeed/corral/provider/e2b"
	_ "github.com/d10ffeed/corral/provider/kubernetes"
	_ "github.com/d10ffeed/corral/provider/local"
	_ "github.com/d10ffeed/corral/provider/qemu"
	_ "github.com/d10ffeed/corral/provider/railway"
	_ "github.com/d10ffeed/corral/provider/sbx"
	_ "github.com/d10ffeed/corral/provider/sprites"
	_ "github.com/d10ffeed/corral/provider/upstashbox"
	_ "github.com/d10ffeed/corral/provider/vercel"
)
