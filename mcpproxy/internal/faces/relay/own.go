package relay

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// cancelUpstream tells the upstream session sid that the requests ids,
// whose client was cut, are cancelled: in the session era a closed
// stream is not a cancellation (the client could resume it), so the
// upstream would otherwise run them to the end.
func (rl *Relay) cancelUpstream(sid, version string, ids [][]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range ids {
		body := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(id) +
			`,"reason":"the client stopped reading its response"}}`)
		req, err := rl.ownRequest(ctx, body, sid, version)
		if err != nil {
			return
		}
		resp, err := rl.o.Client.Do(req)
		if err != nil {
			rl.log.Warn("cancelling a request upstream failed", "err", httpx.RedactError(err))
			return
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}
}

// ownRequest is a POST of the proxy's own message body to the upstream,
// in session sid and revision version (each "" for none). It carries the
// configured headers alone, never a client's credentials, and accepts
// JSON or an event stream.
func (rl *Relay) ownRequest(ctx context.Context, body []byte, sid, version string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rl.o.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range rl.o.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	if version != "" {
		req.Header.Set(mcpheader.ProtocolVersion, version)
	}
	return req, nil
}

// maxList caps one page of the proxy's own tools/list, as inMemory caps
// a client's.
const maxList = 64 << 20

// listTools returns how to list the upstream's tools for the caller of m,
// a tools/call in session sid ("" in the stateless era, whose envelope it
// carries instead) of revision version: a POST of the proxy's own
// tools/list per page (ownRequest), its answer read as JSON or as an
// event stream.
func (rl *Relay) listTools(sid, version string, m *jsonrpc.Message) offload.ListFunc {
	var meta []byte
	if sid == "" {
		meta = ownmethods.Envelope(m)
	}
	return func(ctx context.Context, cursor string) ([]byte, error) {
		lm := ownmethods.ListRequest(meta, cursor)
		req, err := rl.ownRequest(ctx, lm.Raw, sid, version)
		if err != nil {
			return nil, err
		}
		if mcpheader.Stateless(version) {
			req.Header.Set(mcpheader.Method, "tools/list")
		}
		resp, err := rl.send(req)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", httpx.RedactError(err))
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("tools/list: the upstream answered %s", resp.Status)
		}
		return listResult(resp, lm.ID)
	}
}

// listResult reads the answer to the proxy's tools/list id from resp, a
// JSON body or an event stream, and returns a copy of its result; an
// error answer is an error.
func listResult(resp *http.Response, id []byte) ([]byte, error) {
	var r *jsonrpc.Message
	var err error
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body, maxList)
		defer rd.Release()
		r, err = listEvent(rd, id)
	} else {
		r, err = listJSON(resp.Body)
	}
	if err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	if r.Error != nil {
		return nil, fmt.Errorf("tools/list: the upstream answered error %d", r.ErrorCode())
	}
	return bytes.Clone(r.Result), nil // the reader's buffer goes back to its pool
}

// listEvent reads events until the response to id.
func listEvent(rd *sse.Reader, id []byte) (*jsonrpc.Message, error) {
	for {
		ev, err := rd.Next()
		if err != nil {
			return nil, err
		}
		if m, err := jsonrpc.DecodeMessage(ev.Data); err == nil && m.IsResponse() && bytes.Equal(m.ID, id) {
			return m, nil
		}
	}
}

// listJSON reads a JSON body of one message, within maxList.
func listJSON(body io.Reader) (*jsonrpc.Message, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxList+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxList {
		return nil, fmt.Errorf("the answer is over %d bytes", maxList)
	}
	return jsonrpc.DecodeMessage(b)
}
