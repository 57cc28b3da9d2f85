package bigtool

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults and limits of the tools' size arguments.
const (
	DefaultQueryRows  = 25_000    // about 5 MB of JSON
	DefaultCSVRows    = 22_000    // about 2 MB of CSV
	DefaultReportSize = 1 << 20   // 1 MiB of text
	MaxRows           = 1_000_000 // about 200 MB of JSON
	MaxReportSize     = 256 << 20
	MaxReportSeconds  = 600
	maxEcho           = 200
)

// QueryArgs are the arguments of the query tool.
type QueryArgs struct {
	Rows int   `json:"rows,omitempty" jsonschema:"number of order rows to return; 0 or absent means 25000 (about 5 MB); at most 1000000"`
	Seed int64 `json:"seed,omitempty" jsonschema:"data seed: the same seed and rows always give the same bytes"`
}

// ChartArgs are the arguments of the chart tool.
type ChartArgs struct {
	Width  int   `json:"width,omitempty" jsonschema:"image width in pixels (default 1280)"`
	Height int   `json:"height,omitempty" jsonschema:"image height in pixels (default 800)"`
	Bars   int   `json:"bars,omitempty" jsonschema:"number of bars (default 12)"`
	Grain  int   `json:"grain,omitempty" jsonschema:"noise amplitude 1-64 standing in for real-world texture (default 4, about 1.5 MB at the default size); -1 for a flat, tiny PNG"`
	Seed   int64 `json:"seed,omitempty" jsonschema:"data seed"`
}

// ExportArgs are the arguments of the export_csv tool.
type ExportArgs struct {
	Rows int    `json:"rows,omitempty" jsonschema:"number of order rows; 0 or absent means 22000 (about 2 MB); at most 1000000"`
	Seed int64  `json:"seed,omitempty" jsonschema:"data seed (the same rows as query with the same seed)"`
	As   string `json:"as,omitempty" jsonschema:"how the CSV is returned: resource (embedded resource with text, the default), blob (embedded resource with base64 blob) or text (plain text content)"`
}

// ReportArgs are the arguments of the slow_report tool.
type ReportArgs struct {
	Seconds    float64 `json:"seconds,omitempty" jsonschema:"how long the report takes, in seconds (default 5, at most 600)"`
	IntervalMS int     `json:"interval_ms,omitempty" jsonschema:"milliseconds between progress notifications (default 250)"`
	Size       int     `json:"size,omitempty" jsonschema:"size of the final report in bytes (default 1048576)"`
	Seed       int64   `json:"seed,omitempty" jsonschema:"data seed"`
}

// SmallArgs are the arguments of the small tool.
type SmallArgs struct {
	Echo string `json:"echo,omitempty" jsonschema:"text echoed back (cut at 200 bytes)"`
}

// ToolNames lists bigtool's tools in the order tools/list returns them.
var ToolNames = []string{"chart", "export_csv", "query", "slow_report", "small"}

func addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{
		Name:  "query",
		Title: "Query orders",
		Description: "Runs the orders query and returns every row as a JSON array (about 5 MB by default) " +
			"plus a small structured summary with row count, totals and the SHA-256 of the rows.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, query)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "chart",
		Title:       "Revenue chart",
		Description: "Draws a bar chart of revenue as a PNG image (about 1.5 MB by default).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, chart)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "export_csv",
		Title:       "Export orders as CSV",
		Description: "Exports the orders table as text/csv (about 2 MB by default), as an embedded resource by default.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, exportCSV)
	mcp.AddTool(s, &mcp.Tool{
		Name:  "slow_report",
		Title: "Slow report",
		Description: "Builds a long-running report: sends progress notifications for the requested number of " +
			"seconds (when the call carries a progress token), then returns a large plain-text report.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, slowReport)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "small",
		Title:       "Small result",
		Description: "Returns a tiny result; a proxy must pass it through untouched.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, small)
}

func checkRows(rows, def int) (int, error) {
	switch {
	case rows == 0:
		return def, nil
	case rows < 0 || rows > MaxRows:
		return 0, fmt.Errorf("rows %d: want 1 to %d", rows, MaxRows)
	}
	return rows, nil
}

func query(_ context.Context, _ *mcp.CallToolRequest, in QueryArgs) (*mcp.CallToolResult, Summary, error) {
	rows, err := checkRows(in.Rows, DefaultQueryRows)
	if err != nil {
		return nil, Summary{}, err
	}
	var buf bytes.Buffer
	buf.Grow(rows * 210)
	sum, err := WriteJSON(&buf, in.Seed, rows)
	if err != nil {
		return nil, Summary{}, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: buf.String()}}}, sum, nil
}

