package token

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func testSigner(t testing.TB) *Signer {
	s, err := NewSigner(Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}, Key{ID: "k0", Secret: bytes.Repeat([]byte{2}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenRoundTrip(t *testing.T) {
	s := testSigner(t)
	id := testID()
	now := time.Unix(1_800_000_000, 0)
	in := Claims{
		Artifact: id, Method: MethodGet, NotBefore: now.Add(-time.Second), Expires: now.Add(time.Minute),
		CIDR: netip.MustParsePrefix("10.1.0.0/16"), Tenant: "acme", Audience: "sandbox",
	}
	tok, err := s.Mint(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok, id, now)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.KeyID != "k1" || got.Tenant != "acme" || got.Audience != "sandbox" || got.CIDR != in.CIDR ||
		!got.Expires.Equal(in.Expires) || !got.NotBefore.Equal(in.NotBefore) || got.ID == "" || got.Artifact != id {
		t.Fatalf("claims = %+v", got)
	}
}

func TestTokenRejects(t *testing.T) {
	s := testSigner(t)
	id := testID()
	now := time.Unix(1_800_000_000, 0)
	tok, err := s.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	other, _ := NewSigner(Key{ID: "k1", Secret: bytes.Repeat([]byte{9}, 32)})
	foreign, _ := other.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute)})
	tests := []struct {
		name  string
		token string
		id    string
		now   time.Time
		want  error
	}{
		{"ok", tok, id, now, nil},
		{"flipped payload", flip(3), id, now, ErrInvalid},
		{"flipped mac", flip(len(tok) - 3), id, now, ErrInvalid},
		{"wrong artifact", tok, testID(), now, ErrInvalid},
		{"foreign key same id", foreign, id, now, ErrInvalid},
		// The expiry is httpUrlExpiresAt, a promise to the holder: no
		// leeway past it. Leeway applies to not-before only.
		{"at expiry", tok, id, now.Add(time.Minute), ErrExpired},
		{"just past expiry", tok, id, now.Add(time.Minute + time.Millisecond), ErrExpired},
		{"last instant", tok, id, now.Add(time.Minute - time.Millisecond), nil},
		{"expired", tok, id, now.Add(time.Minute + DefaultLeeway), ErrExpired},
		{"not-before within leeway", tok, id, now.Add(-DefaultLeeway + time.Second), nil},
		{"not yet valid", tok, id, now.Add(-DefaultLeeway - time.Second), ErrInvalid},
		{"empty", "", id, now, ErrInvalid},
		{"no dot", strings.ReplaceAll(tok, ".", ""), id, now, ErrInvalid},
		{"two dots", tok + ".x", id, now, ErrInvalid},
		{"padded", tok + "=", id, now, ErrInvalid},
		{"empty id", tok, "", now, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Verify(tt.token, tt.id, tt.now)
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	id := testID()
	now := time.Now()
	old, _ := NewSigner(Key{ID: "k0", Secret: bytes.Repeat([]byte{2}, 32)})
	tok, _ := old.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute)})
	s := testSigner(t) // signs with k1, still verifies k0
	if _, err := s.Verify(tok, id, now); err != nil {
		t.Fatalf("old key no longer verifies: %v", err)
	}
	dropped, _ := NewSigner(Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)})
	if _, err := dropped.Verify(tok, id, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("dropped key still verifies: %v", err)
	}
}

func TestNewSignerRejectsWeakKeys(t *testing.T) {
	if _, err := NewSigner(Key{ID: "k", Secret: make([]byte, 16)}); err == nil {
		t.Fatal("16-byte secret accepted")
	}
	if _, err := NewSigner(Key{ID: "", Secret: make([]byte, 32)}); err == nil {
		t.Fatal("empty key id accepted")
	}
}

func BenchmarkVerify(b *testing.B) {
	s := testSigner(b)
	id := testID()
	now := time.Now()
	tok, _ := s.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute), Tenant: "acme"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok, id, now); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	s := testSigner(f)
	id := testID()
	now := time.Unix(1_800_000_000, 0)
	tok, _ := s.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute), CIDR: netip.MustParsePrefix("::1/128"), Tenant: "t"})
	f.Add(tok)
	f.Add("")
	f.Add("a.b")
	f.Add(tok[:len(tok)/2])
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Verify(token, id, now)
		if err == nil && token != tok {
			// Every field has one spelling: no other string may verify.
			t.Fatalf("re-spelled token verified: %q (%+v)", token, c)
		}
	})
}

// testID is an opaque artifact id: the token package does not care about its shape.
func testID() string { return "art-" + NewID() }

// Token ids are what revocation names: base64url only, so a record's name
// is safe anywhere, and a token cannot carry an id no revocation can name.
func TestTokenIDShape(t *testing.T) {
	s := testSigner(t)
	now := time.Unix(1_800_000_000, 0)
	for _, id := range []string{"a/b", "a b", "..", strings.Repeat("a", 65), "é"} {
		if _, err := s.Mint(Claims{ID: id, Artifact: testID(), Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute)}); !errors.Is(err, ErrBadClaims) {
			t.Errorf("Mint with id %q: %v", id, err)
		}
	}
	for _, id := range []string{"a", "A-_9", strings.Repeat("z", 64), NewID()} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
}

// TestVerifyAllocs: verifying reuses HMACs already keyed (keying one took
// two SHA-256 blocks and five allocations: 14 allocations per Verify), and
// a token verified with a reused HMAC is still told from a forged one.
func TestVerifyAllocs(t *testing.T) {
	s := testSigner(t)
	id := testID()
	now := time.Now()
	tok, err := s.Mint(Claims{Artifact: id, Method: MethodGet, NotBefore: now, Expires: now.Add(time.Minute), Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.Verify(tok, id, now); err != nil {
			t.Fatal(err)
		}
	})
	switch {
	case raceEnabled:
		t.Logf("%.0f allocations per Verify (not bounded under the race detector)", allocs)
	case allocs > 9:
		t.Errorf("%.0f allocations per Verify, want at most 9", allocs)
	}
	forged := tok[:len(tok)-2] + "AA"
	if forged == tok {
		forged = tok[:len(tok)-2] + "BA"
	}
	for range 3 { // alternate, so each check takes an HMAC the other used
		if _, err := s.Verify(forged, id, now); err == nil {
			t.Fatal("a forged MAC verified")
		}
		if _, err := s.Verify(tok, id, now); err != nil {
			t.Fatalf("the genuine token after a forged one: %v", err)
		}
	}
}
