// Command ferretdb runs FerretDB 1.x with its SQLite backend as a local
// MongoDB-wire-compatible server for the platform's development stack.
//
// It exists because a plain `go install` of FerretDB's own command panics on
// a version file that only its release build generates; the embeddable
// package has no such requirement.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	dir := flag.String("sqlite-dir", "var/ferretdb", "directory holding the SQLite databases")
	level := flag.String("log-level", "warn", "log level: debug, info, warn, error")
	flag.Parse()

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(os.Stderr, "bad -log-level: %v\n", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	if err := os.MkdirAll(*dir, 0o755); err != nil {
		logger.Error("cannot create data directory", "dir", *dir, "err", err)
		os.Exit(1)
	}

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + *dir + "/",
	})
	if err != nil {
		logger.Error("cannot start FerretDB", "err", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logger.Warn("FerretDB listening", "addr", *listen, "sqlite_dir", *dir)
	if err := f.Run(ctx); err != nil {
		logger.Error("FerretDB stopped with an error", "err", err)
		os.Exit(1)
	}
}
