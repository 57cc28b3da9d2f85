package identity

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact/token"
)

func authAs(t *testing.T, ts *Tenants, hdr ...string) (string, error) {
	t.Helper()
	r, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	for _, h := range hdr {
		r.Header.Add("Authorization", h)
	}
	return ts.Authenticate(r)
}

func TestParseTenants(t *testing.T) {
	const padded = "c2VjcmV0LXRva2VuLTAxMjM0NTY3OA==" // base64 with padding
	tests := []struct {
		in      string
		want    map[string]string // token → tenant
		wantErr string
	}{
		{in: "", want: map[string]string{}},
		{in: " , ", want: map[string]string{}},
		{in: "alice-token-0123456789=alice, bob-token-0123456789 = bob",
			want: map[string]string{"alice-token-0123456789": "alice", "bob-token-0123456789": "bob"}},
		// Finding 10: the first "=" used to split, so padded tokens broke.
		{in: padded + "=acme", want: map[string]string{padded: "acme"}},
		{in: "abcdefghijklmnop=team:a@b.c_d-e", want: map[string]string{"abcdefghijklmnop": "team:a@b.c_d-e"}},
		{in: "abcdefghijklmnop", wantErr: "entry 1: want token=tenant"},
		{in: "abcdefghijklmnop=acme,short=acme", wantErr: "entry 2: the token must be"},
		{in: "abcdefghijklmnop=", wantErr: "the tenant must be"},
		{in: "abcdefghijklmnop=ac me", wantErr: "the tenant must be"},
		{in: "abcdefgh!jklmnop=acme", wantErr: "the token must be"},
		{in: "================x=acme", wantErr: "the token must be"},
		{in: "abcdefghijklmnop=a,abcdefghijklmnop=b", wantErr: "entry 2: the same token is listed twice"},
	}
	for _, tt := range tests {
		ts, err := ParseTenants(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTenants(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTenants(%q): %v", tt.in, err)
			continue
		}
		if ts.Required() != (len(tt.want) > 0) {
			t.Errorf("ParseTenants(%q).Required() = %v", tt.in, ts.Required())
		}
		for tok, tenant := range tt.want {
			if got, err := authAs(t, ts, "Bearer "+tok); err != nil || got != tenant {
				t.Errorf("ParseTenants(%q): token %q → %q, %v; want %q", tt.in, tok, got, err, tenant)
			}
		}
	}
}

func TestParseTenantsErrorsHideTheToken(t *testing.T) {
	for _, in := range []string{"s3cret-but-bad!=acme", "acme=s3cret-token-0123456789 x", "s3cret-token-0123456789"} {
		_, err := ParseTenants(in)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseTenants(%q) err = %v", in, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	ts, err := ParseTenants("alice-token-0123456789=alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, hdr := range [][]string{nil, {"Bearer nope-nope-nope-nope"}, {"Basic alice-token-0123456789"},
		{"Bearer alice-token-0123456789", "Bearer alice-token-0123456789"}, {"Bearer"}} {
		if got, err := authAs(t, ts, hdr...); !errors.Is(err, ErrUnauthenticated) || got != "" {
			t.Errorf("Authorization %q → %q, %v", hdr, got, err)
		}
	}
	if got, err := authAs(t, ts, "bearer  alice-token-0123456789 "); err != nil || got != "alice" {
		t.Errorf("lower-case scheme → %q, %v", got, err)
	}
	var none *Tenants
	if got, err := authAs(t, none); err != nil || got != "" || none.Required() {
		t.Errorf("nil Tenants → %q, %v", got, err)
	}
}

func TestParseTenantsFile(t *testing.T) {
	ts, err := ParseTenantsFile([]byte("# team tokens\r\n\n  alice-token-0123456789=alice\r\nc2VjcmV0LXRva2VuLTAxMjM0NTY3OA===bob\n   # indented comment\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := authAs(t, ts, "Bearer c2VjcmV0LXRva2VuLTAxMjM0NTY3OA=="); got != "bob" {
		t.Errorf("padded token → %q", got)
	}
	if _, err := ParseTenantsFile([]byte("# ok\nalice-token-0123456789=alice\nbroken\n")); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("bad line: err = %v", err)
	}
	if _, err := ParseTenantsFile([]byte("alice-token-0123456789=alice # trailing comments are not comments\n")); err == nil {
		t.Error("trailing comment accepted")
	}
}

func TestReadTenantsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alice-token-0123456789=alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := ReadTenantsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := authAs(t, ts, "Bearer alice-token-0123456789"); got != "alice" {
		t.Errorf("token → %q", got)
	}
	for _, mode := range []os.FileMode{0o644, 0o604, 0o620, 0o660} {
		os.Chmod(path, mode)
		if _, err := ReadTenantsFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %#o: err = %v", mode, err)
		}
	}
	if _, err := ReadTenantsFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

// --auth-tokens-file and --key-file obey one rule (token.ReadSecretFile),
// fit for Kubernetes secret volumes: group-readable with this process's
// group (fsGroup) and a projected volume's 0644 files are accepted, as
// they are for the key file; a plain world-readable file is refused by both.
func TestTokensFileModeRuleIsTheKeyFiles(t *testing.T) {
	const tokens = "alice-token-0123456789=alice\n"
	plain := func(mode os.FileMode) string {
		path := filepath.Join(t.TempDir(), "tokens")
		os.WriteFile(path, []byte(tokens), mode)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	projected := func(mode os.FileMode) string {
		dir := t.TempDir()
		ts := filepath.Join(dir, "..2026_11_26_07_00_00.000000001")
		os.Mkdir(ts, 0o755)
		os.WriteFile(filepath.Join(ts, "tokens"), []byte(tokens), mode)
		os.Chmod(filepath.Join(ts, "tokens"), mode)
		os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data"))
		os.Symlink(filepath.Join("..data", "tokens"), filepath.Join(dir, "tokens"))
		return filepath.Join(dir, "tokens")
	}
	for _, tc := range []struct {
		name string
		path string
		ok   bool
	}{
		{"0640, this process's group", plain(0o640), true},
		{"0440, this process's group", plain(0o440), true},
		{"projected volume, 0644", projected(0o644), true},
		{"projected volume, 0664", projected(0o664), false},
		{"plain 0644", plain(0o644), false},
	} {
		_, err := ReadTenantsFile(tc.path)
		_, rerr := token.ReadSecretFile(tc.path)
		if tc.ok != (err == nil) || (err == nil) != (rerr == nil) {
			t.Errorf("%s: tokens file err = %v, secret file rule err = %v, want ok=%v for both", tc.name, err, rerr, tc.ok)
		}
	}
}

// checkParsed asserts what every successful parse promises: each token it
// accepted authenticates as a tenant of the allowed shape.
func checkParsed(t *testing.T, ts *Tenants) {
	for _, e := range ts.tokens {
		if !validTenant(e.tenant) {
			t.Fatalf("tenant %q accepted", e.tenant)
		}
	}
}

func FuzzParseTenants(f *testing.F) {
	for _, s := range []string{"", "alice-token-0123456789=alice, bob-token-0123456789=bob",
		"c2VjcmV0LXRva2VuLTAxMjM0NTY3OA===acme", "a=b=c", ",,=,", "abcdefghijklmnop=a,abcdefghijklmnop=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTenants(s)
		if err != nil {
			return
		}
		checkParsed(t, ts)
		// Every accepted entry authenticates as the tenant after its last "=".
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			i := strings.LastIndexByte(item, '=')
			tok, tenant := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
			if got, err := authAs(t, ts, "Bearer "+tok); err != nil || got != tenant {
				t.Fatalf("%q: token %q → %q, %v", s, tok, got, err)
			}
		}
	})
}

