package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The stdio side of the load tool: a tool server that streams outputs of
// any size without holding them (-upstream-stdio), and the bare relay
// that puts a stdio server on HTTP by copying bytes (-relay-cmd), the
// anchor the proxies' wall time is held against.

var (
	upstreamMode = flag.Bool("upstream-stdio", false, "internal: run as the stdio tool server of the big-output comparison")
	relayCmd     = flag.String("relay-cmd", "", "internal: run as a bare HTTP relay in front of this stdio command (one child per session)")
	relayListen  = flag.String("relay-listen", "", "internal: the bare relay's listen address")
)

// maxBig bounds what one call to the upstream's big tool may ask for.
const maxBig = 4 << 30

// bigArgs are the arguments of the upstream's big tool.
type bigArgs struct {
	Bytes int64  `json:"bytes"`
	Kind  string `json:"kind"` // "jpeg" (a hostile image, see hostileJPEG), "jpeg-bound" (boundJPEG), "text" (a JSON document as text, the default), "text-u" (the same, its quotes and line ends as \u escapes), "text-go" (notes holding '<', '>', '&' and U+2028, spelt \u003c, \u003e, \u0026, \u2028 as Go's json.Marshal spells them) or "image" (base64)
	Seed  uint64 `json:"seed"`
}

// writeBig writes the big tool's content, decoded (the bytes an offloaded
// artifact must hold): for "text", a JSON array of generated rows, at least
// a.Bytes long; for "image", a.Bytes pseudo-random bytes. Both follow from
// the seed alone, so the load tool computes the expected SHA-256 itself.
func writeBig(w io.Writer, a bigArgs) (int64, error) {
	src := rand.NewChaCha8([32]byte{0: byte(a.Seed), 1: byte(a.Seed >> 8), 31: 7})
	rng := rand.New(src)
	var n int64
	buf := make([]byte, 0, 64<<10)
	flush := func() error {
		k, err := w.Write(buf)
		n += int64(k)
		buf = buf[:0]
		return err
	}
	if a.Kind == "image" {
		for n+int64(len(buf)) < a.Bytes {
			k := min(int64(cap(buf)), a.Bytes-n)
			buf = buf[:k]
			src.Read(buf)
			if err := flush(); err != nil {
				return n, err
			}
		}
		return n, nil
	}
	regions := [...]string{"emea", "amer", "apac"}
	letters := "abcdefghijklmnopqrstuvwxyz0123456789"
	if a.Kind == "text-go" {
		letters += "<>&"
	}
	buf = append(buf, '[')
	for i := int64(0); n+int64(len(buf)) < a.Bytes; i++ {
		if i > 0 {
			buf = append(buf, ",\n"...)
		}
		buf = append(buf, `{"id":`...)
		buf = strconv.AppendInt(buf, i, 10)
		buf = append(buf, `,"region":"`...)
		buf = append(buf, regions[rng.IntN(3)]...)
		buf = append(buf, `","amount":`...)
		buf = strconv.AppendInt(buf, int64(rng.IntN(100000)), 10)
		buf = append(buf, `,"note":"`...)
		for range 48 {
			buf = append(buf, letters[rng.IntN(len(letters))])
		}
		if a.Kind == "text-go" && i%64 == 0 {
			buf = append(buf, "\u2028"...) // which Go's json.Marshal spells \u2028
		}
		buf = append(buf, `"}`...)
		if len(buf) > cap(buf)-256 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	buf = append(buf, ']')
	return n, flush()
}

// jsonEscaper writes what it is given as the inside of a JSON string. It
// escapes only what writeBig's text can hold: quotes, newlines, '<', '>'
// and '&', and U+2028. Each Write is whole characters (writeBig writes
// whole rows).
type jsonEscaper struct {
	w   io.Writer
	buf []byte
	// u spells quotes and newlines as \u escapes (\u0022, \u000a): valid
	// JSON, but not how most encoders write them (kind "text-u", the
	// same text).
	u bool
	// html spells '<', '>' and '&' as \u003c, \u003e and \u0026, and
	// U+2028 as \u2028, as Go's json.Marshal does (kind "text-go").
	html bool
}

func (e *jsonEscaper) Write(p []byte) (int, error) {
	e.buf = e.buf[:0]
	q, nl := `\"`, `\n`
	if e.u {
		q, nl = `\u0022`, `\u000a`
	}
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case 0xe2:
			if e.html && i+2 < len(p) && p[i+1] == 0x80 && p[i+2] == 0xa8 {
				e.buf = append(e.buf, `\u2028`...)
				i += 2
			} else {
				e.buf = append(e.buf, c)
			}
		case '"':
			e.buf = append(e.buf, q...)
		case '\n':
			e.buf = append(e.buf, nl...)
		case '<', '>', '&':
			if e.html {
				e.buf = append(e.buf, '\\', 'u', '0', '0', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			} else {
				e.buf = append(e.buf, c)
			}
		default:
			e.buf = append(e.buf, c)
		}
	}
	_, err := e.w.Write(e.buf)
	return len(p), err
}

