// Command bigtool is a demo MCP tool server with large outputs (see package
// bigtool). It speaks MCP over stdio by default:
//
//	bigtool                          # stdio, for spillway serve --upstream-cmd bigtool
//	bigtool -http 127.0.0.1:8081     # Streamable HTTP at http://127.0.0.1:8081/mcp, both eras
//	bigtool -http :8081 -era session # session era only (stateless: 2026-07-28 only)
//
// With -http it logs its URL to stderr once it listens (use port 0 for a
// free port) and also answers GET /healthz.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/examples/bigtool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process, so tests can call it.
func run(ctx context.Context, args []string, stdin io.ReadCloser, stdout io.WriteCloser, stderr io.Writer) int {
	fs := flag.NewFlagSet("bigtool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("http", "", "serve Streamable HTTP at `address` (path /mcp) instead of stdio")
	eraFlag := fs.String("era", string(bigtool.EraBoth), "HTTP protocol era: both, session or stateless")
	logLevel := fs.String("log-level", "warn", "SDK log `level`: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bigtool: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	era, err := bigtool.ParseEra(*eraFlag)
	if err != nil {
		fmt.Fprintln(stderr, "bigtool:", err)
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(stderr, "bigtool: -log-level:", err)
		return 2
	}
	// stdout carries the protocol on stdio, so logs always go to stderr.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	server := bigtool.NewServer(&bigtool.Options{Logger: log})

	if *addr == "" {
		err := server.Run(ctx, &mcp.IOTransport{Reader: stdin, Writer: stdout})
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, mcp.ErrConnectionClosed) {
			fmt.Fprintln(stderr, "bigtool:", err)
			return 1
		}
		return 0
	}
	if err := serveHTTP(ctx, server, *addr, era, stderr); err != nil {
		fmt.Fprintln(stderr, "bigtool:", err)
		return 1
	}
	return 0
}

func serveHTTP(ctx context.Context, server *mcp.Server, addr string, era bigtool.Era, stderr io.Writer) error {
	h, err := bigtool.NewHandler(server, era)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: slow_report and SSE streams legitimately run long.
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "bigtool: serving Streamable HTTP (era %s) at http://%s/mcp\n", era, ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	return nil
}
