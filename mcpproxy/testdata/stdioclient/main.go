// Command stdioclient runs the conformance suite's client scenarios with
// Spillway's stdio face as the client under test: it starts
// `spillway serve --stdio --upstream-url <the suite's server>` and drives
// it over stdio with the official Go SDK client, doing what the Go SDK's
// everything-client does for each scenario over HTTP. The suite runs it
// as `stdioclient <server URL>` with MCP_CONFORMANCE_SCENARIO set;
// SPILLWAY_BIN names the spillway binary.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatalf("usage: %s <server URL>", os.Args[0])
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	bin := os.Getenv("SPILLWAY_BIN")
	if scenario == "" || bin == "" {
		log.Fatal("MCP_CONFORMANCE_SCENARIO and SPILLWAY_BIN must be set")
	}
	data, err := os.MkdirTemp("", "stdioclient")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(data)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--stdio", "--upstream-url", os.Args[1], "--listen", "127.0.0.1:0", "--data", data)
	cmd.Stderr = os.Stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		log.Fatalf("connecting through spillway: %v", err)
	}
	defer session.Close()
	if err := run(ctx, session, scenario); err != nil {
		log.Fatalf("scenario %s: %v", scenario, err)
	}
}

// run does what the reference client does for each scenario.
func run(ctx context.Context, s *mcp.ClientSession, scenario string) error {
	call := func(tool string, args map[string]any) error {
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			return fmt.Errorf("tools/list: %v", err)
		}
		if !slices.ContainsFunc(tools.Tools, func(t *mcp.Tool) bool { return t.Name == tool }) {
			return fmt.Errorf("tool %q not found", tool)
		}
		if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
			return fmt.Errorf("tools/call %s: %v", tool, err)
		}
		return nil
	}
	switch scenario {
	case "initialize":
		_, err := s.ListTools(ctx, nil)
		return err
	case "tools_call":
		return call("add_numbers", map[string]any{"a": 5, "b": 3})
	case "sse-retry":
		return call("test_reconnection", map[string]any{})
	case "request-metadata":
		return nil // connecting is the scenario
	}
	return fmt.Errorf("unknown scenario %q", scenario)
}