// upstreamStdio is the -upstream-stdio mode: a newline-delimited JSON-RPC
// MCP server with three tools. "big" streams its result onto stdout as it
// generates it, so this process stays small whatever the size; "small"
// answers a few bytes. Requests are served concurrently, each message
// written whole under one lock (as any stdio server must). It exits when
// stdin ends or its parent dies.
func upstreamStdio() int {
	// The proxies under test start this; if one is killed (say, past the
	// RSS cap) its child must not live on streaming gigabytes.
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	var mu sync.Mutex
	write := func(id json.RawMessage, result func(w io.Writer) error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,`, id)
		if err := result(out); err != nil {
			os.Exit(1) // the reader went away mid-message
		}
		out.WriteString("}\n")
		if out.Flush() != nil {
			os.Exit(1)
		}
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	var wg sync.WaitGroup
	for {
		line, err := in.ReadBytes('\n')
		var m upstreamRequest
		if len(line) > 1 && json.Unmarshal(line, &m) == nil && m.ID != nil && m.Method != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				write(m.ID, upstreamAnswer(m.Method, m.Params.ProtocolVersion, m.Params.Name, m.Params.Arguments))
			}()
		}
		if err != nil {
			wg.Wait()
			return 0
		}
	}
}

// upstreamRequest is what the upstreams read of a request.
type upstreamRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string  `json:"protocolVersion"`
		Name            string  `json:"name"`
		Arguments       bigArgs `json:"arguments"`
	} `json:"params"`
}

// fixed is an answer member of fixed bytes.
func fixed(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

// upstreamAnswer is the result (or error) member of the answer to one request.
func upstreamAnswer(method, version, tool string, a bigArgs) func(io.Writer) error {
	switch method {
	case "initialize":
		switch version {
		case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		default:
			version = "2025-11-25"
		}
		return fixed(`"result":{"protocolVersion":"` + version + `","capabilities":{"tools":{}},"serverInfo":{"name":"spillway-load-upstream","version":"1"}}`)
	case "ping":
		return fixed(`"result":{}`)
	case "tools/list":
		return fixed(`"result":{"tools":[` +
			`{"name":"big","description":"streams an output of the given size","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"},"kind":{"type":"string"},"seed":{"type":"integer"}}}},` +
			`{"name":"small","description":"a few bytes","inputSchema":{"type":"object"}},` +
			`{"name":"shaped","description":"20 KB of rows under a hostile outputSchema","inputSchema":{"type":"object"},"outputSchema":` + hostileSchema() + `}]}`)
	case "tools/call":
		switch {
		case tool == "small":
			return fixed(`"result":{"content":[{"type":"text","text":"ok"}]}`)
		case tool == "big" && a.Kind == "jpeg":
			return fixed(`"result":{"content":[{"type":"image","mimeType":"image/jpeg","data":"` + hostileJPEG() + `"}]}`)
		case tool == "big" && a.Kind == "jpeg-bound":
			return fixed(`"result":{"content":[{"type":"image","mimeType":"image/jpeg","data":"` + boundJPEG() + `"}]}`)
		case tool == "shaped":
			rows := shapedRows()
			return fixed(`"result":{"content":[{"type":"text","text":` + strconv.Quote(rows) + `}],"structuredContent":` + rows + `}`)
		case tool == "big" && a.Bytes > 0 && a.Bytes <= maxBig && (a.Kind == "" || a.Kind == "text" || a.Kind == "text-u" || a.Kind == "text-go" || a.Kind == "image"):
			return func(w io.Writer) error {
				if a.Kind == "image" {
					io.WriteString(w, `"result":{"content":[{"type":"image","mimeType":"image/png","data":"`)
					enc := base64.NewEncoder(base64.StdEncoding, w)
					if _, err := writeBig(enc, a); err != nil {
						return err
					}
					if err := enc.Close(); err != nil {
						return err
					}
				} else {
					io.WriteString(w, `"result":{"content":[{"type":"text","text":"`)
					if _, err := writeBig(&jsonEscaper{w: w, u: a.Kind == "text-u", html: a.Kind == "text-go"}, a); err != nil {
						return err
					}
				}
				_, err := io.WriteString(w, `"}]}`)
				return err
			}
		}
		return fixed(`"result":{"isError":true,"content":[{"type":"text","text":"unknown tool or bad arguments"}]}`)
	}
	return fixed(`"error":{"code":-32601,"message":"method not found"}`)
}

// relay is the -relay-cmd mode: the pass-through anchor. It serves /mcp on
// -relay-listen; an initialize without a session starts a child (the
// command, split at spaces) and names the session, and every request of
// that session is written to the child's stdin as one line while the
// child's next stdout line is copied into the response as it comes, 64 KiB
// at a time: no parsing, no holding. Notifications get 202. It exits with
// its parent, and its children with it.
func relay() int {
	exitWithParent()
	type child struct {
		mu  sync.Mutex // one request at a time: the next stdout line is its answer
		in  io.Writer
		out *bufio.Reader
	}
	var (
		mu       sync.Mutex
		sessions = map[string]*child{}
	)
	const maxSessions = 256
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			return
		}
		body = []byte(strings.TrimSpace(string(body)))
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(body, &m) != nil {
			http.Error(w, "not JSON", http.StatusBadRequest)
			return
		}
		mu.Lock()
		c, id := sessions[r.Header.Get("Mcp-Session-Id")], r.Header.Get("Mcp-Session-Id")
		if c == nil && m.Method == "initialize" && len(sessions) < maxSessions {
			cmd := exec.Command(strings.Fields(*relayCmd)[0], strings.Fields(*relayCmd)[1:]...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				mu.Unlock()
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			id = strconv.Itoa(len(sessions) + 1)
			c = &child{in: stdin, out: bufio.NewReaderSize(stdout, 64<<10)}
			sessions[id] = c
		}
		mu.Unlock()
		if c == nil {
			http.Error(w, "no such session", http.StatusNotFound)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, err := c.in.Write(append(body, '\n')); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", id)
		for {
			chunk, err := c.out.ReadSlice('\n')
			if _, werr := w.Write(chunk); werr != nil {
				return
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				return
			}
		}
	})
	srv := &http.Server{Addr: *relayListen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "spillway-load -relay-cmd:", srv.ListenAndServe())
	return 1
}
