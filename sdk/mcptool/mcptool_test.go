package mcptool_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/sdk"
	"github.com/spillway-dev/spillway/sdk/internal/servetest"
	"github.com/spillway-dev/spillway/sdk/mcptool"
)

// A tool built with the official SDK returns a link; an agent that calls
// it finds httpUrl and httpUrlExpiresAt in the resource_link and fetches
// the bytes with a plain GET.
func TestToolReturnsLink(t *testing.T) {
	c := &sdk.Client{BaseURL: servetest.Start(t), Token: servetest.Token}
	png := make([]byte, 1<<20)
	rand.Read(png)
	s := mcp.NewServer(&mcp.Implementation{Name: "tool", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "chart", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			link, err := mcptool.Upload(ctx, c, bytes.NewReader(png), sdk.UploadOptions{Name: "chart.png", MimeType: "image/png"})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the chart"}, link}}, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer srv.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chart","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		Result struct {
			Content []sdk.Link `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil || len(r.Result.Content) != 2 {
		t.Fatalf("tool result: %s", body)
	}
	l := r.Result.Content[1]
	if !bytes.Contains(body, []byte(`"type":"resource_link"`)) || l.HTTPURL == "" || l.ExpiresAt.IsZero() || l.SHA256 == "" || l.TokenID == "" {
		t.Fatalf("no resource_link with httpUrl, httpUrlExpiresAt, sha256 and tokenId: %s", body)
	}
	got, err := c.FetchBytes(context.Background(), l)
	if err != nil || !bytes.Equal(got, png) {
		t.Fatalf("fetched %d bytes, %v", len(got), err)
	}
}
