package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// putMain stores one file (or stdin) and prints its resource_link JSON.
func putMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("put", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf storeFlags
	sf.register(fs)
	ttl := fs.Duration("ttl", 0, "lifetime of the artifact and its link (default --default-ttl)")
	mimeType := fs.String("mime", "", "mime `type` (default: from the file name, else sniffed)")
	name := fs.String("name", "", "artifact `name` (default: the file's base name)")
	tenant := fs.String("tenant", "", "owning `tenant`")
	listen := fs.String("listen", "127.0.0.1:8080", "address of the serving instance, for the default --public-url")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: spillway put FILE|- [flags]\n\nStores FILE (- for stdin) and prints a resource_link with a signed httpUrl.")
		fs.PrintDefaults()
	}
	// Flags may come before or after FILE.
	var file string
	if len(args) > 0 && (args[0] == "-" || len(args[0]) > 0 && args[0][0] != '-') {
		file, args = args[0], args[1:]
	}
	if err := parseLayered(fs, args, getenv); err != nil {
		return 2
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if file == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	log, err := sf.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "spillway put:", err)
		return 2
	}
	if err := put(ctx, &sf, *listen, file, *ttl, *mimeType, *name, *tenant, stdin, stdout, log); err != nil {
		fmt.Fprintln(stderr, "spillway put:", err)
		return 1
	}
	return 0
}

func put(ctx context.Context, sf *storeFlags, listen, file string, ttl time.Duration, mimeType, name, tenant string, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	d, err := sf.open(ctx, log, io.Discard, "http://"+listen)
	if err != nil {
		return err
	}
	defer d.Close()
	var r io.Reader = stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
		if name == "" {
			name = filepath.Base(file)
		}
		if mimeType == "" {
			mimeType = mime.TypeByExtension(filepath.Ext(file))
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if mimeType == "" {
		head, _ := br.Peek(512)
		mimeType = http.DetectContentType(head)
	}
	a, l, err := d.svc.Publish(ctx, artifact.Artifact{Name: name, MimeType: mimeType, Tenant: tenant, Source: "cli"}, br,
		artifact.LinkOptions{TTL: ttl, Tenant: tenant, Source: "cli"})
	if err != nil {
		return err
	}
	log.Info("stored", "artifact", a.ID, "size", a.Size)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(artifact.NewResourceLink(a, l))
}
