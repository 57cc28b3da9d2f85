// Command spillway runs the Spillway service and its tools.
//
//	spillway serve    run the artifact service and the MCP proxy
//	spillway put      store a file as an artifact and print its resource_link
//	spillway policy   test, check and evaluate Rego policies
//	spillway version  print the version
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usage = `Spillway keeps large MCP tool outputs out of an agent's context.

Usage:
  spillway serve   [flags]          run the artifact service and MCP proxy
  spillway put     FILE|- [flags]   store a file, print its resource_link JSON
  spillway policy  test|check|eval  work with Rego policies
  spillway version                  print the version

Run "spillway COMMAND -h" for a command's flags. Every flag can also be set
in the YAML file given by --config (keys are flag names) or as an environment
variable SPILLWAY_<FLAG_NAME>, e.g. SPILLWAY_PUBLIC_URL.
`

func main() {
	if err := notDumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "spillway: cannot make the process non-dumpable:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveMain(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "put":
		return putMain(ctx, args[1:], stdin, stdout, stderr, getenv)
	case "policy":
		return policyMain(ctx, args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "spillway", versionString())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "spillway: unknown command %q\n\n%s", args[0], usage)
	return 2
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
