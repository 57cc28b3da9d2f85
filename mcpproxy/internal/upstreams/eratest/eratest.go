// Package eratest is, for tests, an MCP server that speaks only the
// stateless era (protocol revision 2026-07-28), built on the official Go
// SDK with ServerOptions.SupportedProtocolVersions limited to it: what a
// new server written stateless-only looks like to the proxy.
//
// Its tools ask for client input the stateless era's way, with an
// input_required result (SEP-2322) and a retry carrying inputResponses and
// requestState: "sample" (sampling/createMessage), "elicit"
// (elicitation/create), "roots" (roots/list); "bigstate" elicits with a
// requestState of 100 KiB and says whether it came back intact. "echo" answers its text,
// "big" answers Big bytes of text (enough to be offloaded), "log" sends a
// notifications/message at each level then answers, "progress" reports
// progress with its text as the message, "touch" announces an
// update of Resource and adds a tool named "added-" and its text (the
// list of tools changes). It serves the
// resource Resource and the prompt "greet".
package eratest

//lint:file-ignore SA1019 a stateless-only server still offers sampling, roots and logging (deprecated, not removed, in 2026-07-28), so the proxy's bridging of them is tested.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the only protocol revision the server speaks.
const Version = "2026-07-28"

// Resource is the URI of the server's one resource; its text is
// ResourceText.
const (
	Resource     = "era://hello"
	ResourceText = "hello from a stateless-only server"
)

// Big is the size of the "big" tool's text.
const Big = 256 << 10

// NewServer returns the server; Serve it on a transport of the caller's.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "eratest", Version: "1.0.0"}, &mcp.ServerOptions{
		SupportedProtocolVersions: []string{Version},
		Instructions:              "a stateless-only test server",
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddReceivingMiddleware(Strict)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "answers its text"}, echo)
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "answers a large text"}, big)
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "asks the client's model"}, sample)
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "asks the user"}, elicit)
	mcp.AddTool(s, &mcp.Tool{Name: "bigstate", Description: "asks the user, with a large requestState"}, bigStateTool)
	mcp.AddTool(s, &mcp.Tool{Name: "roots", Description: "lists the client's roots"}, roots)
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "logs at every level"}, logAll)
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "reports progress three times, its text as the message"}, progress)
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "updates the resource and adds a tool"}, touch(s))
	s.AddResource(&mcp.Resource{URI: Resource, Name: "hello", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: Resource, MIMEType: "text/plain", Text: ResourceText}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "greet " + req.Params.Arguments["name"]}}}}, nil
		})
	return s
}

// text is every tool's input: one optional string.
type text struct {
	Text string `json:"text,omitempty"`
}

// echo answers its text.
func echo(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
	return result("echo: " + in.Text), nil, nil
}

// big answers Big bytes of text, enough for the proxy to offload.
func big(context.Context, *mcp.CallToolRequest, text) (*mcp.CallToolResult, any, error) {
	line := "a line of a large output, long enough to be offloaded by the proxy.\n"
	return result(strings.Repeat(line, Big/len(line)+1)[:Big]), nil, nil
}

// sample asks the client's model to "say" its text (an input_required
// result with requestState "sampling"), then answers what the model said.
func sample(_ context.Context, req *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
	r, ok := req.Params.InputResponses["s"]
	if !ok {
		return &mcp.CallToolResult{RequestState: "sampling", InputRequests: mcp.InputRequestMap{"s": &mcp.CreateMessageParams{
			MaxTokens: 50, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "say " + in.Text}}},
		}}}, nil, nil
	}
	if req.Params.RequestState != "sampling" {
		return nil, nil, fmt.Errorf("requestState %q, want sampling", req.Params.RequestState)
	}
	cm, ok := r.(*mcp.CreateMessageWithToolsResult)
	if !ok || len(cm.Content) == 0 {
		return nil, nil, fmt.Errorf("input response %T is no sampling result", r)
	}
	t, _ := cm.Content[0].(*mcp.TextContent)
	if t == nil {
		return nil, nil, fmt.Errorf("sampling answered %T, not text", cm.Content[0])
	}
	return result("sampled: " + t.Text), nil, nil
}

