package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"

	"github.com/gorilla/mux"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// The proxy embedded in a program, in front of a tool server whose tool
// returns about 100 KB of text: the agent gets a short preview and a
// resource_link, and the link's URL serves the whole text.
func Example() {
	ctx := context.Background()

	// The tool server: one tool, "report", over Streamable HTTP.
	report := strings.Repeat("one line of a long report\n", 4000)
	tools := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	tools.AddTool(&mcp.Tool{Name: "report", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: report}}}, nil
		})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tools }, nil))
	defer upstream.Close()

	// The artifact service: a store on disk, a signing key, the built-in
	// policy, and the fetch endpoint the links point at.
	dir := must(os.MkdirTemp("", "spillway-example"))
	defer os.RemoveAll(dir)
	engine := must(policy.New(ctx, policy.Options{}))
	defer engine.Close()
	links := httptest.NewUnstartedServer(nil)
	svc := &artifact.Service{
		Store:     must(fsstore.New(dir)),
		Signer:    must(token.NewSigner(token.Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})),
		PublicURL: must(url.Parse("http://" + links.Listener.Addr().String())),
		Mint:      engine,
		Fetch:     engine,
	}
	r := mux.NewRouter()
	artifact.NewHandler(svc, artifact.HandlerOptions{}).Register(r)
	links.Config.Handler = r
	links.Start()
	defer links.Close()

	// The proxy, offloading what the policy says to, served as /mcp.
	p := must(mcpproxy.New(mcpproxy.Options{
		Upstream:  &mcpproxy.HTTPUpstream{URL: upstream.URL},
		Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, engine, mcpproxy.OffloadOptions{}),
	}))
	defer p.Close()
	proxy := httptest.NewServer(p)
	defer proxy.Close()

	// An agent calls the tool through the proxy.
	agent := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	session := must(agent.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: proxy.URL}, nil))
	defer session.Close()
	res := must(session.CallTool(ctx, &mcp.CallToolParams{Name: "report"}))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			fmt.Println("preview: shorter than the report:", len(c.Text) < len(report))
		case *mcp.ResourceLink:
			// SDKs drop the link's httpUrl; its copy in _meta stays.
			meta := c.Meta[artifact.MetaLink].(map[string]any)
			resp := must(http.Get(meta["httpUrl"].(string)))
			body := must(io.ReadAll(resp.Body))
			resp.Body.Close()
			fmt.Printf("link: %d bytes, the whole report: %v\n", *c.Size, string(body) == report)
		}
	}
	// Output:
	// preview: shorter than the report: true
	// link: 104000 bytes, the whole report: true
}

// must panics on an error: it keeps the example about the proxy.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
