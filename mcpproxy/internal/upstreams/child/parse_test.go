package child

import (
	"slices"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	c, err := ParseCommand(`python3 -m "my server" --name 'a b'`)
	if err != nil || c.Path != "python3" || !slices.Equal(c.Args, []string{"-m", "my server", "--name", "a b"}) {
		t.Fatalf("ParseCommand = %+v, %v", c, err)
	}
	for _, bad := range []string{`x "open`, ``, " \t\n"} {
		if _, err := ParseCommand(bad); err == nil {
			t.Errorf("ParseCommand(%q) succeeded", bad)
		}
	}
}

// FuzzParseCommand: --upstream-cmd comes from configuration. Whatever it
// says, parsing does not panic, and arguments quoted back (single quotes,
// or double where an argument holds a single one) parse to themselves.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{`npx -y "@scope/server" --dir '/a b'`, `a "b'c" 'd"e'`, `"" x`, "a\tb\nc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCommand(s)
		if err != nil {
			return
		}
		args := append([]string{c.Path}, c.Args...)
		var quoted []string
		for _, a := range args {
			switch {
			case !strings.Contains(a, "'"):
				quoted = append(quoted, "'"+a+"'")
			case !strings.Contains(a, `"`):
				quoted = append(quoted, `"`+a+`"`)
			default:
				return // needs both quotes: not expressible as one quoted word
			}
		}
		again, err := ParseCommand(strings.Join(quoted, " "))
		if err != nil || again.Path != c.Path || !slices.Equal(again.Args, c.Args) {
			t.Fatalf("%q parsed to %q; quoted back %q to %+v, %v", s, args, quoted, again, err)
		}
	})
}