// elicit asks the user for a name, then answers the user's action and name.
func elicit(_ context.Context, req *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
	r, ok := req.Params.InputResponses["e"]
	if !ok {
		return &mcp.CallToolResult{RequestState: "eliciting", InputRequests: mcp.InputRequestMap{"e": &mcp.ElicitParams{
			Message: "your name?",
			RequestedSchema: map[string]any{"type": "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}}, "required": []string{"name"}},
		}}}, nil, nil
	}
	el, ok := r.(*mcp.ElicitResult)
	if !ok {
		return nil, nil, fmt.Errorf("input response %T is no elicitation result", r)
	}
	return result(fmt.Sprintf("elicited: %s %v", el.Action, el.Content["name"])), nil, nil
}

// bigState is the requestState of the "bigstate" tool: past the proxy's
// spill threshold, so the proxy spills it and must put it back.
var bigState = strings.Repeat("s", 100<<10)

// bigStateTool elicits with bigState as its requestState, then says
// whether the retry brought it back intact.
func bigStateTool(_ context.Context, req *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
	if _, ok := req.Params.InputResponses["e"]; !ok {
		return &mcp.CallToolResult{RequestState: bigState, InputRequests: mcp.InputRequestMap{"e": &mcp.ElicitParams{
			Message: "ok?", RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}}}, nil, nil
	}
	if req.Params.RequestState != bigState {
		return result(fmt.Sprintf("requestState changed: %d bytes", len(req.Params.RequestState))), nil, nil
	}
	return result("requestState intact"), nil, nil
}

// roots asks for the client's roots, then answers their URIs.
func roots(_ context.Context, req *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
	r, ok := req.Params.InputResponses["r"]
	if !ok {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"r": &mcp.ListRootsParams{}}}, nil, nil
	}
	lr, ok := r.(*mcp.ListRootsResult)
	if !ok {
		return nil, nil, fmt.Errorf("input response %T is no roots result", r)
	}
	var uris []string
	for _, root := range lr.Roots {
		uris = append(uris, root.URI)
	}
	return result("roots: " + strings.Join(uris, " ")), nil, nil
}

// logAll sends a notifications/message at each level, then answers.
func logAll(ctx context.Context, req *mcp.CallToolRequest, _ text) (*mcp.CallToolResult, any, error) {
	for _, l := range []mcp.LoggingLevel{"debug", "info", "warning", "error"} {
		req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: l, Logger: "eratest", Data: "at " + string(l)})
	}
	return result("logged"), nil, nil
}

// progress reports progress three times, its text as the message, when
// the call carries a progress token.
func progress(ctx context.Context, req *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
	if tok := req.Params.GetProgressToken(); tok != nil {
		for i := range 3 {
			req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 3, Message: in.Text})
		}
	}
	return result("progressed " + in.Text), nil, nil
}

// touch returns the "touch" tool of s: it announces an update of Resource
// and adds a tool named "added-" and its text, so the list of tools changes.
func touch(s *mcp.Server) mcp.ToolHandlerFor[text, any] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
		if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: Resource}); err != nil {
			return nil, nil, err
		}
		s.AddTool(&mcp.Tool{Name: "added-" + in.Text, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return result("added"), nil })
		return result("touched"), nil, nil
	}
}

// Strict refuses what a server of 2026-07-28 alone does not know: the
// session era's initialize and any request that does not name 2026-07-28
// in its _meta. (The SDK alone would still negotiate 2025-11-25 over stdio
// and call a session-era client back itself.)
func Strict(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		var v any
		if p := req.GetParams(); p != nil {
			v = p.GetMeta()[mcp.MetaKeyProtocolVersion]
		}
		if method == "initialize" || v != Version {
			data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: []string{Version}, Requested: fmt.Sprint(v)})
			return nil, &jsonrpc.Error{Code: mcp.CodeUnsupportedProtocolVersion, Message: "unsupported protocol version: this server speaks " + Version + " only", Data: data}
		}
		return next(ctx, method, req)
	}
}

func result(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Handler serves NewServer over Streamable HTTP, stateless (the only way
// the Go SDK serves 2026-07-28 over HTTP).
func Handler() http.Handler {
	s := NewServer()
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
}
