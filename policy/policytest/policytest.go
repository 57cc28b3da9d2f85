//go:build unix

package policytest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Trap counts connections and requests to its listener and opens of its
// named pipe.
// Create it with New; safe for concurrent use.
type Trap struct {
	// URL is the base of an HTTP server on loopback that answers "{}" to
	// anything (so that a fetched schema or response would be usable).
	URL string
	// FIFO is a named pipe; every open of it for reading is counted.
	FIFO string

	conns, reqs, opens atomic.Int64
}

// countingListener counts the connections it accepts in n.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

// Accept accepts a connection and counts it.
func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// New starts a trap; it stops when t ends.
func New(t testing.TB) *Trap {
	t.Helper()
	tr := &Trap{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tr.reqs.Add(1) // a kept-alive connection is accepted once
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("{}"))
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go srv.Serve(countingListener{ln, &tr.conns})
	tr.URL = "http://" + ln.Addr().String()

	tr.FIFO = filepath.Join(t.TempDir(), "secret.json")
	if err := syscall.Mkfifo(tr.FIFO, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tr.watchFIFO(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		srv.Close()
	})
	return tr
}

// watchFIFO notices readers: opening a named pipe for writing without
// blocking succeeds only while a reader has it open (a reader's open
// blocks until a writer comes, so none is missed). The reader is given
// "{}" and end of file, so that it carries on as with a real file.
func (tr *Trap) watchFIFO(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
		fd, err := syscall.Open(tr.FIFO, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENXIO) {
			continue
		}
		if err != nil {
			return
		}
		tr.opens.Add(1)
		syscall.Write(fd, []byte("{}"))
		syscall.Close(fd)
		time.Sleep(10 * time.Millisecond) // let the reader see EOF and close
	}
}

// Check fails t if anything reached the trap since the last Check; what
// says which step was just taken. A late attempt is given a moment to
// show up.
func (tr *Trap) Check(t testing.TB, what string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	if c, r, f := tr.conns.Swap(0), tr.reqs.Swap(0), tr.opens.Swap(0); c != 0 || r != 0 || f != 0 {
		t.Errorf("%s: the policy got out of the sandbox: %d connection(s) and %d request(s) to the listener, %d read(s) of a local file", what, c, r, f)
	}
}

// Policy is a policy folder that tries one way out.
type Policy struct {
	Name string
	Dir  string
	// Files are the folder's contents by name (to build a bundle from).
	Files map[string]string
	// MustRefuse is false for exits the sandbox allows to compile but
	// that must still reach nothing (a JWT header naming a key URL).
	MustRefuse bool
}

// Exit is one Rego expression that tries to get out.
type Exit struct {
	Name, Expr string
	Allowed    bool // the built-in is available; evaluating it must reach nothing
}

// Exits lists every known way out, aimed at the trap.
func (tr *Trap) Exits() []Exit {
	file := "file://" + tr.FIFO
	return []Exit{
		{Name: "http.send", Expr: `http.send({"method": "GET", "url": "` + tr.URL + `/http.send", "raise_error": false})`},
		{Name: "net.lookup_ip_addr", Expr: `net.lookup_ip_addr("localhost")`},
		{Name: "opa.runtime", Expr: `opa.runtime().env`},
		{Name: "json.verify_schema http", Expr: `json.verify_schema({"$ref": "` + tr.URL + `/verify.json"})`},
		{Name: "json.verify_schema file", Expr: `json.verify_schema({"$ref": "` + file + `"})`},
		{Name: "json.verify_schema rebased", Expr: `json.verify_schema({"$id": "` + tr.URL + `/", "$ref": "rebased.json"})`},
		{Name: "json.match_schema http", Expr: `json.match_schema({}, {"$ref": "` + tr.URL + `/match.json"})`},
		{Name: "json.match_schema file", Expr: `json.match_schema({}, {"$ref": "` + file + `"})`},
		{Name: "io.jwt jku", Expr: `io.jwt.decode_verify("` + tr.jwt() + `", {"secret": "k"})`, Allowed: true},
	}
}

// jwt is an HS256 token (key "k") whose header points at the trap for
// its keys (jku, x5u): a verifier that fetched them would be caught.
func (tr *Trap) jwt() string {
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(`{"alg":"HS256","typ":"JWT","jku":"`+tr.URL+`/jwks.json","x5u":"`+tr.URL+`/x5u.pem"}`)) + "." + enc([]byte(`{"sub":"x"}`))
	m := hmac.New(sha256.New, []byte("k"))
	m.Write([]byte(signing))
	return signing + "." + enc(m.Sum(nil))
}

const clean = `package spillway

fetch := {"allow": true}

offload := {"offload": false}

mint := {"allow": true}
`

// Policies writes one folder per exit and per place it can hide: in a
// decision (reached by every evaluation and by the folder's own test), in
// a Rego test only, and in the schema annotations the compiler reads.
func (tr *Trap) Policies(t testing.TB) []Policy {
	t.Helper()
	var ps []Policy
	for _, e := range tr.Exits() {
		ps = append(ps,
			Policy{Name: e.Name + " in a decision", MustRefuse: !e.Allowed, Files: map[string]string{
				"p.rego":      strings.Replace(clean, `fetch := {"allow": true}`, `fetch := {"allow": true, "x": `+e.Expr+`}`, 1),
				"p_test.rego": "package spillway_test\n\nimport data.spillway\n\ntest_fetch if spillway.fetch.allow\n",
			}},
			Policy{Name: e.Name + " in a test", MustRefuse: !e.Allowed, Files: map[string]string{
				"p.rego":      clean,
				"p_test.rego": "package spillway_test\n\ntest_exit if {\n\tx := " + e.Expr + "\n\tx == x\n}\n",
			}})
	}
	for name, ref := range map[string]string{"http": tr.URL + "/annotation.json", "file": "file://" + tr.FIFO} {
		ps = append(ps, Policy{Name: "schema annotation " + name, Files: map[string]string{
			"p.rego": "# METADATA\n# schemas:\n#   - input: {\"$ref\": \"" + ref + "\"}\n" + clean,
		}})
	}
	for i := range ps {
		ps[i].Dir = t.TempDir()
		for n, body := range ps[i].Files {
			if err := os.WriteFile(filepath.Join(ps[i].Dir, n), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return ps
}