func FuzzParseTenantsFile(f *testing.F) {
	for _, s := range []string{"", "# c\nalice-token-0123456789=alice\r\n\nbob-token-0123456789=bob\n",
		"c2VjcmV0LXRva2VuLTAxMjM0NTY3OA===acme", "x\n#\n=\n", strings.Repeat("a", 5000) + "=b"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := ParseTenantsFile(b)
		if err != nil {
			return
		}
		checkParsed(t, ts)
		// The file and the flag forms agree on content without commas.
		if !strings.ContainsAny(string(b), ",#") {
			flag, err := ParseTenants(strings.ReplaceAll(string(b), "\n", ","))
			if err != nil || len(flag.tokens) != len(ts.tokens) {
				t.Fatalf("flag form of %q: %v", b, err)
			}
		}
	})
}

// Count counts tenants, not tokens.
func TestTenantsCount(t *testing.T) {
	var none *Tenants
	two, err := ParseTenants("tok-aaaaaaaaaaaaaaaa=A,tok-bbbbbbbbbbbbbbbb=B,tok-cccccccccccccccc=A")
	if err != nil {
		t.Fatal(err)
	}
	if none.Count() != 0 || two.Count() != 2 {
		t.Fatalf("Count: nil %d, two tenants of three tokens %d", none.Count(), two.Count())
	}
}
