package s3store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store"
)

var testEnv = map[string]string{
	"AWS_ACCESS_KEY_ID":     "AKIDEXAMPLE",
	"AWS_SECRET_ACCESS_KEY": "s3cr3t-value",
	"AWS_SESSION_TOKEN":     "session-tok",
	"AWS_REGION":            "eu-west-1",
}

func getenv(k string) string { return testEnv[k] }

func TestParseURL(t *testing.T) {
	creds := s3store.Options{AccessKey: "AKIDEXAMPLE", SecretKey: "s3cr3t-value", SessionToken: "session-tok"}
	with := func(o s3store.Options) s3store.Options {
		o.AccessKey, o.SecretKey, o.SessionToken = creds.AccessKey, creds.SecretKey, creds.SessionToken
		return o
	}
	for _, tc := range []struct {
		in      string
		want    s3store.Options
		wantErr string
	}{
		{in: "s3://spillway?endpoint=127.0.0.1:9000&secure=false",
			want: with(s3store.Options{Endpoint: "127.0.0.1:9000", Bucket: "spillway", Region: "eu-west-1"})},
		{in: "s3://bk1/a/b/?endpoint=minio:9000&region=us-east-1&create=true&lifecycle-days=2&part-size=8MiB",
			want: with(s3store.Options{Endpoint: "minio:9000", Bucket: "bk1", Prefix: "a/b/", Secure: true, Region: "us-east-1",
				CreateBucket: true, LifecycleDays: 2, PartSize: 8 << 20})},
		{in: "s3://bk1?endpoint=h:9000&max-puts=8&max-puts-per-tenant=2",
			want: with(s3store.Options{Endpoint: "h:9000", Bucket: "bk1", Secure: true, Region: "eu-west-1", MaxPuts: 8, MaxPutsPerTenant: 2})},
		{in: "s3://spillway?endpoint=h:9000&max-puts=0", wantErr: "max-puts"},
		{in: "s3://spillway?endpoint=h:9000&max-puts-per-tenant=-1", wantErr: "max-puts-per-tenant"},
		{in: "s3://bk1/p?endpoint=s3.example.com&part-size=6291456&secure=1",
			want: with(s3store.Options{Endpoint: "s3.example.com", Bucket: "bk1", Prefix: "p/", Secure: true, Region: "eu-west-1", PartSize: 6 << 20})},
		{in: "s3://bk1?endpoint=[::1]:9000",
			want: with(s3store.Options{Endpoint: "[::1]:9000", Bucket: "bk1", Secure: true, Region: "eu-west-1"})},
		{in: "s3://bk1?endpoint=h:9000&timeout=2s&idle-timeout=1m30s",
			want: with(s3store.Options{Endpoint: "h:9000", Bucket: "bk1", Secure: true, Region: "eu-west-1", Timeout: 2 * time.Second, IdleTimeout: 90 * time.Second})},
		{in: "s3://spillway?endpoint=h:9000&timeout=0s", wantErr: "timeout="},
		{in: "s3://spillway?endpoint=h:9000&timeout=-1s", wantErr: "timeout="},
		{in: "s3://spillway?endpoint=h:9000&idle-timeout=11m", wantErr: "idle-timeout="},
		{in: "s3://spillway?endpoint=h:9000&idle-timeout=5", wantErr: "idle-timeout="},
		{in: "s3://spillway", wantErr: "endpoint parameter is required"},
		{in: "s3://spillway?endpoint=http://h:9000", wantErr: "no scheme"},
		{in: "s3://spillway?endpoint=h:99999", wantErr: "bad port"},
		{in: "s3://spillway?endpoint=h:9000/x", wantErr: "no scheme or path"},
		{in: "s3://key:secret@spillway?endpoint=h:9000", wantErr: "credentials in the URL"},
		{in: "http://spillway?endpoint=h:9000", wantErr: "want s3://"},
		{in: "s3:spillway?endpoint=h:9000", wantErr: "want s3://"},
		{in: "s3:///p?endpoint=h:9000", wantErr: "want s3://"},
		{in: "s3://spillway?endpoint=h:9000#frag", wantErr: "fragment"},
		{in: "s3://spillway?endpoint=h:9000&endpoint=g:9000", wantErr: "given 2 times"},
		{in: "s3://spillway?endpoint=h:9000&secure=maybe", wantErr: "secure="},
		{in: "s3://spillway?endpoint=h:9000&create=yes", wantErr: "create="},
		{in: "s3://spillway?endpoint=h:9000&lifecycle-days=-1", wantErr: "lifecycle-days"},
		{in: "s3://spillway?endpoint=h:9000&part-size=1MiB", wantErr: "part size"},
		{in: "s3://spillway?endpoint=h:9000&part-size=6GiB", wantErr: "part-size"},
		{in: "s3://spillway?endpoint=h:9000&part-size=lots", wantErr: "part-size"},
		{in: "s3://spillway?endpoint=h:9000&acl=public", wantErr: `unknown parameter "acl"`},
		{in: "s3://spillway?endpoint=h:9000&region=a/b", wantErr: "region"},
		{in: "s3://spillway/../x?endpoint=h:9000", wantErr: "segment"},
		{in: "s3://spillway/a//b?endpoint=h:9000", wantErr: "segment"},
		{in: "s3://spillway/a%00b?endpoint=h:9000", wantErr: "control"},
		{in: "s3://Bad_Bucket!?endpoint=h:9000", wantErr: "bucket"},
		{in: "s3://x?endpoint=h:9000", wantErr: "bucket"},
		{in: "s3://spillway?endpoint=h:9000&x=%zz", wantErr: "query"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := s3store.ParseURLEnv(tc.in, getenv)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, artifact.ErrInvalid) {
					t.Fatalf("ParseURL = %+v, %v; want an ErrInvalid containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("ParseURL =\n %+v\nwant\n %+v", got, tc.want)
			}
			if strings.Contains(got.String(), "s3cr3t") || strings.Contains(got.String(), "AKID") {
				t.Errorf("String() shows credentials: %s", got)
			}
		})
	}
}

func TestParseURLFromEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "ak")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "sk")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_REGION", "r1")
	o, err := s3store.ParseURL("s3://bucket?endpoint=h:1")
	if err != nil {
		t.Fatal(err)
	}
	if o.AccessKey != "ak" || o.SecretKey != "sk" || o.Region != "r1" {
		t.Errorf("ParseURL took %+v from the environment", o)
	}
}

// FuzzParseURL: ParseURL never panics, rejects with ErrInvalid, and what
// it accepts is well-formed, credential-free in String and reads back the same.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"s3://spillway?endpoint=127.0.0.1:9000&secure=false",
		"s3://bk1/a/b/?endpoint=minio:9000&region=us-east-1&create=true&lifecycle-days=2&part-size=8MiB",
		"s3://bk1/p%20q?endpoint=[::1]:9000&part-size=6291456",
		"s3://bk1?endpoint=h:1&timeout=250ms&idle-timeout=2m",
		"s3://bk1?endpoint=h:1&max-puts=8&max-puts-per-tenant=2",
		"s3://bk1/%2e%2e/x?endpoint=h",
		"s3://u:p@b1?endpoint=h:1",
		"s3://bk1/é/ü?endpoint=h:1#x",
		"s3://bk1?endpoint=h:1&endpoint=h:2",
		"s3:b1",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := s3store.ParseURLEnv(s, getenv)
		if err != nil {
			if !errors.Is(err, artifact.ErrInvalid) {
				t.Fatalf("ParseURL(%q) error does not wrap ErrInvalid: %v", s, err)
			}
			return
		}
		if o.Endpoint == "" || o.Bucket == "" || strings.ContainsAny(o.Endpoint, "/?#@") {
			t.Fatalf("ParseURL(%q) accepted %+v", s, o)
		}
		if o.Prefix != "" && (!strings.HasSuffix(o.Prefix, "/") || strings.HasPrefix(o.Prefix, "/") ||
			strings.Contains(o.Prefix, "//") || strings.Contains("/"+o.Prefix, "/../") || strings.Contains("/"+o.Prefix, "/./")) {
			t.Fatalf("ParseURL(%q) accepted prefix %q", s, o.Prefix)
		}
		if o.PartSize != 0 && (o.PartSize < s3store.MinPartSize || o.PartSize > s3store.MaxPartSize) || o.LifecycleDays < 0 ||
			o.Timeout < 0 || o.Timeout > s3store.MaxTimeout || o.IdleTimeout < 0 || o.IdleTimeout > s3store.MaxTimeout {
			t.Fatalf("ParseURL(%q) accepted %+v", s, o)
		}
		if o.AccessKey != testEnv["AWS_ACCESS_KEY_ID"] || o.SecretKey != testEnv["AWS_SECRET_ACCESS_KEY"] {
			t.Fatalf("credentials not from the environment: %+v", o)
		}
		str := o.String()
		if strings.Contains(str, testEnv["AWS_SECRET_ACCESS_KEY"]) || strings.Contains(str, testEnv["AWS_SESSION_TOKEN"]) {
			t.Fatalf("String() = %q shows credentials", str)
		}
		back, err := s3store.ParseURLEnv(str, getenv)
		if err != nil {
			t.Fatalf("ParseURL(%q) = %+v, whose String %q does not parse: %v", s, o, str, err)
		}
		if back != o {
			t.Fatalf("round trip of %q through %q:\n got %+v\nwant %+v", s, str, back, o)
		}
	})
}
