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
	"runtime/debug"
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
	logger := slog.New(&lazyHandler{inner: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})})

	// FerretDB's heap is mostly short-lived garbage of the documents it converts; collecting
	// it less often is measurably cheaper (docs/ferretdb.md). GOGC in the environment wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}

	if err := os.MkdirAll(*dir, 0o755); err != nil {
		logger.Error("cannot create data directory", "dir", *dir, "err", err)
		os.Exit(1)
	}

	// synchronous(normal): in WAL mode a commit no longer waits for an fsync (checkpoints still
	// do); a crash of FerretDB loses nothing, a power loss may lose the last commits but never
	// corrupts the file. Right for a development stack; FerretDB's other defaults (WAL, busy
	// timeout) are kept.
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + *dir + "/?_pragma=synchronous(normal)",
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

// lazyHandler defers slog's With(attrs) until a record is actually logged.
//
// FerretDB 1.24 logs every SQL statement at debug level as logger.With(query, args).Debug(...):
// slog's TextHandler formats (quotes) the attributes inside With, before the level is checked,
// so every insert quoted each ~2.6 KB document twice even at -log-level=error: 29% of
// FerretDB's CPU time during bulk inserts (docs/ferretdb.md). With this wrapper the attributes
// are formatted only for records that pass the level, i.e. almost never.
type lazyHandler struct {
	inner slog.Handler
	ops   []func(slog.Handler) slog.Handler // WithAttrs/WithGroup calls, in order, not yet applied
}

func (h *lazyHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *lazyHandler) Handle(ctx context.Context, r slog.Record) error {
	inner := h.inner
	for _, op := range h.ops {
		inner = op(inner)
	}

	return inner.Handle(ctx, r)
}

func (h *lazyHandler) with(op func(slog.Handler) slog.Handler) slog.Handler {
	ops := make([]func(slog.Handler) slog.Handler, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)

	return &lazyHandler{inner: h.inner, ops: append(ops, op)}
}

func (h *lazyHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(inner slog.Handler) slog.Handler { return inner.WithAttrs(attrs) })
}

func (h *lazyHandler) WithGroup(name string) slog.Handler {
	return h.with(func(inner slog.Handler) slog.Handler { return inner.WithGroup(name) })
}
