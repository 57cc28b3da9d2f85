// Command eraserver runs eratest's stateless-only server for tests: on
// stdin and stdout, or with -listen ADDR over Streamable HTTP at /mcp
// (then it prints "listening URL" once ready).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/eratest"
)

func main() {
	listen := flag.String("listen", "", "serve HTTP on this address instead of stdio")
	flag.Parse()
	if *listen == "" {
		if err := eratest.NewServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", eratest.Handler())
	fmt.Printf("listening http://%s/mcp\n", l.Addr())
	log.Fatal(http.Serve(l, mux))
}