func chart(_ context.Context, _ *mcp.CallToolRequest, in ChartArgs) (*mcp.CallToolResult, any, error) {
	o := ChartOptions{Seed: in.Seed, Width: in.Width, Height: in.Height, Bars: in.Bars, Grain: in.Grain}
	var buf bytes.Buffer
	if err := Chart(&buf, o); err != nil {
		return nil, nil, err
	}
	o, _ = o.withDefaults()
	caption := fmt.Sprintf("Revenue by month: %d bars, %d×%d PNG, %d bytes.", o.Bars, o.Width, o.Height, buf.Len())
	return &mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: caption},
		&mcp.ImageContent{Data: buf.Bytes(), MIMEType: "image/png"},
	}}, nil, nil
}

func exportCSV(_ context.Context, _ *mcp.CallToolRequest, in ExportArgs) (*mcp.CallToolResult, any, error) {
	rows, err := checkRows(in.Rows, DefaultCSVRows)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	buf.Grow(rows * 110)
	if _, err := WriteCSV(&buf, in.Seed, rows); err != nil {
		return nil, nil, err
	}
	uri := fmt.Sprintf("bigtool://exports/orders-s%d-r%d.csv", in.Seed, rows)
	var c mcp.Content
	switch in.As {
	case "", "resource":
		c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/csv", Text: buf.String()}}
	case "blob":
		c = &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: "text/csv", Blob: buf.Bytes()}}
	case "text":
		c = &mcp.TextContent{Text: buf.String()}
	default:
		return nil, nil, fmt.Errorf("as %q: want resource, blob or text", in.As)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{c}}, nil, nil
}

func slowReport(ctx context.Context, req *mcp.CallToolRequest, in ReportArgs) (*mcp.CallToolResult, any, error) {
	secs, every, size := in.Seconds, in.IntervalMS, in.Size
	if secs == 0 {
		secs = 5
	}
	if every == 0 {
		every = 250
	}
	if size == 0 {
		size = DefaultReportSize
	}
	switch {
	case secs < 0 || secs > MaxReportSeconds:
		return nil, nil, fmt.Errorf("seconds %g: want 0 to %d", secs, MaxReportSeconds)
	case every < 10:
		return nil, nil, fmt.Errorf("interval_ms %d: want at least 10", every)
	case size < 0 || size > MaxReportSize:
		return nil, nil, fmt.Errorf("size %d: want 1 to %d", size, MaxReportSize)
	}
	total := time.Duration(secs * float64(time.Second))
	interval := time.Duration(every) * time.Millisecond
	steps := max(1, int((total+interval-1)/interval))
	token := req.Params.GetProgressToken()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for step := 1; step <= steps; step++ {
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
		if token == nil {
			continue
		}
		err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(step),
			Total:         float64(steps),
			Message:       fmt.Sprintf("scanned %d of %d partitions", step, steps),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("progress: %w", err)
		}
	}
	text := report(in.Seed, size)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// report returns exactly size bytes of log-style report lines, the same for
// the same seed and size however long the run took.
func report(seed int64, size int) string {
	var b strings.Builder
	b.Grow(size + 128)
	fmt.Fprintf(&b, "# slow_report seed=%d size=%d\n", seed, size)
	for i := 0; b.Len() < size; i++ {
		r := newRNG(seed, uint64(i)|1<<41)
		o := NewOrder(seed, r.intn(MaxRows))
		fmt.Fprintf(&b, "%s partition=%04d worker=%02d order=%s region=%s amount=%.2f latency_ms=%d status=%s\n",
			epoch.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%4096, r.intn(32),
			o.ID, o.Region, o.Amount, 1+r.intn(900), o.Status)
	}
	return b.String()[:size]
}

func small(_ context.Context, _ *mcp.CallToolRequest, in SmallArgs) (*mcp.CallToolResult, any, error) {
	echo := in.Echo
	if len(echo) > maxEcho {
		echo = strings.ToValidUTF8(echo[:maxEcho], "")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok " + echo}}}, nil, nil
}
