package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/storeurl"
	"github.com/spf13/cobra"
)

// stateFlags are the flags of commands that keep state: the store and the
// config file.
type stateFlags struct {
	storeURL string
	config   string
	tenant   string
}

func (f *stateFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.storeURL, "store", "", "state store: sqlite:PATH or postgres://… (default: sqlite in "+displayStateDir()+")")
	cmd.Flags().StringVar(&f.config, "config", "", "sandbox definition file (default: ./"+config.DefaultFile+" when present)")
	cmd.Flags().StringVar(&f.tenant, "tenant", "", "tenant the sandbox belongs to (part of its key)")
}

// stateDir is where corral keeps its default SQLite store and the
// daemon's token: $XDG_STATE_HOME/corral, else ~/.local/state/corral.
func stateDir() (string, error) {
	dir, err := api.StateDir()
	if err != nil {
		return "", fmt.Errorf("%w (or set --store)", err)
	}
	return dir, nil
}

func displayStateDir() string {
	if os.Getenv("XDG_STATE_HOME") != "" {
		return "$XDG_STATE_HOME/corral"
	}
	return "~/.local/state/corral"
}

// openStore opens the store the flags name.
func (f *stateFlags) openStore(ctx context.Context) (store.Store, error) {
	u := f.storeURL
	if u == "" {
		dir, err := stateDir()
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the state directory: %w", err)
		}
		u = "sqlite:" + filepath.Join(dir, "corral.db")
	}
	return storeurl.Open(ctx, u, storeurl.Options{Logger: logger()})
}

// definition loads the sandbox definition: the config file, or the default
// (local provider, empty workspace) when there is none.
func (f *stateFlags) definition() (*sandbox.Definition, error) {
	path, err := config.Find(f.config)
	if err != nil {
		return nil, err
	}
	file := &config.File{}
	if path != "" {
		if file, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	return file.Definition(config.BuildOptions{Logger: logger(), Progress: pullPrinter(os.Stderr)})
}

// logger is the CLI's logger: warnings and errors to stderr, more with
// CORRAL_LOG=debug.
func logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("CORRAL_LOG") == "debug" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
